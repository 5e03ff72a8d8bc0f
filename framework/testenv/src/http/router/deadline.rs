//! A request's work on a thread of its own, under the request deadline: the async workers stay
//! free to serve every other request while one is busy (a large strategic merge, a deep body),
//! the stack holds the 10,000 levels of JSON nesting upstream accepts, and a request past its
//! deadline is answered as kube-apiserver answers it (504 Timeout), its work running on to the
//! end as upstream's handler goroutine does.

use std::time::Duration;

use serde_json::json;

use crate::api::json_depth::STACK_BYTES;
use crate::api::status::ApiError;

/// kube-apiserver's default `--request-timeout`.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs `work` on its own thread; its answer, or the 504 once `deadline` has passed. The thread
/// is waited for from tokio's blocking pool, so a paused test clock does not jump to the
/// deadline while the work runs.
pub async fn run<T: Send + 'static>(
    deadline: Duration,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    let runtime = tokio::runtime::Handle::current();
    let waiter = tokio::task::spawn_blocking(move || {
        std::thread::Builder::new()
            .name("kube-testenv-request".into())
            .stack_size(STACK_BYTES)
            .spawn(move || {
                let _guard = runtime.enter();
                work()
            })
            .map(|t| t.join())
    });
    match tokio::time::timeout(deadline, waiter).await {
        Ok(Ok(Ok(Ok(answer)))) => Ok(answer),
        Ok(Ok(Err(e))) => Err(ApiError::internal(&format!(
            "no thread for the request: {e}"
        ))),
        Ok(Ok(Ok(Err(_))) | Err(_)) => Err(ApiError::internal("the request's handler panicked")),
        Err(_) => Err(timeout()),
    }
}

/// Upstream's answer for a request past its deadline (the REST handlers' `finishRequest`).
fn timeout() -> ApiError {
    ApiError {
        code: 504,
        reason: "Timeout".into(),
        message:
            "Timeout: request did not complete within requested timeout - context deadline exceeded"
                .into(),
        details: Some(json!({})),
        retry_after: None,
    }
}
