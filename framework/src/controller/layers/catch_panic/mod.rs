//! Turns a panicking reconcile into an error, so one bad object cannot take down a worker pool or
//! the process (unless the binary is built with `panic = "abort"`): the key is requeued with backoff like any
//! failure, and the panic is logged and counted as controller-runtime's `reconcile_panics_total`.

mod future;
mod layer;
mod service;

use std::any::Any;

pub use future::CatchPanicFuture;
pub use layer::CatchPanicLayer;
pub use service::CatchPanic;

/// The error a panicking reconcile becomes; carries the panic message for logs.
#[derive(Debug, Clone, thiserror::Error)]
#[error("reconcile panicked: {message}")]
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
