//! Retry-on-conflict with client-go's backoff shape, shared by the node, node-lifecycle and route
//! controllers so their optimistic-concurrency writes retry exactly as upstream's
//! `retry.RetryOnConflict` does.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{GetParams, Patch, PatchParams};

/// How often and how far apart a conflicting write is retried (client-go `wait.Backoff` with a
/// factor of 1: a constant base delay plus up to `jitter × base` of random extra).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Backoff {
    /// Total number of attempts, including the first.
    pub steps: u32,
    /// Base delay between attempts.
    pub duration: Duration,
    /// Random extra delay, as a fraction of `duration` (0 disables jitter).
    pub jitter: f64,
}

/// Upstream `UpdateNodeSpecBackoff`: the initialization PUT loop of the node controller.
pub const UPDATE_NODE_SPEC_BACKOFF: Backoff = Backoff {
    steps: 20,
    duration: Duration::from_millis(50),
    jitter: 1.0,
};

/// Upstream `UpdateTaintBackoff` / `UpdateLabelBackoff`: taint and label patches.
pub const UPDATE_TAINT_BACKOFF: Backoff = Backoff {
    steps: 5,
    duration: Duration::from_millis(100),
    jitter: 1.0,
};

/// Upstream `updateNetworkConditionBackoff`: the route controller's `NetworkUnavailable` patch.
pub const UPDATE_NETWORK_CONDITION_BACKOFF: Backoff = Backoff {
    steps: 5,
    duration: Duration::from_millis(100),
    jitter: 1.0,
};

impl Backoff {
    fn delay(&self) -> Duration {
        if self.jitter <= 0.0 {
            return self.duration;
        }
        let extra = rand::random::<f64>() * self.jitter;
        self.duration.mul_f64(1.0 + extra)
    }
}

/// Runs `attempt` until it succeeds, fails with an error `is_conflict` rejects, or `backoff.steps`
/// attempts are used up; then the last error is returned (as client-go returns the last conflict).
pub async fn retry_on_conflict<T, E, F, Fut>(
    backoff: Backoff,
    is_conflict: impl Fn(&E) -> bool,
    mut attempt: F,
) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let mut remaining = backoff.steps.max(1);
    loop {
        match attempt().await {
            Ok(value) => return Ok(value),
            Err(err) if remaining > 1 && is_conflict(&err) => {
                remaining -= 1;
                tracing::debug!(remaining, "write conflicted; retrying");
                tokio::time::sleep(backoff.delay()).await;
            }
            Err(err) => return Err(err),
        }
    }
}

/// Patches Node `name` as upstream's taint and label helpers do: `change` sees the Node (from the
/// API server's cache on the first try, a fresh read on retries) and returns the strategic-merge
/// patch to send, or `None` when nothing is to change; conflicts are retried with
/// [`UPDATE_TAINT_BACKOFF`].
pub async fn patch_node_on_conflict(
    api: &Api<Node>,
    name: &str,
    change: impl Fn(&Node) -> Option<serde_json::Value>,
) -> Result<(), kube::Error> {
    let mut first_try = true;
    retry_on_conflict(UPDATE_TAINT_BACKOFF, is_conflict, || {
        let params = if std::mem::take(&mut first_try) {
            GetParams::any()
        } else {
            GetParams::default()
        };
        let change = &change;
        async move {
            let node = api.get_with(name, &params).await?;
            let Some(patch) = change(&node) else {
                return Ok(());
            };
            api.patch(name, &PatchParams::default(), &Patch::Strategic(patch))
                .await
                .map(drop)
        }
    })
    .await
}

/// Whether a kube error is an HTTP 409 Conflict, the only error `retry_on_conflict` retries.
pub fn is_conflict(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if status.is_conflict())
}

/// Whether a write lost a race: a 409 Conflict, or a JSON patch whose `test` op failed (422,
/// "testing value … failed"), which is how a resourceVersion-free guarded patch conflicts.
pub fn is_conflict_or_test_failed(err: &kube::Error) -> bool {
    is_conflict(err)
        || matches!(err, kube::Error::Api(status)
            if status.code == 422 && status.message.contains("test failed"))
}

/// Whether a kube error is an HTTP 404, i.e. the object is gone.
pub fn is_not_found(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if status.is_not_found())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[derive(Debug, PartialEq)]
    enum E {
        Conflict,
        Fatal,
    }

    const FAST: Backoff = Backoff {
        steps: 5,
        duration: Duration::from_millis(100),
        jitter: 1.0,
    };

    #[tokio::test(start_paused = true)]
    async fn retries_conflicts_up_to_steps_then_returns_last_error() {
        let calls = Cell::new(0);
        let start = tokio::time::Instant::now();
        let res: Result<(), E> = retry_on_conflict(
            FAST,
            |e| *e == E::Conflict,
            || {
                calls.set(calls.get() + 1);
                async { Err(E::Conflict) }
            },
        )
        .await;
        assert_eq!(res, Err(E::Conflict));
        assert_eq!(calls.get(), 5);
        let waited = start.elapsed();
        // 4 sleeps of 100..200 ms each.
        assert!(waited >= Duration::from_millis(400), "{waited:?}");
        assert!(waited <= Duration::from_millis(800), "{waited:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn stops_on_success_and_on_non_conflict_errors() {
        let calls = Cell::new(0);
        let res: Result<u32, E> = retry_on_conflict(
            FAST,
            |e| *e == E::Conflict,
            || {
                calls.set(calls.get() + 1);
                let n = calls.get();
                async move { if n < 3 { Err(E::Conflict) } else { Ok(n) } }
            },
        )
        .await;
        assert_eq!(res, Ok(3));

        calls.set(0);
        let res: Result<(), E> = retry_on_conflict(
            FAST,
            |e| *e == E::Conflict,
            || {
                calls.set(calls.get() + 1);
                async { Err(E::Fatal) }
            },
        )
        .await;
        assert_eq!(res, Err(E::Fatal));
        assert_eq!(calls.get(), 1);
    }
}
