//! Glue between the framework and the framework-agnostic controller logic: the framework's
//! recorder as an event sink, and controller errors as queue outcomes (the informer store as a
//! lister is in `listers.rs`).

use std::error::Error;
use std::time::Duration;

use std::future::Future;

use controller_manager::controller::layers::{self, ControllerMetrics};
use controller_manager::controller::{Action, Request, RetryAfter};
use controller_manager::events::EventRecorder;
use controller_manager::shard::{Ring, ShardLayer};
use k8s_openapi::api::core::v1::ObjectReference;
use tower::{BoxError, Service, ServiceBuilder};

use crate::event_sink::{EventSink, EventType};

/// How long one reconcile may run before it is abandoned and retried with backoff; generous, so
/// only a hung cloud call trips it.
pub const RECONCILE_TIMEOUT: Duration = Duration::from_secs(600);

/// A cloud controller's reconcile service over string keys: `sync(key)` behind the standard
/// layers (trace span, metrics, panic guard, [`RECONCILE_TIMEOUT`]), its errors turned into queue
/// outcomes by [`queue_error`], and behind the shard gate when the controller runs sharded.
pub fn reconcile_service<F, Fut, E>(
    controller: &str,
    metrics: &ControllerMetrics,
    shard: Option<Ring>,
    sync: F,
) -> impl Service<Request<String>, Response = Action, Error = BoxError, Future: Send>
+ Clone
+ Send
+ 'static
where
    F: Fn(String) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: Error + RetryHint + Send + Sync + 'static,
{
    ServiceBuilder::new()
        .option_layer(shard.map(ShardLayer::for_string_keys))
        .service(
            layers::standard(controller, metrics, RECONCILE_TIMEOUT).service_fn(
                move |req: Request<String>| {
                    let sync = sync.clone();
                    async move {
                        sync(req.key)
                            .await
                            .map(|()| Action::Done)
                            .map_err(queue_error)
                    }
                },
            ),
        )
}

/// The framework's aggregating recorder behind the controllers' [`EventSink`].
pub struct RecorderSink(pub EventRecorder);

impl EventSink for RecorderSink {
    fn emit(&self, regarding: &ObjectReference, type_: EventType, reason: &str, message: &str) {
        self.0.event(regarding, type_, reason, message);
    }
}

/// A controller error that can carry the cloud's `Retry { after }` (upstream `api.RetryError`)
/// somewhere inside it: each error type knows where.
pub trait RetryHint {
    /// The delay the cloud asked for, if it asked.
    fn retry_after(&self) -> Option<Duration>;
}

/// Turns a controller error into what the work queue understands: a cloud `Retry { after }`
/// becomes [`RetryAfter`] (requeue after exactly that delay) wrapping the error, so its chain of
/// sources reaches the logs; anything else backs off per key.
pub fn queue_error<E>(err: E) -> Box<dyn Error + Send + Sync>
where
    E: Error + RetryHint + Send + Sync + 'static,
{
    match err.retry_after() {
        Some(after) => Box::new(RetryAfter::caused_by(after, err)),
        None => Box::new(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cloud::CloudError;

    #[derive(Debug, thiserror::Error)]
    #[error("syncing node n1")]
    struct SyncError(#[source] CloudError);

    impl RetryHint for SyncError {
        fn retry_after(&self) -> Option<Duration> {
            self.0.retry_after()
        }
    }

    /// The queue's retry keeps the error that asked for it: the delay is found in the chain, and
    /// below it the controller's error and the cloud's.
    #[test]
    fn a_retry_keeps_the_error_chain() {
        let cloud = CloudError::Retry {
            message: "throttled".into(),
            after: Duration::from_secs(7),
        };
        let err = queue_error(SyncError(cloud));
        let retry = RetryAfter::find(&*err).expect("a RetryAfter");
        assert_eq!(retry.after, Duration::from_secs(7));
        assert_eq!(err.to_string(), "syncing node n1 (retry after 7s)");
        let sync = err.source().expect("the controller's error");
        assert!(sync.downcast_ref::<SyncError>().is_some(), "{sync}");
        let cloud = sync.source().expect("the cloud's error");
        assert_eq!(
            cloud
                .downcast_ref::<CloudError>()
                .and_then(CloudError::retry_after),
            Some(Duration::from_secs(7))
        );
    }

    #[test]
    fn other_errors_back_off_unchanged() {
        let err = queue_error(SyncError(CloudError::other("boom")));
        assert!(RetryAfter::find(&*err).is_none());
        assert!(err.downcast_ref::<SyncError>().is_some());
    }
}
