//! Calling a webhook as kube-apiserver does, for admission webhooks and CRD conversion webhooks
//! alike: where it is ([`ClientConfig`]: `clientConfig.url` with its `caBundle`, or
//! `clientConfig.service` resolved through the Service's EndpointSlices, else its Endpoints), one
//! HTTPS `POST` bounded by a deadline ([`post`]: `?timeout=Ns` in the URL, as client-go adds it,
//! and the connection, TLS handshake, request and answer all within it), and the answer read as
//! client-go's `Result.Into` reads it ([`decode`]).
//!
//! Every failure is a [`CallError`] whose `Display` is the wording kube-apiserver puts after its
//! own prefix, e.g. `Post "https://127.0.0.1:1/down?timeout=30s": dial tcp 127.0.0.1:1: connect:
//! connection refused`, `Post "…": context deadline exceeded` or `an error on the server
//! ("boom") has prevented the request from succeeding`; the admission chain prefixes it with
//! `failed calling webhook "<name>": failed to call webhook: `, a conversion with `conversion
//! webhook for <gvk> failed: `.
//!
//! ```ignore
//! let cc = ClientConfig::from_json(&crd["spec"]["conversion"]["webhook"]["clientConfig"]);
//! let target = store.with(|s| cc.resolve(s))?;        // under the store lock: a Service's endpoints
//! let answer = post(&target, body, Duration::from_secs(30)).await?;   // no lock held
//! let review = decode(&answer, &[("apiextensions.k8s.io/v1", "ConversionReview")], SCHEME)?;
//! ```
//!
//! A hostile webhook costs its caller at most the deadline: every call is its own connection on
//! the caller's task, the answer is read up to [`MAX_ANSWER_BYTES`], and nothing here holds the
//! store lock.

mod connect;
mod decode;
mod error;
pub mod gojson;
mod resolve;
mod tls;

use std::time::Duration;

use serde_json::Value;

pub use connect::{Answer, MAX_ANSWER_BYTES, post};
pub use decode::decode;
pub use error::CallError;
pub use resolve::Target;

/// A `WebhookClientConfig`: `url` or `service`, and `caBundle` (decoded from base64).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClientConfig {
    /// `url`.
    pub url: Option<String>,
    /// `service`.
    pub service: Option<ServiceRef>,
    /// `caBundle`: PEM certificates the webhook's serving certificate must chain to.
    pub ca_bundle: Vec<u8>,
}

/// A `ServiceReference`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ServiceRef {
    /// `namespace`.
    pub namespace: String,
    /// `name`.
    pub name: String,
    /// `path`, if any.
    pub path: Option<String>,
    /// `port` (defaulted to 443 as the server defaults it).
    pub port: u16,
}

impl ClientConfig {
    /// Reads a `clientConfig` object as stored (defaults applied); a `caBundle` that is not
    /// base64 is taken as empty, which the server's validation would have refused.
    pub fn from_json(v: &Value) -> ClientConfig {
        let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(String::from);
        let service = v
            .get("service")
            .filter(|s| s.is_object())
            .map(|svc| ServiceRef {
                namespace: s(svc, "namespace").unwrap_or_default(),
                name: s(svc, "name").unwrap_or_default(),
                path: s(svc, "path"),
                port: svc
                    .get("port")
                    .and_then(Value::as_u64)
                    .and_then(|p| u16::try_from(p).ok())
                    .unwrap_or(443),
            });
        let ca_bundle = s(v, "caBundle")
            .and_then(|b| {
                use base64::Engine;
                base64::engine::general_purpose::STANDARD.decode(b).ok()
            })
            .unwrap_or_default();
        ClientConfig {
            url: s(v, "url"),
            service,
            ca_bundle,
        }
    }
}

/// `timeout` as Go's `time.Duration` prints whole seconds (`5s`, `1m30s`), the form client-go
/// puts in `?timeout=` (rounded up to the second, as upstream's dispatchers round it).
pub fn go_seconds(timeout: Duration) -> String {
    let mut secs = timeout.as_secs();
    if timeout.subsec_nanos() > 0 {
        secs += 1;
    }
    match (secs / 3600, secs % 3600 / 60, secs % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s}s"),
        (h, m, s) => format!("{h}h{m}m{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn durations_print_as_go_prints_them() {
        assert_eq!(go_seconds(Duration::from_secs(5)), "5s");
        assert_eq!(go_seconds(Duration::from_millis(1500)), "2s");
        assert_eq!(go_seconds(Duration::from_secs(30)), "30s");
        assert_eq!(go_seconds(Duration::from_secs(90)), "1m30s");
        assert_eq!(go_seconds(Duration::from_secs(3600)), "1h0m0s");
    }

    #[test]
    fn client_config_reads_url_service_and_bundle() {
        let cc = ClientConfig::from_json(&json!({
            "service": {"namespace": "ns", "name": "svc", "path": "/v"},
            "caBundle": "YWJj"
        }));
        assert_eq!(cc.url, None);
        assert_eq!(
            cc.service,
            Some(ServiceRef {
                namespace: "ns".into(),
                name: "svc".into(),
                path: Some("/v".into()),
                port: 443
            })
        );
        assert_eq!(cc.ca_bundle, b"abc");
    }
}
