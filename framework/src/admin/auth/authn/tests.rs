use axum::http::HeaderValue;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};

use super::*;
use crate::admin::auth::user::{ANONYMOUS, AUTHENTICATED};

struct Ca {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

fn ca(name: &str) -> Ca {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let cert = params.self_signed(&key).unwrap();
    Ca {
        pem: cert.pem(),
        issuer: Issuer::new(params, key),
    }
}

fn client(ca: &Ca, cn: &str, org: Option<&str>) -> Vec<CertificateDer<'static>> {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(DnType::CommonName, cn);
    if let Some(org) = org {
        params
            .distinguished_name
            .push(DnType::OrganizationName, org);
    }
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let cert = params
        .signed_by(&KeyPair::generate().unwrap(), &ca.issuer)
        .unwrap();
    vec![cert.der().clone()]
}

fn bundle(ca: &Ca) -> Option<CaBundle> {
    CaBundle::from_pem(ca.pem.as_bytes()).unwrap()
}

fn authenticator(client_ca: Option<CaBundle>, proxy: Option<RequestHeaderConfig>) -> Authenticator {
    Authenticator {
        certs: RwLock::new(Arc::new(CertTrust {
            request_header: proxy,
            client_ca,
        })),
        tokens: None,
    }
}

#[tokio::test]
async fn client_certificate_cn_is_the_user_and_o_the_groups() {
    let ca = ca("client-ca");
    let a = authenticator(bundle(&ca), None);
    let user = a
        .authenticate(
            &mut HeaderMap::new(),
            &client(&ca, "alice", Some("system:masters")),
        )
        .await
        .unwrap();
    assert_eq!(user.name, "alice");
    assert_eq!(user.groups, vec!["system:masters", AUTHENTICATED]);
}

#[tokio::test]
async fn a_certificate_from_another_ca_is_refused_and_none_is_anonymous() {
    let (ca, other) = (ca("client-ca"), ca("other"));
    let a = authenticator(bundle(&ca), None);
    let err = a
        .authenticate(&mut HeaderMap::new(), &client(&other, "mallory", None))
        .await
        .unwrap_err();
    assert!(err.contains("verifying certificate failed"), "{err}");
    let anon = a.authenticate(&mut HeaderMap::new(), &[]).await.unwrap();
    assert_eq!(anon.name, ANONYMOUS);
    // A bearer token with no token reviewer configured is ignored, as upstream.
    let mut headers = HeaderMap::new();
    headers.insert(AUTHORIZATION, HeaderValue::from_static("Bearer abc"));
    assert_eq!(
        a.authenticate(&mut headers, &[]).await.unwrap().name,
        ANONYMOUS
    );
}

fn proxy(ca: &Ca, allowed: &[&str]) -> RequestHeaderConfig {
    RequestHeaderConfig {
        ca: bundle(ca),
        allowed_names: allowed.iter().map(|s| s.to_string()).collect(),
        username_headers: vec!["x-remote-user".into()],
        uid_headers: vec!["x-remote-uid".into()],
        group_headers: vec!["x-remote-group".into()],
        extra_prefixes: vec!["X-Remote-Extra-".into()],
    }
}

#[tokio::test]
async fn front_proxy_headers_are_trusted_only_from_its_certificate() {
    let proxy_ca = ca("front-proxy-ca");
    let a = authenticator(None, Some(proxy(&proxy_ca, &["front-proxy-client"])));
    let mut headers = HeaderMap::new();
    headers.insert("x-remote-user", HeaderValue::from_static("bob"));
    headers.insert("x-remote-uid", HeaderValue::from_static("42"));
    headers.append("x-remote-group", HeaderValue::from_static("devs"));
    headers.append("x-remote-group", HeaderValue::from_static("ops"));
    headers.insert(
        "x-remote-extra-scopes%2fread",
        HeaderValue::from_static("yes"),
    );
    let mut sent = headers.clone();
    let user = a
        .authenticate(&mut sent, &client(&proxy_ca, "front-proxy-client", None))
        .await
        .unwrap();
    assert_eq!(user.name, "bob");
    assert_eq!(user.uid, "42");
    assert_eq!(user.groups, vec!["devs", "ops", AUTHENTICATED]);
    assert_eq!(
        user.extra.get("scopes/read"),
        Some(&vec!["yes".to_string()])
    );
    assert!(sent.is_empty(), "identity headers are removed: {sent:?}");

    let err = a
        .authenticate(
            &mut headers.clone(),
            &client(&proxy_ca, "someone-else", None),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err,
        "x509: subject with cn=someone-else is not in the allowed list"
    );
    // Without the proxy's certificate the headers mean nothing.
    assert_eq!(
        a.authenticate(&mut headers, &[]).await.unwrap().name,
        ANONYMOUS
    );
}

#[test]
fn bearer_tokens_are_split_as_upstream() {
    let get = |v: &'static str| {
        let mut h = HeaderMap::new();
        h.insert(AUTHORIZATION, HeaderValue::from_static(v));
        bearer_token(&h)
    };
    assert_eq!(get("Bearer abc"), Some("abc".into()));
    assert_eq!(get("bearer abc extra"), Some("abc".into()));
    assert_eq!(get("Basic abc"), None);
    assert_eq!(get("Bearer "), None);
    assert_eq!(bearer_token(&HeaderMap::new()), None);
}

#[tokio::test(start_paused = true)]
async fn a_rotated_client_ca_file_is_trusted_within_a_minute() {
    use std::time::Duration;

    use crate::admin::auth::{
        AllowPaths, DelegatedAuth, DelegatedAuthConfig, RELOAD_EVERY, RequestHeaderFlags,
        keep_fresh,
    };

    let dir = std::env::temp_dir().join(format!("cm-ca-reload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("client-ca.crt");
    let (old, new) = (ca("old-ca"), ca("new-ca"));
    std::fs::write(&file, &old.pem).unwrap();
    let cfg = DelegatedAuthConfig {
        authentication_kubeconfig: None,
        authorization_kubeconfig: None,
        skip_lookup: true,
        tolerate_lookup_failure: false,
        token_cache_ttl: Duration::from_secs(10),
        client_ca_file: Some(file.clone()),
        request_header: RequestHeaderFlags::default(),
        always_allow_paths: AllowPaths::default(),
        authorized_ttl: Duration::from_secs(10),
        unauthorized_ttl: Duration::from_secs(10),
        user_agent: "test".into(),
    };
    let auth = Arc::new(DelegatedAuth::build(&cfg).await.unwrap());
    let who = |certs: Vec<CertificateDer<'static>>| {
        let auth = auth.clone();
        async move { auth.authn.authenticate(&mut HeaderMap::new(), &certs).await }
    };
    assert_eq!(
        who(client(&old, "alice", None)).await.unwrap().name,
        "alice"
    );

    std::fs::write(&file, &new.pem).unwrap();
    let reloader = tokio::spawn(keep_fresh(Arc::downgrade(&auth)));
    tokio::time::sleep(RELOAD_EVERY - Duration::from_secs(1)).await;
    assert!(
        who(client(&new, "bob", None)).await.is_err(),
        "not yet reloaded"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(who(client(&new, "bob", None)).await.unwrap().name, "bob");
    assert!(
        who(client(&old, "alice", None)).await.is_err(),
        "the old CA is gone"
    );

    // A file that stops parsing keeps the last good trust.
    std::fs::write(&file, "garbage").unwrap();
    tokio::time::sleep(RELOAD_EVERY).await;
    assert_eq!(who(client(&new, "bob", None)).await.unwrap().name, "bob");

    drop(auth);
    tokio::time::sleep(RELOAD_EVERY).await;
    assert!(reloader.is_finished(), "the reloader ends with the server");
    let _ = std::fs::remove_dir_all(&dir);
}
