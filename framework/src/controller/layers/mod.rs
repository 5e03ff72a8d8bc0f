//! Tower layers for reconcile services, one folder per middleware as tower lays them out: each
//! has its layer, its service and (where it wraps the response) its future.
//!
//! - [`TraceLayer`]: one `reconcile` span per call, carrying controller, object ref and attempt.
//! - [`MetricsLayer`]: controller-runtime's `controller_runtime_*` reconcile metrics.
//! - [`CatchPanicLayer`]: a panicking reconcile becomes a [`catch_panic::Panicked`] error.
//! - Timeouts reuse `tower::timeout::TimeoutLayer` as is: its `Elapsed` error is an ordinary
//!   `Err`, so a reconcile that overruns is dropped (cancelled at its next await) and requeued
//!   with backoff like any other failure.
//!
//! [`standard`] stacks all four in the order that makes each see what it should: the span
//! encloses everything, metrics see panics and timeouts as errors, and the panic guard also
//! covers the timeout's own future. It is the one place a layer is added for every controller:
//! the builder, the cloud controllers' `wiring::reconcile_service`, the periodic loops
//! ([`Periodic`](super::Periodic)) and hand-written controllers all stack their reconciler
//! behind it.

pub mod catch_panic;
pub mod metrics;
pub mod trace;

use std::time::Duration;

use tower::ServiceBuilder;
use tower::layer::util::{Identity, Stack};
use tower::timeout::TimeoutLayer;

pub use catch_panic::CatchPanicLayer;
pub use metrics::{ControllerMetrics, MetricsLayer};
pub use trace::TraceLayer;

/// The type of the [`standard`] stack, for callers that store it.
pub type StandardLayer =
    Stack<TimeoutLayer, Stack<CatchPanicLayer, Stack<MetricsLayer, Stack<TraceLayer, Identity>>>>;

/// The stack every controller's reconciles run behind: trace → metrics → panic guard → timeout
/// → reconciler. Apply it with `.service(reconciler)`; add more layers with `.layer(..)` before
/// that.
pub fn standard(
    controller: &str,
    metrics: &ControllerMetrics,
    timeout: Duration,
) -> ServiceBuilder<StandardLayer> {
    ServiceBuilder::new()
        .layer(TraceLayer::new())
        .layer(MetricsLayer::new(controller, metrics))
        .layer(CatchPanicLayer::new())
        .layer(TimeoutLayer::new(timeout))
}

#[cfg(test)]
mod tests;
