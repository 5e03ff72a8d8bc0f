//! The Secret every replica shares (type `kubernetes.io/tls`): the serving pair (`tls.crt`,
//! `tls.key`), the current CA pair (`ca.crt`, `ca.key`) and the bundle to trust
//! (`ca-bundle.crt`, one CA or, during a CA rotation, the old and the new), with annotations
//! saying which names the serving certificate covers, which CA signed it, and when each was
//! made and expires. The first replica to find no Secret creates it; a create that fails with
//! AlreadyExists reads the winner's. Every later write (a step of `rotation`) is a replace with
//! the resourceVersion read: a replica that loses the race reads again and decides again.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Api;
use kube::api::{ObjectMeta, PostParams};

use super::authority::{self, Pair, bundle_fingerprints, fingerprint};
use super::error::CertsError;
use super::inject::Managed;
use super::lease::ServingLeases;
use super::rotation::{self, Gate, Step, View};

/// Forces a renewal of the serving certificate when present (of the CA too when its value is
/// `ca`); removed by the next write.
pub const ROTATE_ANNOTATION: &str = "controller-manager.io/rotate";
const NAMES: &str = "controller-manager.io/serving-names";
const ISSUED: &str = "controller-manager.io/serving-issued";
const EXPIRES: &str = "controller-manager.io/serving-expires";
const SERVING_CA: &str = "controller-manager.io/serving-ca";
const CA_ISSUED: &str = "controller-manager.io/ca-issued";
const CA_EXPIRES: &str = "controller-manager.io/ca-expires";
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

/// What the gated steps wait on: the managed configurations and the replicas' Leases.
pub(crate) struct Gates<'a> {
    pub(crate) client: &'a kube::Client,
    pub(crate) managed: &'a [Managed],
    pub(crate) leases: &'a ServingLeases,
}

impl Gates<'_> {
    async fn open(&self, gate: Gate, secret: &Secret) -> Result<bool, CertsError> {
        match gate {
            Gate::ConfigurationsHoldBundle => {
                let bundle = text(secret, "ca-bundle.crt")?;
                for managed in self.managed {
                    if !managed.holds(self.client, &bundle).await? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            Gate::ReplicasServeCertificate => {
                let serving = fingerprint(&text(secret, "tls.crt")?)?;
                self.leases.all_serve(&serving).await
            }
        }
    }
}

/// What the Secret holds, as the server needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stored {
    /// The serving certificate and key.
    pub serving: Pair,
    /// The CA bundle to trust (PEM), written into `caBundle`.
    pub ca_bundle: String,
}

/// Reads the Secret, creating it or taking the next step it needs once its gate is open;
/// every replica calling it at once ends with the same answer.
pub(crate) async fn ensure(
    api: &Api<Secret>,
    cfg: &Wanted,
    gates: &Gates<'_>,
) -> Result<Stored, CertsError> {
    for _ in 0..ATTEMPTS {
        let Some(secret) = api.get_opt(&cfg.secret).await? else {
            match api.create(&PostParams::default(), &first(cfg)?).await {
                Ok(created) => return read(&created),
                Err(kube::Error::Api(e)) if e.code == 409 => continue,
                Err(e) => return Err(e.into()),
            }
        };
        let names = cfg.dns_names.join(",");
        let Some(step) = rotation::next(&view(&secret)?, &names, Timestamp::now()) else {
            return read(&secret);
        };
        if let Some(gate) = step.gate()
            && !gates.open(gate, &secret).await?
        {
            return read(&secret);
        }
        let written = take(step, cfg, secret)?;
        match api
            .replace(&cfg.secret, &PostParams::default(), &written)
            .await
        {
            Ok(replaced) => {
                tracing::info!(secret = %cfg.secret, ?step, "webhook certificate Secret written");
                return read(&replaced);
            }
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(CertsError::Invalid(format!(
        "Secret {}: lost {ATTEMPTS} write races in a row",
        cfg.secret
    )))
}

/// What the rotation decision reads from `secret`.
fn view(secret: &Secret) -> Result<View, CertsError> {
    let annotations = secret.metadata.annotations.clone().unwrap_or_default();
    let time = |key: &str| {
        annotations
            .get(key)
            .and_then(|v| v.parse::<Timestamp>().ok())
    };
    let life = |issued: &str, expires: &str| time(issued).zip(time(expires));
    Ok(View {
        ca: fingerprint(&text(secret, "ca.crt")?)?,
        bundle: bundle_fingerprints(&text(secret, "ca-bundle.crt")?)?,
        serving_ca: annotations.get(SERVING_CA).cloned(),
        rotate: annotations.get(ROTATE_ANNOTATION).cloned(),
        names: annotations.get(NAMES).cloned(),
        serving_life: life(ISSUED, EXPIRES),
        ca_life: life(CA_ISSUED, CA_EXPIRES),
    })
}

/// A new CA named for the Secret and the time, as upstream names its self-signed CAs, so
/// that two CAs in one bundle never share a subject.
fn new_ca(cfg: &Wanted, now: Timestamp) -> Result<Pair, CertsError> {
    authority::new_ca(
        &format!("{}-ca@{}", cfg.secret, now.as_second()),
        cfg.ca_validity_days,
    )
}

fn days(n: u32) -> SignedDuration {
    SignedDuration::from_hours(24 * i64::from(n))
}

/// The Secret the first replica creates: a CA and a serving certificate signed by it.
fn first(cfg: &Wanted) -> Result<Secret, CertsError> {
    let now = Timestamp::now();
    let ca = new_ca(cfg, now)?;
    let mut secret = Secret {
        metadata: ObjectMeta {
            name: Some(cfg.secret.clone()),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/tls".to_string()),
        ..Secret::default()
    };
    put_ca(&mut secret, &ca, now, cfg);
    put(&mut secret, "ca-bundle.crt", &ca.cert_pem);
    serve(&mut secret, &ca, now, cfg)?;
    Ok(secret)
}

/// `secret` after `step`, keeping its metadata (and with it the resourceVersion, the
/// precondition of the replace).
fn take(step: Step, cfg: &Wanted, mut secret: Secret) -> Result<Secret, CertsError> {
    let now = Timestamp::now();
    secret.metadata.managed_fields = None;
    let annotations = secret.metadata.annotations.get_or_insert_default();
    annotations.remove(ROTATE_ANNOTATION);
    let current = Pair {
        cert_pem: text(&secret, "ca.crt")?,
        key_pem: text(&secret, "ca.key")?,
    };
    match step {
        Step::NewCa => {
            let serving_ca = fingerprint(&current.cert_pem)?;
            let old = text(&secret, "ca-bundle.crt")?;
            let ca = new_ca(cfg, now)?;
            let bundle = format!("{}\n{}", old.trim_end(), ca.cert_pem);
            secret
                .metadata
                .annotations
                .get_or_insert_default()
                .entry(SERVING_CA.to_string())
                .or_insert(serving_ca);
            put_ca(&mut secret, &ca, now, cfg);
            put(&mut secret, "ca-bundle.crt", &bundle);
        }
        Step::Serve { .. } => serve(&mut secret, &current, now, cfg)?,
        Step::DropOldCa => put(&mut secret, "ca-bundle.crt", &current.cert_pem),
    }
    Ok(secret)
}

/// Puts `ca` in `secret` as the CA new serving certificates are signed by.
fn put_ca(secret: &mut Secret, ca: &Pair, now: Timestamp, cfg: &Wanted) {
    let annotations = secret.metadata.annotations.get_or_insert_default();
    annotations.insert(CA_ISSUED.to_string(), now.to_string());
    let expires = now + days(cfg.ca_validity_days);
    annotations.insert(CA_EXPIRES.to_string(), expires.to_string());
    put(secret, "ca.crt", &ca.cert_pem);
    put(secret, "ca.key", &ca.key_pem);
}

/// Puts a new serving certificate signed by `ca` in `secret`.
fn serve(secret: &mut Secret, ca: &Pair, now: Timestamp, cfg: &Wanted) -> Result<(), CertsError> {
    let serving = authority::issue(ca, &cfg.dns_names, cfg.validity_days)?;
    let annotations = secret.metadata.annotations.get_or_insert_default();
    annotations.insert(NAMES.to_string(), cfg.dns_names.join(","));
    annotations.insert(ISSUED.to_string(), now.to_string());
    let expires = now + days(cfg.validity_days);
    annotations.insert(EXPIRES.to_string(), expires.to_string());
    annotations.insert(SERVING_CA.to_string(), fingerprint(&ca.cert_pem)?);
    put(secret, "tls.crt", &serving.cert_pem);
    put(secret, "tls.key", &serving.key_pem);
    Ok(())
}

fn put(secret: &mut Secret, key: &str, pem: &str) {
    secret
        .data
        .get_or_insert_with(BTreeMap::new)
        .insert(key.to_string(), ByteString(pem.as_bytes().to_vec()));
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
