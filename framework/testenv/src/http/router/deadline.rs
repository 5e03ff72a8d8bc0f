//! A request's work on a thread of its own, under the request deadline: the async workers stay
//! free to serve every other request while one is busy (a large strategic merge, a deep body),
//! the stack holds the 10,000 levels of JSON nesting upstream accepts, and a request past its
//! deadline is answered as kube-apiserver answers it (504 Timeout), its work running on to the
//! end as upstream's handler goroutine does.

use std::time::Duration;

use serde_json::json;
use tokio::sync::oneshot;

use crate::api::status::ApiError;

/// kube-apiserver's default `--request-timeout`.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Stack of a request's thread: JSON nested 10,000 deep passes through recursive decoding,
/// admission, field tracking and encoding (debug builds' frames included). It is reserved, not
/// committed: a request uses what its depth needs.
const STACK_BYTES: usize = 512 << 20;

/// Runs `work` on its own thread; its answer, or the 504 once `deadline` has passed.
pub async fn run<T: Send + 'static>(
    deadline: Duration,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    let (tx, rx) = oneshot::channel();
    let runtime = tokio::runtime::Handle::current();
    std::thread::Builder::new()
        .name("kube-testenv-request".into())
        .stack_size(STACK_BYTES)
        .spawn(move || {
            let _guard = runtime.enter();
            let _ = tx.send(work());
        })
        .map_err(|e| ApiError::internal(&format!("no thread for the request: {e}")))?;
    match tokio::time::timeout(deadline, rx).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(_)) => Err(ApiError::internal("the request's handler panicked")),
        Err(_) => Err(timeout()),
    }
}

/// Upstream's answer for a request past its deadline (the REST handlers' `finishRequest`).
fn timeout() -> ApiError {
    ApiError {
        code: 504,
        reason: "Timeout",
        message:
            "Timeout: request did not complete within requested timeout - context deadline exceeded"
                .into(),
        details: Some(json!({})),
        retry_after: None,
    }
}
