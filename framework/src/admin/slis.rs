//! `/metrics/slis`: component-base's health-check SLIs, recorded each time `/healthz`, `/readyz`
//! or `/livez` evaluates its checks — `kubernetes_healthcheck{name,type}` (1 passed, 0 failed)
//! and `kubernetes_healthchecks_total{name,status,type}` — on their own registry, reset by
//! `DELETE /metrics/slis` as upstream's `HandlerWithReset`.

use std::sync::Arc;

use parking_lot::Mutex;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::metrics::registered;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CheckLabels {
    name: String,
    r#type: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    name: String,
    status: String,
    r#type: String,
}

/// The SLI registry and its two metrics.
#[derive(Clone)]
pub(crate) struct Slis {
    registry: Arc<Mutex<Registry>>,
    healthcheck: Family<CheckLabels, Gauge>,
    healthchecks: Family<ResultLabels, Counter>,
}

impl Slis {
    pub(crate) fn new() -> Self {
        let mut registry = Registry::default();
        // prometheus-client ends the help texts with the period.
        let healthcheck: Family<CheckLabels, Gauge> = registered(
            &mut registry,
            "kubernetes_healthcheck",
            "[STABLE] This metric records the result of a single healthcheck",
            Family::default(),
        );
        let healthchecks: Family<ResultLabels, Counter> = registered(
            &mut registry,
            "kubernetes_healthchecks",
            "[STABLE] This metric records the results of all healthcheck",
            Family::default(),
        );
        Slis {
            registry: Arc::new(Mutex::new(registry)),
            healthcheck,
            healthchecks,
        }
    }

    /// Records the checks of one evaluation of `endpoint`, read from its verbose body
    /// (`[+]name ok`, `[-]name failed: …`; excluded checks are not observed, as upstream).
    pub(crate) fn observe(&self, endpoint: &str, verbose_body: &str) {
        for line in verbose_body.lines() {
            let (name, passed) = if let Some(rest) = line.strip_prefix("[+]") {
                match rest.strip_suffix(" ok") {
                    Some(name) if !name.ends_with(" excluded:") => (name, true),
                    _ => continue,
                }
            } else if let Some(rest) = line.strip_prefix("[-]") {
                match rest.split_once(" failed:") {
                    Some((name, _)) => (name, false),
                    None => continue,
                }
            } else {
                continue;
            };
            let check = CheckLabels {
                name: name.to_string(),
                r#type: endpoint.to_string(),
            };
            self.healthcheck
                .get_or_create(&check)
                .set(i64::from(passed));
            let result = ResultLabels {
                name: name.to_string(),
                status: if passed { "success" } else { "error" }.to_string(),
                r#type: endpoint.to_string(),
            };
            self.healthchecks.get_or_create(&result).inc();
        }
    }

    /// The OpenMetrics text.
    pub(crate) fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut body = String::new();
        prometheus_client::encoding::text::encode(&mut body, &self.registry.lock())?;
        Ok(body)
    }

    /// `DELETE /metrics/slis`.
    pub(crate) fn reset(&self) {
        self.healthcheck.clear();
        self.healthchecks.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_each_check_and_skips_excluded_ones() {
        let slis = Slis::new();
        slis.observe(
            "readyz",
            "[+]leaderElection ok\n[+]ping excluded: ok\n[-]cloud-node-controller failed: reason withheld\nreadyz check failed\n",
        );
        let text = slis.encode().unwrap();
        assert!(text.contains("# HELP kubernetes_healthcheck [STABLE] This metric records the result of a single healthcheck.\n"));
        assert!(text.contains("# HELP kubernetes_healthchecks [STABLE] This metric records the results of all healthcheck.\n"));
        assert!(
            text.contains("kubernetes_healthcheck{name=\"leaderElection\",type=\"readyz\"} 1"),
            "{text}"
        );
        assert!(
            text.contains(
                "kubernetes_healthcheck{name=\"cloud-node-controller\",type=\"readyz\"} 0"
            )
        );
        assert!(text.contains("kubernetes_healthchecks_total{name=\"cloud-node-controller\",status=\"error\",type=\"readyz\"} 1"));
        assert!(
            !text.contains("name=\"ping\""),
            "excluded checks are not observed"
        );
        slis.reset();
        assert!(!slis.encode().unwrap().contains("leaderElection"));
    }
}
