//! Helpers shared by the manager's end-to-end test targets.
#![allow(dead_code)] // each test binary uses a different subset

use std::fmt::Debug;
use std::time::Duration;

use kube_testenv::TestEnv;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Cancels `stop` and asserts that the manager task `run` then returns `Ok` within `wait`.
pub async fn shut_down<E: Debug>(
    stop: &CancellationToken,
    run: JoinHandle<Result<(), E>>,
    wait: Duration,
) {
    stop.cancel();
    let stopped = tokio::time::timeout(wait, run).await;
    stopped.unwrap().unwrap().unwrap();
}

/// How many `verb` requests on `resource` the API server has served.
pub fn count(env: &TestEnv, verb: &str, resource: &str) -> usize {
    env.requests()
        .iter()
        .filter(|r| r.verb == verb && r.resource == resource)
        .count()
}
