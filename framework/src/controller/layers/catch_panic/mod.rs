//! Turns a panicking reconcile into an error, so one bad object cannot take down a worker pool or
//! the process (unless the binary is built with `panic = "abort"`): the key is requeued with backoff like any
//! failure (a periodic pass waits for the next), and the panic is logged and counted as
//! controller-runtime's `reconcile_panics_total`.

mod future;
mod layer;
mod service;

pub use crate::panic_guard::Panicked;
pub use future::CatchPanicFuture;
pub use layer::CatchPanicLayer;
pub use service::CatchPanic;

/// Logs a caught panic once, where it is caught.
pub(super) fn caught(panicked: Panicked) -> Panicked {
    tracing::error!(panic = %panicked.message, "reconcile panicked");
    panicked
}
