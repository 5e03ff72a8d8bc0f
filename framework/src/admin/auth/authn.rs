//! Delegated authentication, as k8s.io/apiserver's `DelegatingAuthenticatorConfig`: front-proxy
//! request headers (a client certificate from `--requestheader-client-ca-file`, then
//! `X-Remote-User` and friends), client certificates from `--client-ca-file` (CN is the user, O
//! the groups), then bearer tokens by TokenReview. The first that succeeds wins; if none does and
//! one failed the request is refused (401); if none applied the caller is anonymous.

use std::sync::Arc;

use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use parking_lot::RwLock;
use tokio_rustls::rustls::pki_types::CertificateDer;

use super::user::UserInfo;
use super::webhook::{Extra, TokenReviewer};
use crate::serving::x509::{CaBundle, cert_names};

/// The front proxy's CA and the headers it asserts identities in (flags or the
/// `extension-apiserver-authentication` ConfigMap).
#[derive(Clone, Debug, Default)]
pub(crate) struct RequestHeaderConfig {
    /// Verifies the proxy's client certificate; `None` means the authenticator never applies.
    pub ca: Option<CaBundle>,
    /// Common names the proxy's certificate may have; empty allows any.
    pub allowed_names: Vec<String>,
    pub username_headers: Vec<String>,
    pub uid_headers: Vec<String>,
    pub group_headers: Vec<String>,
    pub extra_prefixes: Vec<String>,
}

/// The two certificate-based authenticators' trust, replaced whole when it is reloaded.
#[derive(Clone, Debug, Default)]
pub(crate) struct CertTrust {
    pub request_header: Option<RequestHeaderConfig>,
    pub client_ca: Option<CaBundle>,
}

/// The union of the configured authenticators.
pub(crate) struct Authenticator {
    pub certs: RwLock<Arc<CertTrust>>,
    pub tokens: Option<TokenReviewer>,
}

impl Authenticator {
    /// Who sent the request; credentials are removed from `headers` once used, as upstream.
    pub(crate) async fn authenticate(
        &self,
        headers: &mut HeaderMap,
        certs: &[CertificateDer<'static>],
    ) -> Result<UserInfo, String> {
        let mut errors = Vec::new();
        let trust = self.certs.read().clone();
        if let Some(rh) = &trust.request_header {
            match rh.authenticate(headers, certs) {
                Ok(Some(user)) => return Ok(user.with_authenticated_group()),
                Ok(None) => {}
                Err(e) => errors.push(e),
            }
        }
        if let Some(ca) = &trust.client_ca {
            match client_cert(ca, certs) {
                Ok(Some(user)) => return Ok(user.with_authenticated_group()),
                Ok(None) => {}
                Err(e) => errors.push(e),
            }
        }
        if let Some(tokens) = &self.tokens
            && let Some(token) = bearer_token(headers)
        {
            match tokens.review(&token).await {
                Ok(Some(user)) => {
                    headers.remove(AUTHORIZATION);
                    return Ok(user.with_authenticated_group());
                }
                Ok(None) => errors.push("invalid bearer token".to_string()),
                Err(e) => errors.push(e),
            }
        }
        match errors.is_empty() {
            true => Ok(UserInfo::anonymous()),
            false => Err(errors.join(", ")),
        }
    }
}

/// `Authorization: Bearer <token>`, as upstream's bearertoken authenticator splits it.
fn bearer_token(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?.trim();
    let mut parts = value.splitn(3, ' ');
    let scheme = parts.next()?;
    let token = parts.next()?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then(|| token.to_string())
}

/// Upstream's x509 authenticator with `CommonNameUserConversion`.
fn client_cert(
    ca: &CaBundle,
    certs: &[CertificateDer<'static>],
) -> Result<Option<UserInfo>, String> {
    let Some(leaf) = certs.first() else {
        return Ok(None);
    };
    ca.verify(certs)
        .map_err(|e| format!("verifying certificate failed: {e}"))?;
    let names = cert_names(leaf).ok_or("cannot read the client certificate's subject")?;
    if names.common_name.is_empty() {
        return Ok(None);
    }
    Ok(Some(UserInfo {
        name: names.common_name,
        groups: names.organizations,
        ..Default::default()
    }))
}

impl RequestHeaderConfig {
    fn authenticate(
        &self,
        headers: &mut HeaderMap,
        certs: &[CertificateDer<'static>],
    ) -> Result<Option<UserInfo>, String> {
        let (Some(ca), Some(leaf)) = (&self.ca, certs.first()) else {
            return Ok(None);
        };
        ca.verify(certs)
            .map_err(|e| format!("verifying front-proxy certificate failed: {e}"))?;
        if !self.allowed_names.is_empty() {
            let cn = cert_names(leaf).map(|n| n.common_name).unwrap_or_default();
            if !self.allowed_names.contains(&cn) {
                return Err(format!(
                    "x509: subject with cn={cn} is not in the allowed list"
                ));
            }
        }
        let first = |names: &[String]| {
            names.iter().find_map(|h| {
                headers
                    .get_all(h.as_str())
                    .iter()
                    .filter_map(|v| v.to_str().ok())
                    .map(str::trim)
                    .find(|v| !v.is_empty())
                    .map(str::to_string)
            })
        };
        let Some(name) = first(&self.username_headers) else {
            return Ok(None);
        };
        let uid = first(&self.uid_headers).unwrap_or_default();
        let mut groups = Vec::new();
        for h in &self.group_headers {
            groups.extend(
                headers
                    .get_all(h.as_str())
                    .iter()
                    .filter_map(|v| v.to_str().ok())
                    .map(str::to_string),
            );
        }
        let mut extra = Extra::new();
        let mut used: Vec<String> = Vec::new();
        for (header, value) in headers.iter() {
            let lower = header.as_str();
            for prefix in &self.extra_prefixes {
                let prefix = prefix.to_ascii_lowercase();
                if let Some(key) = lower.strip_prefix(prefix.as_str())
                    && let Ok(value) = value.to_str()
                {
                    extra
                        .entry(percent_decode(key))
                        .or_default()
                        .push(value.to_string());
                    used.push(lower.to_string());
                }
            }
        }
        for h in self
            .username_headers
            .iter()
            .chain(&self.uid_headers)
            .chain(&self.group_headers)
            .chain(&used)
        {
            headers.remove(h.as_str());
        }
        Ok(Some(UserInfo {
            name,
            uid,
            groups,
            extra,
        }))
    }
}

/// Go's `url.PathUnescape` for extra keys (`X-Remote-Extra-Scopes%2Fread`).
fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests;
