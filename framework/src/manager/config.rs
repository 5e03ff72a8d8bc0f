//! [`ManagerConfig`]: what one manager runs with, and how the generic flags map onto it, so
//! every binary built on the framework (the stock one and embedders' distros) reads its flags the
//! same way.

use std::net::SocketAddr;
use std::time::Duration;

use crate::admin::{AdminOptions, DelegatedAuthConfig, RequestHeaderFlags};
use crate::leader::{LeaderElectionConfig, default_identity};
use crate::options::feature_gates::WATCH_LIST_CLIENT;
use crate::options::{AllowPaths, DebuggingOptions, GenericOptions, ServingOptions};
use crate::profiling::Profiling;
use crate::serving::{ServingCert, SocketSharing};
use crate::shard::ShardAssignment;

/// The default [`ManagerConfig::event_flush_timeout`].
pub const DEFAULT_EVENT_FLUSH_TIMEOUT: Duration = Duration::from_secs(2);

/// Settings of a manager, usually filled from [`crate::options::GenericOptions`].
#[derive(Clone, Debug)]
pub struct ManagerConfig {
    /// Manager name: metrics label, default Lease name, event host.
    pub name: String,
    /// The `--controllers` list.
    pub controllers: Vec<String>,
    /// Pause (with jitter up to 100 %) between controller starts.
    pub controller_start_interval: Duration,
    /// Informer resync base; the factory draws period × U[1,2) once. `None` disables resync.
    pub min_resync_period: Option<Duration>,
    /// How long to wait for every cache before giving up.
    pub cache_sync_timeout: Duration,
    /// Informers sync through streaming lists where the server serves them (client-go's
    /// `WatchListClient` gate, `--feature-gates=WatchListClient=false` turns it off); see
    /// [`crate::informer::SharedInformerFactory::with_watch_list`].
    pub watch_list: bool,
    /// What the shared cache keeps of each kind (selectors, namespaces, uncached reads,
    /// transforms); see [`crate::informer::CacheOptions`].
    pub cache: crate::informer::CacheOptions,
    /// How long in-flight reconciles may take after shutdown is requested.
    pub graceful_shutdown_timeout: Duration,
    /// How long, once the controllers stopped, event recorders get to write what they still
    /// hold (within what is left of [`Self::graceful_shutdown_timeout`]); the rest is counted in
    /// `events_dropped_total`. Short by default: at 20 QPS a writer thousands of events behind
    /// would hold the process for the whole graceful timeout, and upstream waits for none.
    pub event_flush_timeout: Duration,
    /// Run controllers only while holding this Lease.
    pub leader_election: Option<LeaderElectionConfig>,
    /// With leader election, register every selected controller's informers and handlers and
    /// keep the caches synced while waiting for the Lease; on winning it, run the start hook and
    /// start the workers from the warm cache. No effect without leader election.
    pub warm_standby: bool,
    /// Controllers (names or aliases, each also selected by `controllers`) that run on every
    /// replica at once, each reconciling the keys its shard ring assigns it, with no Lease to
    /// win. The others still run on the Lease holder only, from a warm cache: the one shared
    /// cache serves both, so a non-empty list implies [`Self::warm_standby`].
    pub sharded_controllers: Vec<String>,
    /// How the sharded controllers' keys reach their replicas (`--shard-assignment`): `hash`
    /// (the default) or `label` ([`crate::shard::ShardAssignment`]); checked by
    /// [`super::Manager::validate`].
    pub shard_assignment: String,
    /// Serve /healthz, /readyz, /livez, /metrics here.
    pub admin_addr: Option<SocketAddr>,
    /// Serve them over HTTPS with this certificate (upstream's secure serving); `None` serves
    /// plain HTTP, for tests, `--dev` and embedders behind their own TLS.
    pub admin_tls: Option<ServingCert>,
    /// The rest of the admin server's setup: TLS flags, socket sharing, delegated auth (applied
    /// only over HTTPS), `/configz`.
    pub admin: AdminOptions,
}

impl ManagerConfig {
    /// Defaults in line with controller-runtime: 2 min cache sync, 30 s graceful shutdown; events
    /// get 2 s of it to be written.
    pub fn new(name: impl Into<String>) -> Self {
        ManagerConfig {
            name: name.into(),
            controllers: vec!["*".to_string()],
            controller_start_interval: Duration::ZERO,
            min_resync_period: None,
            cache_sync_timeout: Duration::from_secs(120),
            watch_list: true,
            cache: crate::informer::CacheOptions::default(),
            graceful_shutdown_timeout: Duration::from_secs(30),
            event_flush_timeout: DEFAULT_EVENT_FLUSH_TIMEOUT,
            leader_election: None,
            warm_standby: false,
            sharded_controllers: Vec::new(),
            shard_assignment: ShardAssignment::Hash.to_string(),
            admin_addr: None,
            admin_tls: None,
            admin: AdminOptions::default(),
        }
    }
    /// The configuration the generic flags describe: `--controllers`, `--controller-start-interval`,
    /// `--min-resync-period`, `--secure-port`/`--bind-address` (port 0 turns the admin server off)
    /// served over HTTPS as upstream (`--tls-cert-file`/`--tls-private-key-file`, else a
    /// self-signed pair kept in `--cert-dir` if given; the pair is named after the manager),
    /// and the `--leader-elect*` group. The Lease is named `name` unless
    /// `--leader-elect-resource-name` says otherwise, and held as [`default_identity`].
    pub fn from_options(name: impl Into<String>, options: &GenericOptions) -> Self {
        let mut config = ManagerConfig::new(name);
        config.controllers = options.controllers.clone();
        config.sharded_controllers = options.sharded_controllers.clone();
        config.shard_assignment = options.shard_assignment.clone();
        config.controller_start_interval = options.controller_start_interval.get();
        config.min_resync_period = Some(options.min_resync_period.get());
        // Bad gates are reported by validate(); the default stands until then.
        if let Ok(gates) = options.feature_gates() {
            config.watch_list = gates.enabled(WATCH_LIST_CLIENT);
        }
        let serving = &options.serving;
        if serving.secure_port != 0 {
            config.admin_addr = Some(SocketAddr::new(serving.bind_address, serving.secure_port));
            config.admin_tls = Some(ServingCert::from_flags(
                serving.tls_cert_file.as_deref(),
                serving.tls_private_key_file.as_deref(),
                serving.cert_dir.as_deref(),
                &config.name,
            ));
            config.admin = AdminOptions {
                profiling: profiling(&options.debugging),
                ..admin_options(serving, &config.name)
            };
        }
        let le = &options.leader_election;
        if le.leader_elect {
            config.leader_election = Some(LeaderElectionConfig {
                lease_name: le
                    .leader_elect_resource_name
                    .clone()
                    .unwrap_or_else(|| config.name.clone()),
                lease_namespace: le.leader_elect_resource_namespace.clone(),
                identity: default_identity(),
                lease_duration: le.leader_elect_lease_duration.get(),
                renew_deadline: le.leader_elect_renew_deadline.get(),
                retry_period: le.leader_elect_retry_period.get(),
                release_on_cancel: le.leader_elect_release_on_cancel,
            });
            config.warm_standby = le.leader_elect_warm_standby;
        }
        config
    }
}

/// The secure-serving, authentication and authorization flags as admin-server settings.
fn admin_options(serving: &ServingOptions, name: &str) -> AdminOptions {
    let tls = serving.tls_settings().unwrap_or_else(|errors| {
        // validate() reports these before anything starts; an embedder that skipped it gets
        // the defaults and this line.
        tracing::error!(?errors, "invalid TLS flags; serving with the defaults");
        Default::default()
    });
    let (authn, authz) = (&serving.authentication, &serving.authorization);
    let list = crate::options::non_empty;
    AdminOptions {
        tls,
        sharing: SocketSharing {
            reuse_port: serving.permit_port_sharing,
            reuse_address: serving.permit_address_sharing,
        },
        auth: Some(DelegatedAuthConfig {
            authentication_kubeconfig: authn.authentication_kubeconfig.clone(),
            authorization_kubeconfig: authz.authorization_kubeconfig.clone(),
            skip_lookup: authn.authentication_skip_lookup,
            tolerate_lookup_failure: authn.authentication_tolerate_lookup_failure,
            token_cache_ttl: authn.authentication_token_webhook_cache_ttl.get(),
            client_ca_file: authn.client_ca_file.clone(),
            request_header: RequestHeaderFlags {
                client_ca_file: authn.requestheader_client_ca_file.clone(),
                allowed_names: list(&authn.requestheader_allowed_names),
                username_headers: list(&authn.requestheader_username_headers),
                uid_headers: list(&authn.requestheader_uid_headers),
                group_headers: list(&authn.requestheader_group_headers),
                extra_prefixes: list(&authn.requestheader_extra_headers_prefix),
            },
            always_allow_paths: AllowPaths::parse(&list(&authz.authorization_always_allow_paths))
                .unwrap_or_default(),
            authorized_ttl: authz.authorization_webhook_cache_authorized_ttl.get(),
            unauthorized_ttl: authz.authorization_webhook_cache_unauthorized_ttl.get(),
            user_agent: name.to_string(),
        }),
        configz: Default::default(),
        profiling: Default::default(),
    }
}

/// What the admin server serves under `/debug/pprof` (`--profiling` and the heap profiler).
fn profiling(debugging: &DebuggingOptions) -> Profiling {
    Profiling {
        enabled: debugging.profiling,
        heap: debugging.heap_profiler.clone(),
    }
}

/// The ring of a sharded controller; also the value of its Leases' ring label.
pub(super) fn ring_name(manager: &str, controller: &str) -> String {
    format!("{manager}-{controller}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::parse_group;

    fn config(args: &[&str]) -> ManagerConfig {
        ManagerConfig::from_options("my-manager", &parse_group(args).unwrap())
    }

    #[test]
    fn defaults_serve_admin_and_elect_a_leader_named_after_the_manager() {
        let c = config(&[]);
        assert_eq!(c.controllers, vec!["*"]);
        assert_eq!(c.min_resync_period, Some(Duration::from_secs(12 * 3600)));
        assert_eq!(c.admin_addr, Some("0.0.0.0:10258".parse().unwrap()));
        assert_eq!(
            c.admin_tls,
            Some(ServingCert::SelfSigned {
                cert_dir: None,
                pair_name: "my-manager".to_string()
            }),
            "HTTPS with a self-signed pair made in memory, as upstream"
        );
        let le = c.leader_election.expect("leader election is on by default");
        assert_eq!(le.lease_name, "my-manager");
        assert_eq!(le.lease_namespace, "kube-system");
        assert_eq!(le.lease_duration, Duration::from_secs(15));
        assert_eq!(le.renew_deadline, Duration::from_secs(10));
        assert_eq!(le.retry_period, Duration::from_secs(2));
        assert!(!le.identity.is_empty());
    }

    #[test]
    fn flags_override_lease_and_turn_things_off() {
        let c = config(&[
            "--controllers=a,-b",
            "--secure-port=0",
            "--leader-elect-resource-name=other",
            "--leader-elect-resource-namespace=ops",
        ]);
        assert_eq!(c.controllers, vec!["a", "-b"]);
        assert_eq!((c.admin_addr, c.admin_tls), (None, None));
        let le = c.leader_election.expect("still on");
        assert_eq!(
            (le.lease_name.as_str(), le.lease_namespace.as_str()),
            ("other", "ops")
        );
        assert!(config(&["--leader-elect=false"]).leader_election.is_none());
        assert!(
            !config(&[]).warm_standby,
            "cold standby by default, as upstream"
        );
        assert!(config(&["--leader-elect-warm-standby"]).warm_standby);
        assert_eq!(config(&[]).shard_assignment, "hash");
        assert_eq!(
            config(&["--shard-assignment=label"]).shard_assignment,
            "label"
        );
    }

    #[test]
    fn certificate_flags_choose_the_serving_certificate() {
        let c = config(&["--cert-dir=/var/run/ccm"]);
        assert_eq!(
            c.admin_tls,
            Some(ServingCert::SelfSigned {
                cert_dir: Some("/var/run/ccm".into()),
                pair_name: "my-manager".to_string()
            })
        );
        let c = config(&[
            "--tls-cert-file=/etc/ccm/tls.crt",
            "--tls-private-key-file=/etc/ccm/tls.key",
            "--cert-dir=/var/run/ccm",
        ]);
        assert_eq!(
            c.admin_tls,
            Some(ServingCert::Files {
                cert: "/etc/ccm/tls.crt".into(),
                key: "/etc/ccm/tls.key".into(),
            }),
            "files win over --cert-dir, as upstream"
        );
    }

    #[test]
    fn serving_flags_become_admin_options() {
        let c = config(&[
            "--client-ca-file=/etc/ccm/ca.crt",
            "--authorization-always-allow-paths=/healthz,/debug/*",
            "--authentication-token-webhook-cache-ttl=1m",
            "--requestheader-allowed-names=",
            "--permit-port-sharing",
            "--disable-http2-serving",
        ]);
        let auth = c.admin.auth.expect("delegated auth on by default");
        assert_eq!(auth.client_ca_file, Some("/etc/ccm/ca.crt".into()));
        assert!(
            auth.always_allow_paths.allows("/debug/pprof")
                && !auth.always_allow_paths.allows("/metrics")
        );
        assert_eq!(auth.token_cache_ttl, Duration::from_secs(60));
        assert!(auth.request_header.allowed_names.is_empty());
        assert_eq!(auth.request_header.username_headers, vec!["x-remote-user"]);
        assert_eq!(auth.user_agent, "my-manager");
        assert!(c.admin.sharing.reuse_port && !c.admin.sharing.reuse_address);
        assert!(!c.admin.tls.http2);
        assert!(
            config(&["--secure-port=0"]).admin.auth.is_none(),
            "no port, no auth"
        );
    }
}
