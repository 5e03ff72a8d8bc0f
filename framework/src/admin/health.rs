//! Named health checks and the exact output of k8s.io/apiserver's healthz handler, so probes, scripts
//! and humans reading `kubectl get --raw /healthz?verbose` see what they know.
//!
//! Rendering (apiserver `handleRootHealth`): checks run in registration order; all pass and no
//! `verbose` ⇒ `ok`; otherwise one line per check, `[+]name ok`, `[+]name excluded: ok` or
//! `[-]name failed: reason withheld` (the reason goes to the log, not to the unauthenticated client),
//! a warning line for `exclude` names that matched nothing, then `<endpoint> check passed` (200) or
//! `<endpoint> check failed` (500). With no checks registered the default `ping` check is used.

use std::future::Future;
use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use parking_lot::RwLock;

type CheckFn = Arc<dyn Fn() -> BoxFuture<'static, Result<(), String>> + Send + Sync>;

/// A mutable, shared list of named checks; checks can be added after the server started (upstream's
/// `MutableHealthzHandler`), e.g. one per controller once it runs.
#[derive(Clone, Default)]
pub struct HealthChecks {
    checks: Arc<RwLock<Vec<(String, CheckFn)>>>,
}

impl std::fmt::Debug for HealthChecks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

/// The outcome of one endpoint evaluation: what to send and whether it is a 200.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HealthReport {
    /// Every check passed (excluded checks count as passed).
    pub healthy: bool,
    /// The response body in upstream format.
    pub body: String,
}

/// The check upstream installs when a component registers none.
const PING: &str = "ping";

impl HealthChecks {
    /// An empty list (answers with the default `ping` check).
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a synchronous check; `Err(reason)` fails it. A check with the same name is replaced.
    pub fn add_check(
        &self,
        name: impl Into<String>,
        check: impl Fn() -> Result<(), String> + Send + Sync + 'static,
    ) {
        let check = Arc::new(check);
        self.insert(
            name.into(),
            Arc::new(move || {
                let result = check();
                async move { result }.boxed()
            }),
        );
    }

    /// Adds a check that needs to await (e.g. a call to the API server).
    pub fn add_async_check<F, Fut>(&self, name: impl Into<String>, check: F)
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), String>> + Send + 'static,
    {
        self.insert(name.into(), Arc::new(move || check().boxed()));
    }

    /// Removes the check named `name`, if there is one (a state that no longer holds, such as a
    /// warm standby that now leads).
    pub fn remove_check(&self, name: &str) {
        self.checks.write().retain(|(n, _)| n != name);
    }

    /// Registered check names, in order.
    pub fn names(&self) -> Vec<String> {
        self.checks.read().iter().map(|(n, _)| n.clone()).collect()
    }

    fn insert(&self, name: String, check: CheckFn) {
        let mut checks = self.checks.write();
        match checks.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = check,
            None => checks.push((name, check)),
        }
    }

    fn snapshot(&self) -> Vec<(String, Option<CheckFn>)> {
        let checks = self.checks.read();
        if checks.is_empty() {
            return vec![(PING.to_string(), None)];
        }
        checks
            .iter()
            .map(|(n, c)| (n.clone(), Some(c.clone())))
            .collect()
    }

    /// Runs one check by name (`/healthz/<name>`); `None` if there is no such check.
    pub async fn run_one(&self, name: &str) -> Option<Result<(), String>> {
        let (_, check) = self.snapshot().into_iter().find(|(n, _)| n == name)?;
        Some(match check {
            Some(check) => check().await,
            None => Ok(()),
        })
    }

    /// Runs every check for `endpoint` (`healthz`, `readyz`, `livez`) and renders the upstream body.
    pub async fn run(&self, endpoint: &str, exclude: &[String], verbose: bool) -> HealthReport {
        let mut unmatched: Vec<&str> = exclude.iter().map(String::as_str).collect();
        let mut lines = String::new();
        let mut failed = Vec::new();
        for (name, check) in self.snapshot() {
            if unmatched.contains(&name.as_str()) {
                unmatched.retain(|e| *e != name);
                lines.push_str(&format!("[+]{name} excluded: ok\n"));
                continue;
            }
            let result = match check {
                Some(check) => check().await,
                None => Ok(()),
            };
            match result {
                Ok(()) => lines.push_str(&format!("[+]{name} ok\n")),
                Err(reason) => {
                    tracing::info!(endpoint, check = %name, %reason, "health check failed");
                    lines.push_str(&format!("[-]{name} failed: reason withheld\n"));
                    failed.push(name);
                }
            }
        }
        if !unmatched.is_empty() {
            unmatched.sort_unstable();
            unmatched.dedup();
            let quoted: Vec<String> = unmatched.iter().map(|n| format!("{n:?}")).collect();
            lines.push_str(&format!(
                "warn: some health checks cannot be excluded: no matches for {}\n",
                quoted.join(", ")
            ));
        }
        if !failed.is_empty() {
            return HealthReport {
                healthy: false,
                body: format!("{lines}{endpoint} check failed\n"),
            };
        }
        if !verbose {
            return HealthReport {
                healthy: true,
                body: "ok".to_string(),
            };
        }
        HealthReport {
            healthy: true,
            body: format!("{lines}{endpoint} check passed\n"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checks() -> HealthChecks {
        let h = HealthChecks::new();
        h.add_check("leaderElection", || Ok(()));
        h.add_check("cloud-node-controller", || Err("stuck".to_string()));
        h
    }

    #[tokio::test]
    async fn no_checks_means_ping() {
        let h = HealthChecks::new();
        let r = h.run("healthz", &[], false).await;
        assert_eq!(
            r,
            HealthReport {
                healthy: true,
                body: "ok".into()
            }
        );
        let r = h.run("healthz", &[], true).await;
        assert_eq!(r.body, "[+]ping ok\nhealthz check passed\n");
        assert_eq!(h.run_one("ping").await, Some(Ok(())));
    }

    #[tokio::test]
    async fn failure_lists_every_check_and_withholds_the_reason() {
        let r = checks().run("healthz", &[], false).await;
        assert!(!r.healthy);
        assert_eq!(
            r.body,
            "[+]leaderElection ok\n[-]cloud-node-controller failed: reason withheld\nhealthz check failed\n"
        );
    }

    #[tokio::test]
    async fn exclude_skips_a_check_and_warns_about_unknown_names() {
        let exclude = vec!["cloud-node-controller".to_string(), "nope".to_string()];
        let r = checks().run("readyz", &exclude, false).await;
        assert!(r.healthy, "{}", r.body);
        assert_eq!(r.body, "ok");
        let r = checks().run("readyz", &exclude, true).await;
        assert_eq!(
            r.body,
            "[+]leaderElection ok\n[+]cloud-node-controller excluded: ok\nwarn: some health checks cannot be excluded: no matches for \"nope\"\nreadyz check passed\n"
        );
    }

    #[tokio::test]
    async fn async_checks_and_replacement_by_name() {
        let h = checks();
        h.add_async_check("cloud-node-controller", || async { Ok(()) });
        assert_eq!(h.names(), vec!["leaderElection", "cloud-node-controller"]);
        assert!(h.run("livez", &[], false).await.healthy);
        assert_eq!(h.run_one("missing").await, None);
    }
}
