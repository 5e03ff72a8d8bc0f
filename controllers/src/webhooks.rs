//! Upstream's webhook flags (`--webhooks`, `--webhook-*`) and the name → webhook map they
//! select from, as upstream's `WebhookConfig` map: the stock map is empty (upstream's CCM
//! registers none either) and a distro adds its own
//! ([`crate::CloudControllerManager::webhook`]). `--webhooks` is checked with `--controllers`'
//! code and messages; as upstream, webhooks are served only with the
//! `CloudControllerManagerWebhook` gate, a non-zero `--webhook-secure-port` and at least one
//! selected webhook, from the certificate files the flags name (reloaded when they change).

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use clap::Args;
use controller_manager::certs::{ClientTarget, Managed, SelfManagedCerts};
use controller_manager::manager::{ControllerSelection, KnownControllers};
use controller_manager::options::FeatureGates;
use controller_manager::options::feature_gates::CLOUD_CONTROLLER_MANAGER_WEBHOOK;
use controller_manager::options::{EndHelpHeading, GoBoolArg};
use controller_manager::serving::TlsSettings;
use controller_manager::webhook::{WebhookServing, Webhooks};

use crate::CloudContext;

/// Upstream's default `--webhook-secure-port`.
pub const DEFAULT_WEBHOOK_PORT: u16 = 10260;

/// The stock webhooks: none, as upstream's CCM.
pub fn cloud_webhooks() -> Webhooks<CloudContext> {
    Webhooks::new()
}

/// The names `--webhooks` may use, from `webhooks`.
pub fn known_webhooks(webhooks: &Webhooks<CloudContext>) -> KnownControllers {
    let mut known = KnownControllers::of("webhooks");
    for w in webhooks.iter() {
        known.add(w.name(), &[], !w.enabled_by_default());
    }
    known
}

/// The webhook flag group, as upstream's `WebhookOptions` and `WebhookServingOptions`.
#[derive(Args, Clone, Debug)]
#[command(next_help_heading = "Webhook serving flags", end_help_heading = true)]
pub struct WebhookOptions {
    /// Which webhooks run, with `--controllers`' syntax.
    #[arg(
        long,
        value_delimiter = ',',
        help_heading = "Webhook flags",
        help = "A list of webhooks to enable. '*' enables all on-by-default webhooks, 'foo' enables the webhook named 'foo', '-foo' disables the webhook named 'foo'.\nAll webhooks: \nDisabled-by-default webhooks: "
    )]
    pub webhooks: Vec<String>,

    /// Secure port to serve cloud provider webhooks. If 0, don't serve webhooks at all.
    #[arg(long, default_value_t = DEFAULT_WEBHOOK_PORT, verbatim_doc_comment)]
    pub webhook_secure_port: u16,

    /// The IP address on which to listen for the --webhook-secure-port port. The associated interface(s) must be reachable by the rest of the cluster, and by CLI/web clients. If set to an unspecified address (0.0.0.0 or ::), all interfaces will be used.
    #[arg(long, default_value = "0.0.0.0", verbatim_doc_comment)]
    pub webhook_bind_address: IpAddr,

    /// If true, HTTP2 serving will be disabled for the webhook server [default=false]
    #[arg(long, go_bool = false, verbatim_doc_comment)]
    pub webhook_disable_http2_serving: bool,

    /// The directory where the TLS certs are located. If --webhook-tls-cert-file and --webhook-tls-private-key-file are provided, this flag will be ignored.
    #[arg(long, verbatim_doc_comment)]
    pub webhook_cert_dir: Option<PathBuf>,

    /// File containing the default x509 Certificate for HTTPS. (CA cert, if any, concatenated after server cert). If HTTPS serving is enabled, and --webhook-tls-cert-file and --webhook-tls-private-key-file are not provided, a self-signed certificate and key are generated for the public address and saved to the directory specified by --webhook-cert-dir.
    #[arg(long, verbatim_doc_comment)]
    pub webhook_tls_cert_file: Option<PathBuf>,

    /// File containing the default x509 private key matching --webhook-tls-cert-file.
    #[arg(long, verbatim_doc_comment)]
    pub webhook_tls_private_key_file: Option<PathBuf>,

    /// Comma-separated list of cipher suites for the webhook server. If omitted, the default cipher suites will be used.
    #[arg(long, value_delimiter = ',', verbatim_doc_comment)]
    pub webhook_tls_cipher_suites: Vec<String>,

    /// Minimum TLS version supported for the webhook server. Possible values: VersionTLS10, VersionTLS11, VersionTLS12, VersionTLS13
    #[arg(long, verbatim_doc_comment)]
    pub webhook_tls_min_version: Option<String>,

    /// A pair of x509 certificate and private key file paths, optionally suffixed with a list of domain patterns which are fully qualified domain names, possibly with prefixed wildcard segments. For multiple key/certificate pairs, use the --webhook-tls-sni-cert-key multiple times. Examples: "example.crt,example.key" or "foo.crt,foo.key:*.foo.com,foo.com".
    #[arg(long, verbatim_doc_comment)]
    pub webhook_tls_sni_cert_key: Vec<String>,

    /// Not upstream's: NAMESPACE/NAME of a Secret in which the replicas keep a CA and serving certificate they make and renew themselves, instead of certificate files (no cert-manager needed).
    #[arg(long, verbatim_doc_comment)]
    pub webhook_self_managed_certs: Option<String>,

    /// Not upstream's: with --webhook-self-managed-certs, the DNS names or IP addresses the serving certificate covers (the webhook Service's NAME.NAMESPACE.svc, or the host of its URL).
    #[arg(long, value_delimiter = ',', verbatim_doc_comment)]
    pub webhook_cert_hosts: Vec<String>,

    /// Not upstream's: with --webhook-self-managed-certs, the objects whose caBundle the replicas keep, as KIND/NAME: ValidatingWebhookConfiguration, MutatingWebhookConfiguration or CustomResourceDefinition (its conversion webhook).
    #[arg(long, value_delimiter = ',', verbatim_doc_comment)]
    pub webhook_managed_configurations: Vec<String>,

    /// Not upstream's: with --webhook-managed-configurations, point their webhooks (each keeping its path) at this Service, NAMESPACE/NAME or NAMESPACE/NAME:PORT (port 443 unless given), for replicas in the cluster.
    #[arg(long, verbatim_doc_comment, conflicts_with = "webhook_url")]
    pub webhook_service: Option<String>,

    /// Not upstream's: with --webhook-managed-configurations, point their webhooks (each keeping its path) at https://HOST:PORT, for replicas running outside the cluster.
    #[arg(long, verbatim_doc_comment)]
    pub webhook_url: Option<String>,
}

impl WebhookOptions {
    /// Upstream's checks against `webhooks` (known names, with `--controllers`' messages; not
    /// the `--secure-port`), plus: a webhook server needs certificate files.
    pub fn validate(
        &self,
        gates: &FeatureGates,
        secure_port: u16,
        webhooks: &Webhooks<CloudContext>,
    ) -> Vec<String> {
        let mut errors = Vec::new();
        if let Err(e) = webhooks.check() {
            errors.push(e.to_string());
        }
        let selection = match ControllerSelection::parse(&self.webhooks, &known_webhooks(webhooks))
        {
            Ok(selection) => Some(selection),
            Err(e) => {
                errors.push(e.to_string());
                None
            }
        };
        if self.webhook_secure_port != 0 && self.webhook_secure_port == secure_port {
            errors.push(format!(
                "--webhook-secure-port cannot be the same value as --secure-port ({secure_port})"
            ));
        }
        if let Err(e) = self.self_managed() {
            errors.push(e);
        }
        if let Err(tls) = self.tls_settings() {
            errors.extend(tls);
        }
        if !self.webhook_tls_sni_cert_key.is_empty() && self.webhook_self_managed_certs.is_some() {
            errors.push("--webhook-tls-sni-cert-key adds certificate files beside --webhook-tls-cert-file; with --webhook-self-managed-certs the process presents only the certificate it makes: drop one of them".to_string());
        }
        let serves = selection.is_some_and(|s| !s.enabled().is_empty());
        if errors.is_empty()
            && serves
            && self.webhook_secure_port != 0
            && gates.enabled(CLOUD_CONTROLLER_MANAGER_WEBHOOK)
            && self.cert_files().is_none()
            && self.webhook_self_managed_certs.is_none()
        {
            errors.push(format!(
                "--webhooks={} asks for a webhook server on port {}: give it a certificate with --webhook-tls-cert-file and --webhook-tls-private-key-file, or --webhook-cert-dir holding tls.crt and tls.key, or let it make its own with --webhook-self-managed-certs",
                self.webhooks.join(","),
                self.webhook_secure_port
            ));
        }
        errors
    }

    /// The self-managed certificates the flags ask for, if any, or what is wrong with them.
    fn self_managed(&self) -> Result<Option<SelfManagedCerts>, String> {
        let Some(secret) = &self.webhook_self_managed_certs else {
            if !self.webhook_cert_hosts.is_empty()
                || !self.webhook_managed_configurations.is_empty()
                || self.webhook_service.is_some()
                || self.webhook_url.is_some()
            {
                return Err("--webhook-cert-hosts, --webhook-managed-configurations, --webhook-service and --webhook-url need --webhook-self-managed-certs".to_string());
            }
            return Ok(None);
        };
        let (namespace, name) = secret
            .split_once('/')
            .filter(|(ns, name)| !ns.is_empty() && !name.is_empty() && !name.contains('/'))
            .ok_or_else(|| {
                format!("--webhook-self-managed-certs={secret:?}: expected NAMESPACE/NAME")
            })?;
        if self.webhook_cert_hosts.is_empty() {
            return Err("--webhook-self-managed-certs needs --webhook-cert-hosts: the names the serving certificate covers".to_string());
        }
        let target = self.client_target()?;
        if target.is_some() && self.webhook_managed_configurations.is_empty() {
            return Err("--webhook-service and --webhook-url point the configurations of --webhook-managed-configurations: name them".to_string());
        }
        let managed = self
            .webhook_managed_configurations
            .iter()
            .map(|m| {
                m.parse::<Managed>()
                    .map(|m| m.pointing_at(target.clone()))
                    .map_err(|e| format!("--webhook-managed-configurations: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(
            SelfManagedCerts::new(namespace, name, self.webhook_cert_hosts.clone())
                .managing(managed),
        ))
    }

    /// The TLS versions, cipher suites, SNI certificates and HTTP/2 the `--webhook-tls-*` and
    /// `--webhook-disable-http2-serving` flags ask for, with the admin server's checks, each
    /// error naming the webhook flag.
    fn tls_settings(&self) -> Result<TlsSettings, Vec<String>> {
        let non_empty = |values: &[String]| -> Vec<String> {
            values
                .iter()
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
                .collect()
        };
        TlsSettings::from_flags(
            self.webhook_tls_min_version.as_deref(),
            &non_empty(&self.webhook_tls_cipher_suites),
            &[],
            &self.webhook_tls_sni_cert_key,
            !self.webhook_disable_http2_serving,
            0,
        )
        .map_err(|errors| {
            errors
                .into_iter()
                .map(|e| e.replace("--tls-", "--webhook-tls-"))
                .collect()
        })
    }

    /// Where `--webhook-service` or `--webhook-url` point the managed configurations, if set.
    fn client_target(&self) -> Result<Option<ClientTarget>, String> {
        match (&self.webhook_service, &self.webhook_url) {
            (Some(service), _) => ClientTarget::service(service)
                .map(Some)
                .map_err(|e| format!("--webhook-service={e}")),
            (None, Some(url)) => ClientTarget::url(url)
                .map(Some)
                .map_err(|e| format!("--webhook-url={e}")),
            (None, None) => Ok(None),
        }
    }

    /// The certificate and key files the flags name: the pair of files, else `tls.crt` and
    /// `tls.key` in `--webhook-cert-dir`.
    fn cert_files(&self) -> Option<(PathBuf, PathBuf)> {
        match (
            &self.webhook_tls_cert_file,
            &self.webhook_tls_private_key_file,
            &self.webhook_cert_dir,
        ) {
            (Some(cert), Some(key), _) => Some((cert.clone(), key.clone())),
            (_, _, Some(dir)) => Some((dir.join("tls.crt"), dir.join("tls.key"))),
            _ => None,
        }
    }

    /// How the webhook server is served, or `None` when upstream would serve none: the gate off,
    /// port 0, or no certificate flags (which [`Self::validate`] refuses when a webhook is
    /// selected). Self-managed certificates win over files. The TLS flags apply to either.
    pub fn serving(&self, gates: &FeatureGates) -> Option<WebhookServing> {
        if self.webhook_secure_port == 0 || !gates.enabled(CLOUD_CONTROLLER_MANAGER_WEBHOOK) {
            return None;
        }
        let addr = SocketAddr::new(self.webhook_bind_address, self.webhook_secure_port);
        let mut serving = match (self.self_managed().ok().flatten(), self.cert_files()) {
            (Some(certs), _) => WebhookServing::self_managed(addr, certs),
            (None, Some((cert, key))) => WebhookServing::from_files(addr, cert, key),
            (None, None) => return None,
        };
        serving.webhooks = self.webhooks.clone();
        // Flags that do not parse are refused by `validate` before anything is served.
        if let Ok(tls) = self.tls_settings() {
            serving.tls = tls;
        }
        Some(serving)
    }
}

#[cfg(test)]
mod tests {
    use controller_manager::options::parse_group;
    use controller_manager::webhook::{CertSource, Review, Validator, Verdict, WebhookInitializer};
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    fn parse(args: &[&str]) -> WebhookOptions {
        parse_group(args).unwrap()
    }

    fn gates(on: bool) -> FeatureGates {
        let mut g = FeatureGates::default();
        g.set(CLOUD_CONTROLLER_MANAGER_WEBHOOK, on);
        g
    }

    struct Allow;
    impl Validator<ConfigMap> for Allow {
        async fn validate(&self, _: &Review<ConfigMap>) -> Verdict {
            Verdict::allow()
        }
    }

    fn mine() -> Webhooks<CloudContext> {
        cloud_webhooks().with(WebhookInitializer::validating::<ConfigMap, _, _, _>(
            "mine",
            "/validate-configmap",
            |_| async { Ok(Allow) },
        ))
    }

    #[test]
    fn defaults_are_upstreams_and_serve_nothing() {
        let o = parse(&[]);
        assert_eq!(o.webhook_secure_port, 10260);
        assert_eq!(o.webhook_bind_address.to_string(), "0.0.0.0");
        assert!(o.webhooks.is_empty());
        assert!(
            o.validate(&gates(true), 10258, &cloud_webhooks())
                .is_empty()
        );
        assert!(o.serving(&gates(true)).is_none(), "no certificate flags");
    }

    #[test]
    fn unknown_webhooks_are_named_as_unknown_controllers_are() {
        let o = parse(&["--webhooks=*,-foo,bar"]);
        assert_eq!(
            o.validate(&gates(false), 10258, &mine()),
            vec![
                "\"foo\" is not in the list of known webhooks, \"bar\" is not in the list of known webhooks; known webhooks: mine (use '*' for all, '-NAME' to disable one)"
            ]
        );
    }

    #[test]
    fn a_selected_webhook_needs_certificate_files() {
        let o = parse(&["--webhooks=*"]);
        let errors = o.validate(&gates(true), 10258, &mine());
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].contains("--webhook-cert-dir holding tls.crt and tls.key"),
            "{errors:?}"
        );
        // Gate off, the port off, or nothing selected: nothing would be served, as upstream.
        assert!(o.validate(&gates(false), 10258, &mine()).is_empty());
        let off = parse(&["--webhooks=*", "--webhook-secure-port=0"]);
        assert!(off.validate(&gates(true), 10258, &mine()).is_empty());
        assert!(
            o.validate(&gates(true), 10258, &cloud_webhooks())
                .is_empty()
        );

        let o = parse(&[
            "--webhooks=mine",
            "--webhook-cert-dir=/certs",
            "--webhook-secure-port=9443",
        ]);
        assert!(o.validate(&gates(true), 10258, &mine()).is_empty());
        let serving = o.serving(&gates(true)).unwrap();
        assert_eq!(
            serving.certificates,
            CertSource::Files {
                cert: PathBuf::from("/certs/tls.crt"),
                key: PathBuf::from("/certs/tls.key"),
            }
        );
        assert_eq!(serving.addr.to_string(), "0.0.0.0:9443");
        assert_eq!(serving.webhooks, vec!["mine"]);
        assert!(o.serving(&gates(false)).is_none());
    }

    #[test]
    fn self_managed_certificates_are_asked_for_with_their_hosts_and_targets() {
        let o = parse(&[
            "--webhooks=mine",
            "--webhook-self-managed-certs=kube-system/ccm-webhook",
            "--webhook-cert-hosts=ccm-webhook.kube-system.svc",
            "--webhook-managed-configurations=ValidatingWebhookConfiguration/ccm",
        ]);
        assert!(o.validate(&gates(true), 10258, &mine()).is_empty());
        let serving = o.serving(&gates(true)).unwrap();
        let CertSource::SelfManaged(certs) = serving.certificates else {
            panic!("{:?}", serving.certificates);
        };
        assert_eq!(
            (certs.namespace.as_str(), certs.secret.as_str()),
            ("kube-system", "ccm-webhook")
        );
        assert_eq!(certs.dns_names, vec!["ccm-webhook.kube-system.svc"]);
        assert_eq!(
            certs.managed,
            vec!["ValidatingWebhookConfiguration/ccm".parse().unwrap()]
        );

        let pointed = parse(&[
            "--webhooks=mine",
            "--webhook-self-managed-certs=kube-system/ccm-webhook",
            "--webhook-cert-hosts=127.0.0.1",
            "--webhook-managed-configurations=ValidatingWebhookConfiguration/ccm,CustomResourceDefinition/x.y",
            "--webhook-url=https://127.0.0.1:9443",
        ]);
        assert!(pointed.validate(&gates(true), 10258, &mine()).is_empty());
        let CertSource::SelfManaged(certs) = pointed.serving(&gates(true)).unwrap().certificates
        else {
            panic!("self-managed");
        };
        let url = ClientTarget::url("https://127.0.0.1:9443").unwrap();
        assert!(
            certs.managed.len() == 2 && certs.managed.iter().all(|m| m.client == Some(url.clone())),
            "{:?}",
            certs.managed
        );
        assert!(
            parse_group::<WebhookOptions>(&["--webhook-url=https://h:1", "--webhook-service=a/b"])
                .is_err(),
            "one or the other"
        );

        for (args, error) in [
            (
                &["--webhook-self-managed-certs=ccm"][..],
                "expected NAMESPACE/NAME",
            ),
            (
                &["--webhook-self-managed-certs=a/b"][..],
                "needs --webhook-cert-hosts",
            ),
            (
                &["--webhook-cert-hosts=x"][..],
                "need --webhook-self-managed-certs",
            ),
            (
                &["--webhook-url=https://h:1"][..],
                "need --webhook-self-managed-certs",
            ),
            (
                &[
                    "--webhook-self-managed-certs=a/b",
                    "--webhook-cert-hosts=x",
                    "--webhook-url=https://h:1",
                ][..],
                "name them",
            ),
            (
                &[
                    "--webhook-self-managed-certs=a/b",
                    "--webhook-cert-hosts=x",
                    "--webhook-managed-configurations=ValidatingWebhookConfiguration/v",
                    "--webhook-url=http://h:1",
                ][..],
                "--webhook-url=\"http://h:1\": the URL must start with https://",
            ),
            (
                &[
                    "--webhook-self-managed-certs=a/b",
                    "--webhook-cert-hosts=x",
                    "--webhook-managed-configurations=ValidatingWebhookConfiguration/v",
                    "--webhook-service=svc",
                ][..],
                "--webhook-service=\"svc\": expected NAMESPACE/NAME",
            ),
            (
                &[
                    "--webhook-self-managed-certs=a/b",
                    "--webhook-cert-hosts=x",
                    "--webhook-managed-configurations=Pod/p",
                ][..],
                "Pod is not ValidatingWebhookConfiguration",
            ),
        ] {
            let errors = parse(args).validate(&gates(true), 10258, &mine());
            assert!(
                errors.len() == 1 && errors[0].contains(error),
                "{args:?}: {errors:?}"
            );
        }
    }

    /// Serves HTTPS as `serving.tls` says; the address and the CA to trust.
    async fn serve_with(
        serving: &WebhookServing,
        stop: tokio_util::sync::CancellationToken,
    ) -> (
        SocketAddr,
        tokio_rustls::rustls::pki_types::CertificateDer<'static>,
    ) {
        use controller_manager::serving::{
            Certificates, SelfSignedPair, Server, SocketSharing, Tls,
        };
        use tokio_rustls::rustls::pki_types::CertificateDer;
        use tokio_rustls::rustls::pki_types::pem::PemObject;
        let pair = SelfSignedPair::generate().unwrap();
        let chain: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(pair.cert_pem.as_bytes())
                .collect::<Result<_, _>>()
                .unwrap();
        let certificates =
            Certificates::from_pem(pair.cert_pem.as_bytes(), pair.key_pem.as_bytes()).unwrap();
        let tls = Tls::new(certificates, &serving.tls).unwrap();
        let server = Server::bind("127.0.0.1:0".parse().unwrap(), SocketSharing::default())
            .unwrap()
            .with_tls(tls);
        let addr = server.local_addr();
        let answer = tower::service_fn(|_: http::Request<hyper::body::Incoming>| async {
            Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
        });
        tokio::spawn(server.serve(answer, stop));
        (addr, chain[chain.len() - 1].clone())
    }

    /// A TLS handshake with a client offering only `version` and, if given, only `suite`.
    async fn handshake(
        addr: SocketAddr,
        ca: &tokio_rustls::rustls::pki_types::CertificateDer<'static>,
        version: &'static tokio_rustls::rustls::SupportedProtocolVersion,
        suite: Option<tokio_rustls::rustls::CipherSuite>,
    ) -> std::io::Result<()> {
        use std::sync::Arc;
        use tokio_rustls::rustls::{ClientConfig, RootCertStore, crypto::ring};
        let mut provider = ring::default_provider();
        if let Some(suite) = suite {
            provider.cipher_suites.retain(|s| s.suite() == suite);
        }
        let mut roots = RootCertStore::empty();
        roots.add(ca.clone()).unwrap();
        let config = ClientConfig::builder_with_provider(Arc::new(provider))
            .with_protocol_versions(&[version])
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let tcp = tokio::net::TcpStream::connect(addr).await?;
        let name = tokio_rustls::rustls::pki_types::ServerName::try_from("localhost").unwrap();
        tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
            .map(drop)
    }

    /// The `--webhook-tls-*` flags reach the served port: a client offering only what they
    /// leave out is refused at the handshake, one offering what they allow gets through.
    #[tokio::test]
    async fn the_webhook_tls_flags_are_applied_to_the_served_port() {
        use tokio_rustls::rustls::CipherSuite;
        use tokio_rustls::rustls::version::{TLS12, TLS13};
        let stop = tokio_util::sync::CancellationToken::new();
        let o = parse(&[
            "--webhooks=mine",
            "--webhook-cert-dir=/certs",
            "--webhook-tls-min-version=VersionTLS13",
        ]);
        assert!(o.validate(&gates(true), 10258, &mine()).is_empty());
        let (addr, ca) = serve_with(&o.serving(&gates(true)).unwrap(), stop.clone()).await;
        let refused = handshake(addr, &ca, &TLS12, None).await.unwrap_err();
        assert!(refused.to_string().contains("ProtocolVersion"), "{refused}");
        handshake(addr, &ca, &TLS13, None).await.unwrap();

        let o = parse(&[
            "--webhooks=mine",
            "--webhook-cert-dir=/certs",
            "--webhook-tls-cipher-suites=TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        ]);
        assert!(o.validate(&gates(true), 10258, &mine()).is_empty());
        let (addr, ca) = serve_with(&o.serving(&gates(true)).unwrap(), stop.clone()).await;
        let other = CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384;
        let refused = handshake(addr, &ca, &TLS12, Some(other)).await.unwrap_err();
        assert!(
            refused.to_string().contains("HandshakeFailure"),
            "{refused}"
        );
        let allowed = CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256;
        handshake(addr, &ca, &TLS12, Some(allowed)).await.unwrap();
        stop.cancel();
    }

    #[test]
    fn bad_webhook_tls_flags_are_refused_naming_the_webhook_flag() {
        let o = parse(&[
            "--webhook-tls-min-version=VersionTLS10",
            "--webhook-tls-cipher-suites=NOPE",
        ]);
        let errors = o.validate(&gates(true), 10258, &mine());
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(
            errors[0].starts_with("--webhook-tls-min-version=VersionTLS10: "),
            "{errors:?}"
        );
        assert_eq!(
            errors[1],
            "--webhook-tls-cipher-suites: Cipher suite NOPE not supported or doesn't exist"
        );
    }

    #[test]
    fn the_webhook_port_must_differ_from_the_secure_port() {
        let o = parse(&["--webhook-secure-port=10258"]);
        assert_eq!(
            o.validate(&gates(false), 10258, &cloud_webhooks()),
            vec!["--webhook-secure-port cannot be the same value as --secure-port (10258)"]
        );
        assert!(o.validate(&gates(false), 0, &cloud_webhooks()).is_empty());
    }
}
