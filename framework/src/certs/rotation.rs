//! The next write the shared Secret needs, decided from what it holds alone, so every replica
//! that reads the same Secret decides the same thing. A CA rotation is four steps (see
//! docs/webhooks.md): (1) a new CA, the bundle old + new; (2) once every managed configuration
//! holds that bundle, a serving certificate signed by the new CA; (3) every replica serves it and
//! says so in its Lease; (4) once every live Lease names it, the old CA leaves the bundle. Steps
//! 2 and 4 wait on a gate the caller checks ([`Step::gate`]); step 3 is the replicas' own.

use k8s_openapi::jiff::Timestamp;

/// The value of the rotate annotation that rotates the CA too; any other value renews the
/// serving certificate alone.
pub const ROTATE_CA: &str = "ca";

/// What the decision reads from the Secret.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct View {
    /// The fingerprint of `ca.crt`, the CA new serving certificates are signed by.
    pub ca: String,
    /// The fingerprints of `ca-bundle.crt`.
    pub bundle: Vec<String>,
    /// The fingerprint of the CA that signed `tls.crt`; `None` in a Secret written before it
    /// was recorded, which only ever held one CA.
    pub serving_ca: Option<String>,
    /// The rotate annotation's value.
    pub rotate: Option<String>,
    /// The names the serving certificate covers, comma-separated.
    pub names: Option<String>,
    /// When the serving certificate was issued and expires.
    pub serving_life: Option<(Timestamp, Timestamp)>,
    /// When the CA was made and expires; `None` in a Secret written before it was recorded.
    pub ca_life: Option<(Timestamp, Timestamp)>,
}

/// A write the Secret needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Step 1: a new CA; the bundle becomes old + new; the serving certificate stays.
    NewCa,
    /// Step 2 when `gated` (the serving certificate is the old CA's: wait until every managed
    /// configuration holds the bundle), else a renewal under the current CA.
    Serve {
        /// Whether the configurations must hold the bundle first.
        gated: bool,
    },
    /// Step 4: the old CA leaves the bundle, once every live replica serves `tls.crt`.
    DropOldCa,
}

/// What must be true before a step is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Gate {
    /// Every managed configuration holds the Secret's bundle.
    ConfigurationsHoldBundle,
    /// Every live replica's Lease names the Secret's serving certificate.
    ReplicasServeCertificate,
}

impl Step {
    /// What must hold before this step is written, if anything.
    pub(crate) fn gate(self) -> Option<Gate> {
        match self {
            Step::NewCa | Step::Serve { gated: false } => None,
            Step::Serve { gated: true } => Some(Gate::ConfigurationsHoldBundle),
            Step::DropOldCa => Some(Gate::ReplicasServeCertificate),
        }
    }
}

/// Whether two thirds of `life` are gone at `now`; a life not recorded is gone.
fn two_thirds_gone(life: Option<(Timestamp, Timestamp)>, now: Timestamp) -> bool {
    match life {
        Some((issued, expires)) => {
            let span = expires.as_second() - issued.as_second();
            now.as_second() >= issued.as_second() + span * 2 / 3
        }
        None => true,
    }
}

/// The next write for a Secret seen as `view`, wanting a serving certificate for `names`, at
/// `now`; `None` when it is as it should be.
pub(crate) fn next(view: &View, names: &str, now: Timestamp) -> Option<Step> {
    let rotating = view.bundle.iter().any(|ca| *ca != view.ca);
    let serving_by_current = view.serving_ca.as_ref().is_none_or(|ca| *ca == view.ca);
    let serving_due = view.rotate.as_deref().is_some_and(|v| v != ROTATE_CA)
        || view.names.as_deref() != Some(names)
        || two_thirds_gone(view.serving_life, now);
    if !rotating {
        let ca_due =
            view.rotate.as_deref() == Some(ROTATE_CA) || two_thirds_gone(view.ca_life, now);
        return if ca_due {
            Some(Step::NewCa)
        } else if serving_due || !serving_by_current {
            Some(Step::Serve { gated: false })
        } else {
            None
        };
    }
    if !serving_by_current {
        return Some(Step::Serve { gated: true });
    }
    if serving_due {
        return Some(Step::Serve { gated: false });
    }
    Some(Step::DropOldCa)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    fn settled() -> View {
        View {
            ca: "new".into(),
            bundle: vec!["new".into()],
            serving_ca: Some("new".into()),
            rotate: None,
            names: Some("localhost".into()),
            serving_life: Some((at(0), at(300))),
            ca_life: Some((at(0), at(3000))),
        }
    }

    #[test]
    fn a_settled_secret_needs_nothing_until_two_thirds_of_a_life() {
        assert_eq!(next(&settled(), "localhost", at(199)), None);
        assert_eq!(
            next(&settled(), "localhost", at(200)),
            Some(Step::Serve { gated: false })
        );
        let ca_old = View {
            serving_life: Some((at(1900), at(2200))),
            ..settled()
        };
        assert_eq!(next(&ca_old, "localhost", at(1999)), None);
        assert_eq!(next(&ca_old, "localhost", at(2000)), Some(Step::NewCa));
        assert_eq!(
            next(&settled(), "localhost,other", at(1)),
            Some(Step::Serve { gated: false }),
            "new names"
        );
    }

    #[test]
    fn the_rotate_annotation_renews_the_serving_certificate_or_the_ca() {
        let now = View {
            rotate: Some("now".into()),
            ..settled()
        };
        assert_eq!(
            next(&now, "localhost", at(1)),
            Some(Step::Serve { gated: false })
        );
        let ca = View {
            rotate: Some(ROTATE_CA.into()),
            ..settled()
        };
        assert_eq!(next(&ca, "localhost", at(1)), Some(Step::NewCa));
    }

    #[test]
    fn a_ca_rotation_goes_through_its_steps_in_order() {
        let trusting = View {
            bundle: vec!["old".into(), "new".into()],
            serving_ca: Some("old".into()),
            ..settled()
        };
        let step2 = next(&trusting, "localhost", at(1));
        assert_eq!(step2, Some(Step::Serve { gated: true }));
        assert_eq!(
            step2.and_then(Step::gate),
            Some(Gate::ConfigurationsHoldBundle)
        );
        let renamed = next(&trusting, "other", at(1));
        assert_eq!(
            renamed,
            Some(Step::Serve { gated: true }),
            "a renewal while the configurations may trust the old CA alone is step 2"
        );
        let switched = View {
            serving_ca: Some("new".into()),
            ..trusting.clone()
        };
        let step4 = next(&switched, "localhost", at(1));
        assert_eq!(step4, Some(Step::DropOldCa));
        assert_eq!(
            step4.and_then(Step::gate),
            Some(Gate::ReplicasServeCertificate)
        );
        let asked_again = View {
            rotate: Some(ROTATE_CA.into()),
            ..switched.clone()
        };
        assert_eq!(
            next(&asked_again, "localhost", at(1)),
            Some(Step::DropOldCa),
            "a CA rotation asked for during one is that one"
        );
        let renewal = View {
            rotate: Some("now".into()),
            ..switched
        };
        assert_eq!(
            next(&renewal, "localhost", at(1)),
            Some(Step::Serve { gated: false })
        );
    }

    #[test]
    fn a_secret_from_before_ca_rotation_is_rotated_once() {
        let legacy = View {
            serving_ca: None,
            ca_life: None,
            ..settled()
        };
        assert_eq!(next(&legacy, "localhost", at(1)), Some(Step::NewCa));
        let untrusted = View {
            serving_ca: Some("gone".into()),
            ..settled()
        };
        assert_eq!(
            next(&untrusted, "localhost", at(1)),
            Some(Step::Serve { gated: false }),
            "a serving certificate the bundle does not verify is replaced at once"
        );
    }
}
