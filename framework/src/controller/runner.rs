//! [`Controller`]: N workers taking keys from one lane and calling one service, and graceful
//! shutdown that stops taking work but lets in-flight reconciles finish (unless the manager
//! abandons them, see [`ControllerScope::abandoned`]).

use std::future::poll_fn;
use std::sync::Arc;

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tower::{BoxError, Service};

use super::layers::trace::followup;
use super::outcome::requeue;
use super::scope::ControllerScope;
use super::{Action, Request};
use crate::panic_guard::{Panicked, catch_future, guard};
use crate::workqueue::{QueueKey, WorkQueue};

/// A named reconcile loop: the unit the manager selects, starts and stops.
pub struct Controller<K, S> {
    name: Arc<str>,
    queue: WorkQueue<K>,
    service: S,
    workers: usize,
}

impl<K, S> std::fmt::Debug for Controller<K, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("name", &self.name)
            .field("queue", &self.queue)
            .field("workers", &self.workers)
            .finish_non_exhaustive()
    }
}

impl<K, S> Controller<K, S>
where
    K: QueueKey,
    S: Service<Request<K>, Response = Action> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send,
{
    /// A controller reconciling keys from `queue` with `service`, one worker until told otherwise.
    pub fn new(name: impl Into<Arc<str>>, queue: WorkQueue<K>, service: S) -> Self {
        Self {
            name: name.into(),
            queue,
            service,
            workers: 1,
        }
    }

    /// Sets how many keys may be reconciled concurrently (upstream's `--concurrent-*-syncs`).
    /// Zero workers leave the controller idle until shutdown, as upstream does.
    pub fn workers(mut self, n: usize) -> Self {
        self.workers = n;
        self
    }

    /// The controller's name, as used in logs, spans and metrics.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The lane this controller drains, for event handlers to add keys to.
    pub fn queue(&self) -> &WorkQueue<K> {
        &self.queue
    }

    /// Runs the workers until `shutdown` is cancelled (or the queue is shut down elsewhere), then
    /// stops taking keys, waits for in-flight reconciles to finish, and returns.
    ///
    /// The wait is unbounded, like client-go's `ShutDownWithDrain`; a caller that needs a
    /// deadline drops this future when it expires, which aborts the workers.
    pub async fn run(self, shutdown: CancellationToken) {
        tracing::info!(controller = %self.name, workers = self.workers, "starting workers");
        // Inside a manager, in-flight reconciles are dropped when it abandons work (lost
        // leadership, the drain deadline) and this run still returns only after every worker did.
        let abandon = ControllerScope::current()
            .map(|s| s.abandoned().clone())
            .unwrap_or_default();
        let mut workers = JoinSet::new();
        for _ in 0..self.workers {
            workers.spawn(work(
                Arc::clone(&self.name),
                self.queue.clone(),
                self.service.clone(),
                shutdown.clone(),
                abandon.clone(),
            ));
        }
        // With zero workers the join set is empty at once; only cancellation ends the run then.
        tokio::select! {
            () = shutdown.cancelled() => {}
            () = join_all(&mut workers, &self.name), if self.workers > 0 => {}
        }
        tracing::info!(controller = %self.name, "shutting down workers");
        self.queue.shutdown_with_drain().await;
        join_all(&mut workers, &self.name).await;
        tracing::info!(controller = %self.name, "all workers finished");
    }
}

async fn join_all(workers: &mut JoinSet<()>, controller: &str) {
    while let Some(joined) = workers.join_next().await {
        if let Err(error) = joined {
            // Reconcile panics are caught below; this is a bug in the worker itself.
            tracing::error!(controller, %error, "worker task failed");
        }
    }
}

/// One worker: get → poll_ready → call → requeue per outcome → done, until shutdown; a reconcile
/// in flight when `abandon` fires is dropped.
async fn work<K, S>(
    name: Arc<str>,
    queue: WorkQueue<K>,
    prototype: S,
    shutdown: CancellationToken,
    abandon: CancellationToken,
) where
    K: QueueKey,
    S: Service<Request<K>, Response = Action> + Clone,
    S::Error: Into<BoxError>,
{
    let mut service = prototype.clone();
    loop {
        let (key, cause) = tokio::select! {
            biased;
            () = shutdown.cancelled() => return,
            next = queue.get_with_cause() => match next {
                Some(next) => next,
                None => return,
            },
        };
        let request = Request {
            key: key.clone(),
            controller: Arc::clone(&name),
            attempt: queue.num_requeues(&key),
            cause,
        };
        let (result, reconcile_span) = tokio::select! {
            biased;
            ready = ready(&mut service) => match ready {
                Ok(()) => tokio::select! {
                    biased;
                    () = abandon.cancelled() => {
                        queue.done(&key);
                        return;
                    }
                    called = followup::scope(call(&mut service, request)) => called,
                },
                Err(error) => {
                    // tower: a service whose poll_ready failed must not be used again.
                    service = prototype.clone();
                    (Err(error), None)
                }
            },
            // Stop waiting for capacity on shutdown; the key was not started, so it is not lost
            // work in flight (the next leader's initial list re-adds it).
            () = shutdown.cancelled() => {
                queue.done(&key);
                return;
            }
        };
        if result.as_ref().is_err_and(|e| e.is::<Panicked>()) {
            // A service that panicked may be left half-updated: continue with a fresh clone.
            service = prototype.clone();
        }
        {
            // The requeue's enqueue span (and its log line) belong to the reconcile's trace.
            let _entered = reconcile_span.as_ref().map(tracing::Span::enter);
            requeue(&queue, &name, &key, result);
        }
        drop(reconcile_span);
        queue.done(&key);
    }
}

/// Waits for the service to accept a request, turning a panic into an error.
async fn ready<K, S>(service: &mut S) -> Result<(), BoxError>
where
    S: Service<Request<K>>,
    S::Error: Into<BoxError>,
{
    match guard(poll_fn(|cx| service.poll_ready(cx))).await {
        Ok(ready) => ready.map_err(Into::into),
        Err(panicked) => Err(panicked.into()),
    }
}

/// Calls the service and awaits the reconcile. Panics are caught here too, as a backstop for
/// stacks without [`CatchPanicLayer`](super::layers::CatchPanicLayer): a worker never dies and a
/// key is never left processing.
async fn call<K, S>(service: &mut S, request: Request<K>) -> Result<Action, BoxError>
where
    S: Service<Request<K>, Response = Action>,
    S::Error: Into<BoxError>,
{
    match catch_future(|| service.call(request)).await {
        Ok(result) => result.map_err(Into::into),
        Err(panicked) => Err(panicked.into()),
    }
}
