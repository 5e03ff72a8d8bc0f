//! The authentication half of the public API: the builder options that configure it (static
//! tokens, RBAC enforcement, HTTPS) and the `TestEnv` methods that hand tests credentials
//! (ServiceAccount tokens, client certificates, clients that use them).

use serde_json::json;

use crate::api::status;
use crate::{Builder, Error, TestEnv, auth, handlers};

impl Builder {
    /// Accepts bearer `token` as `user` (with `uid`, may be empty, and `groups`; every
    /// authenticated user is also in `system:authenticated`), as a line of kube-apiserver's
    /// `--token-auth-file` does.
    pub fn static_token(mut self, token: &str, user: &str, uid: &str, groups: &[&str]) -> Self {
        self.static_tokens.insert(
            token.to_string(),
            auth::UserInfo::authenticated(user, uid, groups),
        );
        self
    }

    /// Authorizes every request by RBAC (`--authorization-mode=RBAC`; members of
    /// `system:masters` are always allowed). Off by default: every request is allowed, as
    /// `--authorization-mode=AlwaysAllow`, and access reviews answer allowed.
    /// [`TestEnv::client`] is `system:masters` either way.
    pub fn authorization(mut self, enforce: bool) -> Self {
        self.authorization = enforce;
        self
    }

    /// Serves HTTPS with a CA made at start (default: plain HTTP). [`TestEnv::config`] and the
    /// written kubeconfig trust it; client certificates it signs
    /// ([`TestEnv::client_certificate`]) authenticate as their CN in their O groups, and the CA is
    /// published as `client-ca-file` in `kube-system/extension-apiserver-authentication`, as
    /// kube-apiserver does with `--client-ca-file`. kubectl (client-go) sends bearer tokens and
    /// client certificates over TLS only.
    pub fn https(mut self, https: bool) -> Self {
        self.https = https;
        self
    }
}

impl TestEnv {
    /// The CA certificate (PEM) of a server started with [`Builder::https`].
    pub fn ca_pem(&self) -> Option<&str> {
        self.inner.shared.tls.as_ref().map(|t| t.ca_pem.as_str())
    }

    /// A client certificate and key (PEM) for `user` in `groups`, signed by this server's CA
    /// (needs [`Builder::https`]).
    pub fn client_certificate(
        &self,
        user: &str,
        groups: &[&str],
    ) -> Result<(String, String), Error> {
        let tls = self.inner.shared.tls.as_ref().ok_or(Error::NoHttps)?;
        tls.client_certificate(user, groups)
            .map_err(|e| Error::Tls(e.to_string()))
    }

    /// A kube config that authenticates with a client certificate for `user` in `groups`
    /// (needs [`Builder::https`]).
    pub fn config_with_client_certificate(
        &self,
        user: &str,
        groups: &[&str],
    ) -> Result<kube::Config, Error> {
        let (cert, key) = self.client_certificate(user, groups)?;
        let mut config = self.config_with_token("");
        let info = json!({
            "client-certificate-data": auth::base64(cert.as_bytes()),
            "client-key-data": auth::base64(key.as_bytes()),
        });
        config.auth_info = serde_json::from_value(info).map_err(|e| Error::Tls(e.to_string()))?;
        Ok(config)
    }

    /// A real `kube::Client` that authenticates with bearer `token` (a
    /// [`Builder::static_token`] or one from [`TestEnv::token_for_service_account`]).
    ///
    /// # Panics
    /// As [`TestEnv::client`].
    pub fn client_with_token(&self, token: &str) -> kube::Client {
        match kube::Client::try_from(self.config_with_token(token)) {
            Ok(c) => c,
            Err(e) => panic!("building a kube::Client for {}: {e}", self.url()),
        }
    }

    /// The bearer token of [`ADMIN_USER`], as [`TestEnv::client`] and the written kubeconfig use.
    pub fn admin_token(&self) -> &str {
        &self.inner.admin_token
    }

    /// A one-hour token for ServiceAccount `namespace/name`, as the TokenRequest API
    /// (`kubectl create token`) mints it; the ServiceAccount is created if missing. The token
    /// authenticates as `system:serviceaccount:<namespace>:<name>` until it expires (on tokio's
    /// clock) or the ServiceAccount is deleted.
    pub fn token_for_service_account(&self, namespace: &str, name: &str) -> Result<String, Error> {
        let shared = &self.inner.shared;
        let fail = |e: status::ApiError| Error::ServiceAccountToken {
            namespace: namespace.to_string(),
            name: name.to_string(),
            message: e.message,
        };
        let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}});
        let target = handlers::Target::builtin("", "serviceaccounts", Some(namespace))
            .ok_or_else(|| fail(status::ApiError::no_route()))?;
        match shared.store.with(|s| {
            handlers::create(
                s,
                &shared.admission,
                &target,
                sa,
                &handlers::WriteOptions::by("kube-testenv"),
            )
        }) {
            Err(e) if e.reason != "AlreadyExists" => return Err(fail(e)),
            _ => {}
        }
        let audiences = vec![auth::API_AUDIENCE.to_string()];
        auth::mint(
            &shared.store,
            &shared.auth,
            namespace,
            name,
            audiences,
            3600,
        )
        .map(|(token, _)| token)
        .map_err(fail)
    }
}
