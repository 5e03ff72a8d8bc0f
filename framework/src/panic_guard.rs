//! The framework's one panic guard: runs a closure or polls a future so that a panic inside it
//! becomes a [`Panicked`] value instead of unwinding into the caller.
//!
//! Every place that must survive someone else's bug uses it: the reconcile layer
//! ([`CatchPanicLayer`](crate::controller::layers::CatchPanicLayer), which every pass of a
//! [`Periodic`](crate::controller::Periodic) loop also runs behind) and the worker's backstop
//! around `poll_ready`/`call`, the informer's event handlers, and the manager's wrapper around
//! each controller's task. The
//! guard only converts; the caller logs and counts, because only it knows what failed.
//!
//! Nothing helps a binary built with `panic = "abort"`: there, a panic ends the process, which is
//! upstream's behaviour for every panic.

use std::any::Any;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::pin;
use std::task::Poll;

/// A caught panic; carries the panic message for logs and health checks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("panicked: {message}")]
pub struct Panicked {
    /// The panic's message, or a placeholder when the payload was not a string.
    pub message: String,
}

impl Panicked {
    /// Extracts the message from a panic payload (`&str` or `String`, as `panic!` produces).
    pub fn from_payload(payload: &(dyn Any + Send)) -> Self {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "non-string panic payload".to_owned());
        Self { message }
    }
}

/// Runs `f`, turning a panic into [`Panicked`].
///
/// The closure is asserted unwind-safe: callers drop (or replace) whatever the closure touched
/// when it panicked, as the worker does with a service that panicked.
pub fn catch<T>(f: impl FnOnce() -> T) -> Result<T, Panicked> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| Panicked::from_payload(payload.as_ref()))
}

/// Builds a future with `make` and awaits it, turning a panic in either into [`Panicked`].
pub async fn catch_future<Fut: Future>(
    make: impl FnOnce() -> Fut,
) -> Result<Fut::Output, Panicked> {
    guard(catch(make)?).await
}

/// Awaits `future` in place (no allocation), turning a panic while polling it into [`Panicked`].
/// A future that panicked is never polled again.
pub async fn guard<F: Future>(future: F) -> Result<F::Output, Panicked> {
    let mut future = pin!(future);
    std::future::poll_fn(move |cx| match catch(|| future.as_mut().poll(cx)) {
        Ok(Poll::Pending) => Poll::Pending,
        Ok(Poll::Ready(output)) => Poll::Ready(Ok(output)),
        Err(panicked) => Poll::Ready(Err(panicked)),
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catch_returns_the_value_or_the_message() {
        assert_eq!(catch(|| 7), Ok(7));
        let caught = catch(|| -> u8 { panic!("boom {}", 1) }).unwrap_err();
        assert_eq!(caught.message, "boom 1");
        assert_eq!(caught.to_string(), "panicked: boom 1");
        let odd = catch(|| std::panic::panic_any(42_u32)).unwrap_err();
        assert_eq!(odd.message, "non-string panic payload");
    }

    #[tokio::test]
    async fn futures_panicking_when_built_or_polled_become_errors() {
        let built: Result<(), _> =
            catch_future(|| -> std::future::Ready<()> { panic!("while building") }).await;
        assert_eq!(built.unwrap_err().message, "while building");
        let polled = catch_future(|| async {
            tokio::task::yield_now().await;
            panic!("while polling")
        })
        .await;
        assert_eq!(polled.unwrap_err().message, "while polling");
        assert_eq!(catch_future(|| async { 3 }).await, Ok(3));
        let guarded: Result<(), _> = guard(async { panic!("guarded") }).await;
        assert_eq!(guarded.unwrap_err().message, "guarded");
    }
}
