//! The layer that wraps a service in [`CatchPanic`].

use tower::Layer;

use super::CatchPanic;

/// Adds a panic guard to a reconcile service.
#[derive(Clone, Copy, Debug, Default)]
pub struct CatchPanicLayer {
    _private: (),
}

impl CatchPanicLayer {
    /// A panic guard layer.
    pub fn new() -> Self {
        Self::default()
    }
}

impl<S> Layer<S> for CatchPanicLayer {
    type Service = CatchPanic<S>;

    fn layer(&self, inner: S) -> Self::Service {
        CatchPanic::new(inner)
    }
}
