//! Tests of the webhook flags: `--webhooks` selection and help, the serving and certificate
//! flags, and the errors each bad value gets.

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
    let CertSource::SelfManaged(certs) = pointed.serving(&gates(true)).unwrap().certificates else {
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
    use controller_manager::serving::{Certificates, SelfSignedPair, Server, SocketSharing, Tls};
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
