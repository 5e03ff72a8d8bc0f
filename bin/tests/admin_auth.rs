//! The admin port lets in only callers the API server vouches for, as upstream's delegated
//! authentication and authorization: the real binary against a kube-testenv with RBAC enforced.
//! Anonymous callers reach `/healthz` only; a ServiceAccount token needs `get` on `/metrics`
//! (TokenReview, then SubjectAccessReview); a client certificate of `system:masters` passes
//! without a review and reads `/configz` and `/metrics/slis`; both reviews are cached for their
//! configured TTLs (counted in the request log); a front proxy's certificate lets it assert the
//! user in `X-Remote-*` headers; and the CA configuration missing from the flags is read from
//! `kube-system/extension-apiserver-authentication`.

mod admin_support;

use std::path::Path;

use admin_support::{Ccm, Credentials, scratch_dir};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::Api;
use kube::api::PostParams;
use kube_testenv::{RequestRecord, TestEnv};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};
use serde_json::json;
use tokio_rustls::rustls::pki_types::CertificateDer;

/// A client CA made for the test, and certificates it signs.
struct ClientCa {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl ClientCa {
    fn new() -> anyhow::Result<Self> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params
            .distinguished_name
            .push(DnType::CommonName, "test-client-ca");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let cert = params.self_signed(&key)?;
        Ok(ClientCa {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        })
    }

    /// A client certificate with subject `CN=<cn>, O=<org>`.
    fn client(&self, cn: &str, org: Option<&str>) -> anyhow::Result<Credentials> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name.push(DnType::CommonName, cn);
        if let Some(org) = org {
            params
                .distinguished_name
                .push(DnType::OrganizationName, org);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params.signed_by(&key, &self.issuer)?;
        let chain: Vec<CertificateDer<'static>> = vec![cert.der().clone()];
        Ok(Credentials::Cert(chain, key.serialize_der()))
    }
}

async fn cluster() -> anyhow::Result<TestEnv> {
    Ok(TestEnv::builder().authorization(true).start().await?)
}

/// `get` on the non-resource URL `/metrics` for ServiceAccount `default/<sa>`, as a user would
/// grant a Prometheus scraper.
async fn grant_metrics(env: &TestEnv, sa: &str) -> anyhow::Result<()> {
    let client = env.client();
    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": "metrics-reader"},
        "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    }))?;
    Api::<ClusterRole>::all(client.clone())
        .create(&PostParams::default(), &role)
        .await?;
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": format!("metrics-reader-{sa}")},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "metrics-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": "default"}]
    }))?;
    Api::<ClusterRoleBinding>::all(client)
        .create(&PostParams::default(), &binding)
        .await?;
    Ok(())
}

fn write(dir: &Path, name: &str, content: &str) -> anyhow::Result<String> {
    let path = dir.join(name);
    std::fs::write(&path, content)?;
    Ok(path.display().to_string())
}

fn reviews(env: &TestEnv, resource: &str) -> usize {
    env.requests()
        .iter()
        .filter(|r: &&RequestRecord| r.resource == resource && r.verb == "create")
        .count()
}

/// Starts the CCM delegating authentication and authorization to `env` through the admin
/// kubeconfig, with `extra` flags; returns it with the tokens of "scraper", who may GET /metrics,
/// and "nobody", who may not.
async fn delegating(
    env: &TestEnv,
    dir: &Path,
    extra: &[String],
) -> anyhow::Result<(Ccm, String, String)> {
    let scraper = env.token_for_service_account("default", "scraper")?;
    let nobody = env.token_for_service_account("default", "nobody")?;
    grant_metrics(env, "scraper").await?;
    let kubeconfig = dir.join("kubeconfig").display().to_string();
    let mut args = vec![
        format!("--authentication-kubeconfig={kubeconfig}"),
        format!("--authorization-kubeconfig={kubeconfig}"),
    ];
    args.extend_from_slice(extra);
    Ok((Ccm::start(env, dir, &args).await?, scraper, nobody))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_callers_the_api_server_vouches_for_read_metrics() -> anyhow::Result<()> {
    let env = cluster().await?;
    let dir = scratch_dir("admin-auth")?;
    let ca = ClientCa::new()?;
    // The client CA comes from the API server's ConfigMap, not a flag.
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "extension-apiserver-authentication", "namespace": "kube-system"},
        "data": {"client-ca-file": ca.pem}
    }))?;
    Api::<ConfigMap>::namespaced(env.client(), "kube-system")
        .create(&PostParams::default(), &cm)
        .await?;
    let (ccm, scraper, nobody) = delegating(&env, &dir, &[]).await?;

    let anonymous = Credentials::None;
    let healthz = ccm.get("/healthz", &anonymous).await?;
    assert_eq!(
        (healthz.status, healthz.body.as_str()),
        (200, "ok"),
        "{}",
        ccm.logs()
    );
    let metrics = ccm.get("/metrics", &anonymous).await?;
    assert_eq!(metrics.status, 403, "{}", metrics.body);
    assert_eq!(
        metrics.body,
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"forbidden: User \\\"system:anonymous\\\" cannot get path \\\"/metrics\\\"\",\"reason\":\"Forbidden\",\"details\":{},\"code\":403}\n"
    );
    assert_eq!(metrics.content_type, "application/json");
    assert_eq!(ccm.get("/configz", &anonymous).await?.status, 403);

    let granted = ccm.get("/metrics", &Credentials::Token(scraper)).await?;
    assert_eq!(granted.status, 200, "{}", granted.body);
    assert!(granted.body.contains("# EOF"), "{}", granted.body);
    let denied = ccm.get("/metrics", &Credentials::Token(nobody)).await?;
    assert_eq!(denied.status, 403);
    assert!(
        denied.body.contains(
            "forbidden: User \\\"system:serviceaccount:default:nobody\\\" cannot get path \\\"/metrics\\\""
        ),
        "{}",
        denied.body
    );
    let bad = ccm
        .get("/metrics", &Credentials::Token("not-a-token".into()))
        .await?;
    assert_eq!(bad.status, 401);
    assert_eq!(
        bad.body,
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"Unauthorized\",\"reason\":\"Unauthorized\",\"code\":401}\n"
    );

    let before = reviews(&env, "subjectaccessreviews");
    let masters = ccm
        .get("/metrics", &ca.client("admin", Some("system:masters"))?)
        .await?;
    assert_eq!(masters.status, 200, "{}", masters.body);
    assert_eq!(
        reviews(&env, "subjectaccessreviews"),
        before,
        "system:masters needs no SubjectAccessReview"
    );
    let admin = ca.client("admin", Some("system:masters"))?;
    let configz = ccm.get("/configz", &admin).await?;
    assert_eq!(
        (configz.status, configz.content_type.as_str()),
        (200, "application/json")
    );
    let configz: serde_json::Value = serde_json::from_str(&configz.body)?;
    assert_eq!(
        configz["cloudcontrollermanager.config.k8s.io"]["KubeCloudShared"]["CloudProvider"]["Name"],
        "fake"
    );
    // The anonymous /healthz above was recorded as SLIs.
    let slis = ccm.get("/metrics/slis", &admin).await?;
    assert_eq!(slis.status, 200);
    assert!(
        slis.body.contains("status=\"success\",type=\"healthz\"} 1"),
        "{}",
        slis.body
    );
    let bob = ccm.get("/metrics", &ca.client("bob", None)?).await?;
    assert_eq!(bob.status, 403, "{}", bob.body);
    assert!(bob.body.contains("User \\\"bob\\\""), "{}", bob.body);
    let stranger = ClientCa::new()?.client("admin", Some("system:masters"))?;
    assert_eq!(
        ccm.get("/metrics", &stranger).await?.status,
        401,
        "a certificate from another CA is refused"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reviews_are_cached_for_their_ttls() -> anyhow::Result<()> {
    let env = cluster().await?;
    let dir = scratch_dir("admin-auth-cache")?;
    let ca = ClientCa::new()?;
    let ca_file = write(&dir, "client-ca.crt", &ca.pem)?;
    let proxy_ca = ClientCa::new()?;
    let proxy_ca_file = write(&dir, "front-proxy-ca.crt", &proxy_ca.pem)?;
    let (ccm, scraper, nobody) = delegating(
        &env,
        &dir,
        &[
            format!("--client-ca-file={ca_file}"),
            format!("--requestheader-client-ca-file={proxy_ca_file}"),
            "--requestheader-allowed-names=front-proxy-client".into(),
            "--authentication-skip-lookup".into(),
            "--authentication-token-webhook-cache-ttl=1h".into(),
            "--authorization-webhook-cache-authorized-ttl=1h".into(),
            "--authorization-webhook-cache-unauthorized-ttl=0s".into(),
        ],
    )
    .await?;
    assert_eq!(
        env.requests()
            .iter()
            .filter(|r| r.resource == "configmaps")
            .count(),
        0,
        "--authentication-skip-lookup reads no ConfigMap"
    );

    // (TokenReviews, SubjectAccessReviews) sent while `token` GETs /metrics three times.
    let three_gets = async |token: &String, status: u16| -> anyhow::Result<(usize, usize)> {
        let (tokens, sars) = ("tokenreviews", "subjectaccessreviews");
        let before = (reviews(&env, tokens), reviews(&env, sars));
        for _ in 0..3 {
            let r = ccm
                .get("/metrics", &Credentials::Token(token.clone()))
                .await?;
            assert_eq!(r.status, status, "{}", r.body);
        }
        Ok((
            reviews(&env, tokens) - before.0,
            reviews(&env, sars) - before.1,
        ))
    };
    let (tokens, sars) = three_gets(&scraper, 200).await?;
    assert_eq!(tokens, 1, "one TokenReview per token per hour");
    assert_eq!(sars, 1, "an allowed answer is kept for the authorized TTL");
    let (tokens, sars) = three_gets(&nobody, 403).await?;
    assert_eq!(tokens, 1);
    assert_eq!(
        sars, 3,
        "a denied answer is kept for the unauthorized TTL, here 0s"
    );

    // --client-ca-file works as the ConfigMap's CA did.
    let masters = ccm
        .get("/metrics", &ca.client("admin", Some("system:masters"))?)
        .await?;
    assert_eq!(masters.status, 200, "{}", masters.body);

    // A front proxy asserts the user in headers; only its own certificate makes them count.
    let identity = || {
        vec![
            ("x-remote-user", "alice".to_string()),
            ("x-remote-group", "system:masters".to_string()),
        ]
    };
    let via = |ca: &ClientCa, cn: &str| -> anyhow::Result<Credentials> {
        match ca.client(cn, None)? {
            Credentials::Cert(chain, key) => Ok(Credentials::Proxy(chain, key, identity())),
            _ => anyhow::bail!("ClientCa::client makes certificates"),
        }
    };
    let proxied = ccm
        .get("/metrics", &via(&proxy_ca, "front-proxy-client")?)
        .await?;
    assert_eq!(proxied.status, 200, "{}", proxied.body);
    let unlisted = ccm
        .get("/metrics", &via(&proxy_ca, "not-the-proxy")?)
        .await?;
    assert_eq!(
        unlisted.status, 401,
        "CN outside --requestheader-allowed-names"
    );
    let spoofed = ccm.get("/metrics", &via(&ca, "bob")?).await?;
    assert_eq!(
        spoofed.status, 403,
        "a plain client's headers mean nothing: {}",
        spoofed.body
    );
    assert!(
        spoofed.body.contains("User \\\"bob\\\""),
        "{}",
        spoofed.body
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_configuration_lookup_stops_the_start_unless_tolerated() -> anyhow::Result<()> {
    let env = cluster().await?;
    let dir = scratch_dir("admin-auth-lookup")?;
    // A ServiceAccount with no roles may not read the ConfigMap.
    let token = env.token_for_service_account("default", "unprivileged")?;
    let weak = write(
        &dir,
        "weak.kubeconfig",
        &kube_testenv::kubeconfig_yaml_with_token(&env.url(), &token),
    )?;
    let refused = Ccm::start(&env, &dir, &[format!("--authentication-kubeconfig={weak}")])
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        refused.contains("unable to load configmap based request-header-client-ca-file"),
        "{refused}"
    );
    assert!(
        refused.contains("extension-apiserver-authentication-reader"),
        "{refused}"
    );

    let ccm = Ccm::start(
        &env,
        &dir,
        &[
            format!("--authentication-kubeconfig={weak}"),
            "--authentication-tolerate-lookup-failure".into(),
        ],
    )
    .await?;
    assert_eq!(ccm.get("/healthz", &Credentials::None).await?.status, 200);
    assert!(
        ccm.logs()
            .contains("Continuing without authentication configuration"),
        "{}",
        ccm.logs()
    );
    Ok(())
}

/// docs/deploy/delegated-auth.yaml, applied as a user would.
async fn apply_delegated_auth_yaml(env: &TestEnv) -> anyhow::Result<()> {
    use k8s_openapi::api::rbac::v1::RoleBinding;
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/deploy/delegated-auth.yaml");
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&std::fs::read_to_string(path)?)?;
    let client = env.client();
    for doc in docs {
        match doc["kind"].as_str() {
            Some("ClusterRoleBinding") => {
                Api::<ClusterRoleBinding>::all(client.clone())
                    .create(&PostParams::default(), &serde_json::from_value(doc)?)
                    .await?;
            }
            Some("RoleBinding") => {
                let ns = doc["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or("default")
                    .to_string();
                Api::<RoleBinding>::namespaced(client.clone(), &ns)
                    .create(&PostParams::default(), &serde_json::from_value(doc)?)
                    .await?;
            }
            other => anyhow::bail!("unexpected kind {other:?} in delegated-auth.yaml"),
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_bindings_are_all_delegated_auth_needs() -> anyhow::Result<()> {
    let env = cluster().await?;
    let dir = scratch_dir("admin-auth-shipped")?;
    apply_delegated_auth_yaml(&env).await?;
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "extension-apiserver-authentication", "namespace": "kube-system"},
        "data": {"client-ca-file": ClientCa::new()?.pem}
    }))?;
    Api::<ConfigMap>::namespaced(env.client(), "kube-system")
        .create(&PostParams::default(), &cm)
        .await?;
    let ccm_token = env.token_for_service_account("kube-system", "cloud-controller-manager")?;
    let own = write(
        &dir,
        "ccm-sa.kubeconfig",
        &kube_testenv::kubeconfig_yaml_with_token(&env.url(), &ccm_token),
    )?;
    let scraper = env.token_for_service_account("default", "scraper")?;
    grant_metrics(&env, "scraper").await?;
    // The delegated clients run as the ServiceAccount with only the shipped bindings; without
    // the reader RoleBinding the ConfigMap lookup fails and the process does not start.
    let ccm = Ccm::start(
        &env,
        &dir,
        &[
            format!("--authentication-kubeconfig={own}"),
            format!("--authorization-kubeconfig={own}"),
        ],
    )
    .await?;
    let r = ccm.get("/metrics", &Credentials::Token(scraper)).await?;
    assert_eq!(
        r.status, 200,
        "TokenReview and SubjectAccessReview allowed: {}",
        r.body
    );
    let sa = "system:serviceaccount:kube-system:cloud-controller-manager";
    let mine: Vec<RequestRecord> = env
        .requests()
        .into_iter()
        .filter(|r| r.user == sa)
        .collect();
    let made = |resource: &str| {
        mine.iter()
            .any(|r| r.resource == resource && r.status < 300)
    };
    assert!(
        made("configmaps") && made("tokenreviews") && made("subjectaccessreviews"),
        "{mine:#?}"
    );
    assert!(mine.iter().all(|r| r.status != 403), "{mine:#?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outside_a_cluster_without_kubeconfigs_only_masters_and_allowed_paths_pass()
-> anyhow::Result<()> {
    let env = cluster().await?;
    let dir = scratch_dir("admin-auth-none")?;
    let ca = ClientCa::new()?;
    let ca_file = write(&dir, "client-ca.crt", &ca.pem)?;
    let token = env.token_for_service_account("default", "scraper")?;
    grant_metrics(&env, "scraper").await?;
    // No --authentication-kubeconfig / --authorization-kubeconfig and no in-cluster config:
    // upstream then reviews nothing, so a token counts as anonymous.
    let ccm = Ccm::start(&env, &dir, &[format!("--client-ca-file={ca_file}")]).await?;
    assert_eq!(ccm.get("/healthz", &Credentials::None).await?.status, 200);
    let r = ccm.get("/metrics", &Credentials::Token(token)).await?;
    assert_eq!(r.status, 403);
    assert!(
        r.body.contains("User \\\"system:anonymous\\\""),
        "{}",
        r.body
    );
    let masters = ccm
        .get("/metrics", &ca.client("admin", Some("system:masters"))?)
        .await?;
    assert_eq!(masters.status, 200);
    assert_eq!(
        env.requests()
            .iter()
            .filter(|r| r.resource.ends_with("reviews"))
            .count(),
        0,
        "no review was attempted"
    );
    Ok(())
}
