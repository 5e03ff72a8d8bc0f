//! The Secret every replica shares (type `kubernetes.io/tls`): the serving pair (`tls.crt`,
//! `tls.key`), the CA pair (`ca.crt`, `ca.key`) and the bundle to trust (`ca-bundle.crt`), with
//! annotations saying which names the serving certificate covers and when it was issued and
//! expires. The first replica to find no Secret creates it; a create that fails with
//! AlreadyExists reads the winner's. A renewal (names changed, two thirds of the serving
//! certificate's life gone, or the `controller-manager.io/rotate` annotation) is a replace with
//! the resourceVersion read: a replica that loses the race reads again and adopts the winner's.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};

use super::authority::{self, Pair};
use super::error::CertsError;

/// Forces a renewal of the serving certificate when present; removed by the renewal.
pub const ROTATE_ANNOTATION: &str = "controller-manager.io/rotate";
const NAMES: &str = "controller-manager.io/serving-names";
const ISSUED: &str = "controller-manager.io/serving-issued";
const EXPIRES: &str = "controller-manager.io/serving-expires";
/// How many times a lost race is retried before giving up for this round.
const ATTEMPTS: usize = 5;

/// What the Secret must hold: its name, the serving certificate's names, and how long
/// certificates are valid.
#[derive(Clone, Debug)]
pub(crate) struct Wanted {
    pub(crate) secret: String,
    pub(crate) dns_names: Vec<String>,
    pub(crate) validity_days: u32,
    pub(crate) ca_validity_days: u32,
}

/// What the Secret holds, as the server needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stored {
    /// The serving certificate and key.
    pub serving: Pair,
    /// The CA bundle to trust (PEM), written into `caBundle`.
    pub ca_bundle: String,
}

/// Reads the Secret, creating or renewing it as needed; every replica calling it at once ends
/// with the same answer.
pub(crate) async fn ensure(api: &Api<Secret>, cfg: &Wanted) -> Result<Stored, CertsError> {
    for _ in 0..ATTEMPTS {
        let Some(secret) = api.get_opt(&cfg.secret).await? else {
            let ca = authority::new_ca(&format!("{}-ca", cfg.secret), cfg.ca_validity_days)?;
            let secret = build(cfg, &ca, None)?;
            match api.create(&PostParams::default(), &secret).await {
                Ok(created) => return read(&created),
                Err(kube::Error::Api(e)) if e.code == 409 => continue,
                Err(e) => return Err(e.into()),
            }
        };
        let stored = read(&secret)?;
        if !due(&secret, cfg) {
            return Ok(stored);
        }
        let ca = Pair {
            cert_pem: text(&secret, "ca.crt")?,
            key_pem: text(&secret, "ca.key")?,
        };
        let renewed = build(cfg, &ca, Some(&secret))?;
        match api
            .replace(&cfg.secret, &PostParams::default(), &renewed)
            .await
        {
            Ok(replaced) => return read(&replaced),
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(CertsError::Invalid(format!(
        "Secret {}: lost {ATTEMPTS} write races in a row",
        cfg.secret
    )))
}

/// Whether the serving certificate must be renewed.
fn due(secret: &Secret, cfg: &Wanted) -> bool {
    let annotations = secret.metadata.annotations.clone().unwrap_or_default();
    if annotations.contains_key(ROTATE_ANNOTATION) {
        return true;
    }
    if annotations.get(NAMES).map(String::as_str) != Some(cfg.dns_names.join(",").as_str()) {
        return true;
    }
    let time = |key: &str| {
        annotations
            .get(key)
            .and_then(|v| v.parse::<jiff::Timestamp>().ok())
    };
    match (time(ISSUED), time(EXPIRES)) {
        (Some(issued), Some(expires)) => {
            let life = expires.as_second() - issued.as_second();
            jiff::Timestamp::now().as_second() >= issued.as_second() + life * 2 / 3
        }
        _ => true,
    }
}

/// The Secret with a new serving certificate under `ca`; `previous` gives its metadata (and
/// resourceVersion, the precondition of the replace).
fn build(cfg: &Wanted, ca: &Pair, previous: Option<&Secret>) -> Result<Secret, CertsError> {
    let serving = authority::issue(ca, &cfg.dns_names, cfg.validity_days)?;
    let now = jiff::Timestamp::now();
    let expires = now + jiff::SignedDuration::from_hours(24 * i64::from(cfg.validity_days));
    let mut metadata = previous
        .map(|s| s.metadata.clone())
        .unwrap_or_else(|| ObjectMeta {
            name: Some(cfg.secret.clone()),
            ..ObjectMeta::default()
        });
    let annotations = metadata.annotations.get_or_insert_default();
    annotations.remove(ROTATE_ANNOTATION);
    annotations.insert(NAMES.to_string(), cfg.dns_names.join(","));
    annotations.insert(ISSUED.to_string(), now.to_string());
    annotations.insert(EXPIRES.to_string(), expires.to_string());
    let bytes = |s: &str| ByteString(s.as_bytes().to_vec());
    let data = BTreeMap::from([
        ("tls.crt".to_string(), bytes(&serving.cert_pem)),
        ("tls.key".to_string(), bytes(&serving.key_pem)),
        ("ca.crt".to_string(), bytes(&ca.cert_pem)),
        ("ca.key".to_string(), bytes(&ca.key_pem)),
        ("ca-bundle.crt".to_string(), bytes(&ca.cert_pem)),
    ]);
    Ok(Secret {
        metadata,
        type_: Some("kubernetes.io/tls".to_string()),
        data: Some(data),
        ..Secret::default()
    })
}

/// What `secret` holds.
fn read(secret: &Secret) -> Result<Stored, CertsError> {
    Ok(Stored {
        serving: Pair {
            cert_pem: text(secret, "tls.crt")?,
            key_pem: text(secret, "tls.key")?,
        },
        ca_bundle: text(secret, "ca-bundle.crt")?,
    })
}

/// The UTF-8 text of `key` in the Secret's data.
fn text(secret: &Secret, key: &str) -> Result<String, CertsError> {
    let name = secret.metadata.name.as_deref().unwrap_or("");
    let value = secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .ok_or_else(|| CertsError::Invalid(format!("Secret {name} has no {key}")))?;
    String::from_utf8(value.0.clone())
        .map_err(|_| CertsError::Invalid(format!("Secret {name}: {key} is not PEM text")))
}
