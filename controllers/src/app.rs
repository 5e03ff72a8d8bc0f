//! The cloud-controller-manager as a library (upstream `app/`): everything a binary does between
//! parsing its flags and running the controllers, so the stock binary and a distro's own binary
//! share it and a distro's `main` fits on a screen.
//!
//! [`CloudControllerManager::run`] does, in order: validate every flag at once (nothing starts on
//! an error) → start logs and tracing → build the API client and the client builder that gives
//! each controller its own (QPS/burst, user agent, ServiceAccount with
//! `--use-service-account-credentials`) → create the
//! provider named by `--cloud-provider` from `--cloud-config` → refuse a cloud without a cluster
//! ID unless `--allow-untagged-cloud` → wrap it in [`InstrumentedCloud`] (spans, metrics and the
//! `--cloud-api-*` call budget) → run the [`Manager`],
//! which serves health and metrics, wins the Lease, calls the provider's `initialize` (on the
//! leader only, as upstream) and starts the selected controllers.
//!
//! ```no_run
//! use clap::Parser;
//! use cloud_controllers::app::{self, CloudControllerManager, CloudManagerOptions};
//!
//! #[derive(Parser)]
//! struct Cli {
//!     #[command(flatten)]
//!     ccm: CloudManagerOptions,
//! }
//!
//! #[tokio::main]
//! async fn main() -> std::process::ExitCode {
//!     let cli: Cli = app::parse_args();
//!     let shutdown = controller_manager::manager::shutdown_on_signals();
//!     CloudControllerManager::new("my-ccm", cli.ccm).run_to_exit(shutdown).await
//! }
//! ```

mod args;
mod error;
mod flags;
mod repeated;

use std::process::ExitCode;
use std::sync::Arc;

use controller_manager::client::{ClientBuilder, ClientMetrics, client_from_config, load_config};
use controller_manager::manager::{
    Initializer, Initializers, Manager, ManagerConfig, ManagerError,
};
use controller_manager::telemetry;
use controller_manager::webhook::{WebhookInitializer, Webhooks};
use parking_lot::Mutex;
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use crate::cloud::{
    BoxError, CloudMetrics, CloudProvider, CloudProviderRegistry, InitializeContext,
    InstrumentedCloud,
};
use crate::webhooks::cloud_webhooks;
use crate::{CloudContext, cloud_initializers};

pub use args::{
    controllers_help, parse_args, try_parse_args_from, try_parse_args_with, webhooks_help,
};
pub use error::AppError;
pub use flags::CloudManagerOptions;
pub use repeated::{RepeatedFlag, repeated_flags};

/// Where `--use-service-account-credentials` keeps the controllers' ServiceAccounts, as upstream.
pub const SERVICE_ACCOUNT_NAMESPACE: &str = "kube-system";

/// One cloud-controller-manager process: the stock controllers and providers plus whatever a
/// distro adds, over one client, one informer cache and one metrics registry.
pub struct CloudControllerManager {
    name: String,
    options: CloudManagerOptions,
    providers: CloudProviderRegistry,
    initializers: Initializers<CloudContext>,
    webhooks: Webhooks<CloudContext>,
    cloud: Option<Arc<dyn CloudProvider>>,
    client_config: Option<kube::Config>,
    telemetry: bool,
    plain_http_admin: bool,
    /// Providers that could not be registered (empty, reserved or taken names), reported by
    /// [`Self::validate`] with every other start-up error, as controller name clashes are.
    registration_errors: Vec<String>,
}

impl CloudControllerManager {
    /// The stock controllers under `name` (the user agent, Lease name, metrics `manager` label
    /// and trace service name), configured by `options`, and no provider: register yours with
    /// [`Self::provider`] (the stock binary registers the `fake-cloud` crate's `factory` so).
    pub fn new(name: impl Into<String>, options: CloudManagerOptions) -> Self {
        CloudControllerManager {
            name: name.into(),
            options,
            providers: CloudProviderRegistry::new(),
            initializers: cloud_initializers(),
            webhooks: cloud_webhooks(),
            cloud: None,
            client_config: None,
            telemetry: true,
            plain_http_admin: false,
            registration_errors: Vec::new(),
        }
    }

    /// Registers a provider `--cloud-provider=NAME` can pick; `factory` gets the bytes of
    /// `--cloud-config`. An empty, reserved or taken name is reported by [`Self::validate`] (and
    /// so by [`Self::run`]) with every other start-up error, as a clash of controller names is,
    /// so the chain of `.provider()` and `.controller()` calls never fails half-way.
    pub fn provider(
        mut self,
        name: &str,
        factory: impl Fn(Option<&[u8]>) -> Result<Arc<dyn CloudProvider>, BoxError>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        if let Err(e) = self.providers.register(name, factory) {
            self.registration_errors.push(e.to_string());
        }
        self
    }

    /// Adds a controller after the stock ones; `--controllers` selects it by its name or alias.
    pub fn controller(mut self, initializer: Initializer<CloudContext>) -> Self {
        self.initializers = self.initializers.with(initializer);
        self
    }

    /// Adds a webhook after the stock ones (there are none); `--webhooks` selects it by name,
    /// and it is served on every replica with the `CloudControllerManagerWebhook` gate.
    pub fn webhook(mut self, initializer: WebhookInitializer<CloudContext>) -> Self {
        self.webhooks = self.webhooks.with(initializer);
        self
    }

    /// Replaces the whole initializer map, e.g. to drop or replace a stock controller.
    pub fn initializers(mut self, initializers: Initializers<CloudContext>) -> Self {
        self.initializers = initializers;
        self
    }

    /// Uses `cloud` instead of creating one from `--cloud-provider` (tests, `--dev`).
    pub fn with_cloud(mut self, cloud: Arc<dyn CloudProvider>) -> Self {
        self.cloud = Some(cloud);
        self
    }

    /// Talks to the API server described by `config` instead of the client flags (tests, `--dev`).
    pub fn with_client_config(mut self, config: kube::Config) -> Self {
        self.client_config = Some(config);
        self
    }

    /// Serves the admin port over plain HTTP instead of HTTPS (`--dev` without certificate flags,
    /// or a distro behind its own TLS); the certificate flags then do nothing.
    pub fn with_plain_http_admin(mut self) -> Self {
        self.plain_http_admin = true;
        self
    }

    /// Leaves logging and tracing to the caller, who installed a `tracing` subscriber already
    /// (tests, or a distro with its own log pipeline); `-v` and the tracing flags then do nothing.
    pub fn without_telemetry(mut self) -> Self {
        self.telemetry = false;
        self
    }

    /// Every flag problem at once, including a `--cloud-provider` nobody registered (unless a
    /// cloud was given with [`Self::with_cloud`]); empty means [`Self::run`] may start.
    ///
    /// A `--help` that [`parse_args`] deferred is printed here, listing this manager's
    /// controllers and webhooks, and the process exits 0.
    pub fn validate(&self) -> Vec<String> {
        let known = args::Known {
            controllers: &self.initializers.known(),
            webhooks: &crate::webhooks::known_webhooks(&self.webhooks),
        };
        if args::print_deferred_help(known) {
            std::process::exit(0);
        }
        let mut errors = self.registration_errors.clone();
        errors.extend(self.options.validate(&self.initializers, &self.webhooks));
        let name = self.options.cloud.cloud_provider.trim();
        if self.cloud.is_none() && !name.is_empty() && !self.providers.contains(name) {
            let registered = match self.providers.names() {
                names if names.is_empty() => "(none registered)".to_owned(),
                names => names.join(", "),
            };
            errors.push(if name == "external" {
                format!(
                    "--cloud-provider=external means \"a separate cloud-controller-manager runs the cloud loops\"; this process is that manager, so name the provider it should run: one of {registered}"
                )
            } else {
                format!(
                    "--cloud-provider={name}: unknown cloud provider; registered providers are {registered}"
                )
            });
        }
        errors
    }

    /// Runs until `shutdown` is cancelled, then drains; see the module docs for the order.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), AppError> {
        let errors = self.validate();
        if !errors.is_empty() {
            return Err(AppError::InvalidFlags(errors));
        }
        let CloudManagerOptions {
            cloud: cloud_options,
            generic,
            telemetry: tracing_options,
            webhooks: webhook_options,
            ..
        } = self.options;
        let gates = generic
            .feature_gates()
            .map_err(|e| AppError::InvalidFlags(vec![e]))?;
        let _telemetry = match self.telemetry {
            true => Some(telemetry::init(
                &self.name,
                &generic.logging,
                &tracing_options,
            )?),
            false => None,
        };

        let registry = Arc::new(Mutex::new(Registry::default()));
        let client_metrics = ClientMetrics::new(&mut registry.lock());
        let client_config = match self.client_config {
            Some(config) => config,
            None => load_config(&generic.client).await?,
        };
        let (qps, burst) = (generic.client.kube_api_qps, generic.client.kube_api_burst);
        let client = client_from_config(
            client_config.clone(),
            qps,
            burst,
            &self.name,
            Some(&client_metrics),
        )?;
        let clients = match generic.client.use_service_account_credentials {
            true => ClientBuilder::service_accounts(
                client_config,
                client.clone(),
                SERVICE_ACCOUNT_NAMESPACE,
                &self.name,
                qps,
                burst,
                Some(&client_metrics),
            ),
            false => {
                ClientBuilder::simple(client_config, &self.name, qps, burst, Some(&client_metrics))
            }
        };

        let cloud = match self.cloud {
            Some(cloud) => cloud,
            None => self.providers.init(
                &cloud_options.cloud_provider,
                cloud_options.cloud_config.as_deref(),
            )?,
        };
        if !cloud.has_cluster_id() {
            if !cloud_options.allow_untagged_cloud {
                return Err(AppError::NoClusterId);
            }
            warn!(
                "detected a cluster without a ClusterID; a ClusterID will be required in the future"
            );
        }
        let cloud_metrics = CloudMetrics::new(&mut registry.lock());
        let cloud: Arc<dyn CloudProvider> = Arc::new(
            InstrumentedCloud::new(cloud, Some(cloud_metrics))
                .with_budget(&cloud_options.budget_options()),
        );

        let provider = cloud_options.cloud_provider.clone();
        let mut config = ManagerConfig::from_options(self.name.as_str(), &generic);
        let configz = crate::configz::configuration(&self.name, &cloud_options, &generic);
        config.admin.configz.set(crate::configz::KEY, configz);
        if self.plain_http_admin {
            config.admin_tls = None;
        }
        let mut webhook_serving = webhook_options.serving(&gates);
        // `--permit-port-sharing` binds the webhook port as it binds the admin port, so replicas
        // on one host can share a `--webhook-url` (upstream registers no such flag for webhooks).
        if let Some(serving) = &mut webhook_serving {
            serving.sharing = controller_manager::serving::SocketSharing {
                reuse_port: generic.serving.permit_port_sharing,
                reuse_address: generic.serving.permit_address_sharing,
            };
        }
        let manager = Manager::new(
            config,
            client,
            CloudContext::new(cloud, cloud_options).with_feature_gates(gates),
        )
        .with_registry(registry)
        .with_client_builder(clients)
        .with_initializers(self.initializers)
        .with_webhooks(self.webhooks, webhook_serving)
        .with_start_hook(|ctx: Arc<CloudContext>, clients, shutdown| async move {
            let provider = ctx.cloud.provider_name().to_string();
            ctx.cloud
                .initialize(InitializeContext { clients, shutdown })
                .await
                .map_err(|e| {
                    format!("cloud provider {provider:?} failed to initialize: {e}").into()
                })
        });
        info!(%provider, name = %self.name, "starting cloud-controller-manager");
        manager.run(shutdown).await?;
        info!("stopped");
        Ok(())
    }

    /// [`Self::run`] for a `main` that returns [`ExitCode`]: logs the error (or prints it, for
    /// flag errors, which come before logging starts) and maps it to the exit status.
    pub async fn run_to_exit(self, shutdown: CancellationToken) -> ExitCode {
        match self.run(shutdown).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                if matches!(e, AppError::InvalidFlags(_) | AppError::Telemetry(_)) {
                    // Logging is not up yet: stderr is the only place the operator looks.
                    let mut stderr = std::io::stderr().lock();
                    let _ = std::io::Write::write_fmt(&mut stderr, format_args!("error: {e}\n"));
                } else if matches!(e, AppError::Manager(ManagerError::Leader(_))) {
                    error!("leaderelection lost: {e}");
                } else {
                    error!("{e}");
                }
                e.exit_code()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cloud::RegistryError;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        ccm: CloudManagerOptions,
        /// A distro's own flag next to the stock ones.
        #[arg(long, default_value = "x")]
        extra: String,
    }

    fn options(args: &[&str]) -> CloudManagerOptions {
        CloudManagerOptions::from_args(args.iter().copied()).unwrap()
    }

    #[test]
    fn stock_and_distro_flags_parse_into_one_set() {
        let argv = [
            "t",
            "--cloud-provider=fake",
            "--extra=y",
            "--controllers=*,-route",
        ];
        let cli = try_parse_args_from::<Cli>(argv.iter().map(|s| s.to_string())).unwrap();
        assert_eq!(cli.extra, "y");
        assert_eq!(cli.ccm.generic.controllers, vec!["*", "-route"]);
        assert!(
            cli.ccm
                .validate(&cloud_initializers(), &cloud_webhooks())
                .is_empty()
        );
    }

    #[test]
    fn a_repeated_flag_takes_its_last_value_and_lists_accumulate() {
        let o = options(&[
            "--secure-port=1",
            "--secure-port=2",
            "--controllers=*",
            "--controllers=-route",
            "--leader-elect=false",
            "--leader-elect",
        ]);
        assert_eq!(o.generic.serving.secure_port, 2);
        assert_eq!(o.generic.controllers, vec!["*", "-route"]);
        assert!(o.generic.leader_election.leader_elect);
    }

    #[test]
    fn controllers_help_lists_known_and_disabled_by_default_names() {
        let known = cloud_initializers()
            .with(
                Initializer::new("zz-extra", |_ctx| async { unreachable!() }).disabled_by_default(),
            )
            .known();
        assert_eq!(
            controllers_help(&known).split_once(".\n").map(|(_, rest)| rest.to_string()),
            Some(
                "All controllers: cloud-node-controller, cloud-node-lifecycle-controller, node-route-controller, service-lb-controller, zz-extra\nDisabled-by-default controllers: zz-extra".to_string()
            )
        );
    }

    #[test]
    fn feature_gate_and_webhook_errors_are_flag_errors() {
        let o = options(&[
            "--cloud-provider=fake",
            "--feature-gates=Nope=true",
            "--webhooks=mine",
        ]);
        let errors = o.validate(&cloud_initializers(), &cloud_webhooks());
        assert_eq!(
            errors,
            vec![
                r#"invalid argument for "--feature-gates" flag: unrecognized feature gate: Nope"#,
                r#""mine" is not in the list of known webhooks; known webhooks: none (use '*' for all, '-NAME' to disable one)"#,
            ]
        );
    }

    #[test]
    fn validate_reports_flag_and_controller_errors_together() {
        let o = options(&["--kube-api-burst=0", "--controllers=*,-nope,bogus"]);
        let errors = o.validate(&cloud_initializers(), &cloud_webhooks());
        assert_eq!(errors.len(), 3, "{errors:#?}");
        assert_eq!(errors[0], "--cloud-provider cannot be empty");
        assert!(errors[1].contains("--kube-api-burst"), "{errors:#?}");
        assert!(
            errors[2].starts_with(
                "\"nope\" is not in the list of known controllers, \"bogus\" is not in the list of known controllers"
            ),
            "{errors:#?}"
        );
    }

    #[test]
    fn added_controllers_are_selectable_and_clashes_are_flag_errors() {
        let mine = || Initializer::new("my-controller", |_ctx| async { unreachable!() });
        let o = options(&["--cloud-provider=fake", "--controllers=my-controller"]);
        let ccm = CloudControllerManager::new("t", o.clone()).controller(mine());
        assert!(o.validate(&ccm.initializers, &ccm.webhooks).is_empty());
        let clash = ccm.controller(mine());
        let errors = o.validate(&clash.initializers, &clash.webhooks);
        assert_eq!(
            errors,
            vec!["controller name or alias \"my-controller\" is registered twice"]
        );
    }

    #[tokio::test]
    async fn invalid_flags_stop_before_anything_starts() {
        let o = options(&["--concurrent-node-syncs=0", "--cloud-provider=fake"]);
        let err = CloudControllerManager::new("t", o)
            .provider("fake", |_| Err("unused".into()))
            .run(CancellationToken::new())
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "--concurrent-node-syncs must be at least 1\n1 invalid flag value(s); nothing was started"
        );
        assert_eq!(err.exit_code(), ExitCode::from(2));
    }

    #[test]
    fn a_distro_lists_only_the_providers_it_registers() {
        let o = options(&["--cloud-provider=fake"]);
        let ccm =
            CloudControllerManager::new("t", o.clone()).provider("mine", |_| Err("unused".into()));
        assert_eq!(ccm.providers.names(), vec!["mine"]);
        let bare = CloudControllerManager::new("t", o.clone());
        assert_eq!(
            bare.validate(),
            vec![
                "--cloud-provider=fake: unknown cloud provider; registered providers are (none registered)"
            ]
        );
        assert_eq!(
            ccm.validate(),
            vec!["--cloud-provider=fake: unknown cloud provider; registered providers are mine"]
        );
        let ccm = ccm.provider("fake", |_| Err("unused".into()));
        assert_eq!(ccm.providers.names(), vec!["mine", "fake"]);
        assert!(ccm.validate().is_empty());
        // A taken name does not end the chain: it is reported with the flag errors.
        let errors = ccm
            .provider("fake", |_| Err("unused".into()))
            .controller(crate::node::initializer())
            .validate();
        let duplicate = RegistryError::Duplicate {
            name: "fake".into(),
        }
        .to_string();
        assert!(errors.contains(&duplicate), "{errors:?}");
    }
}
