//! What an initializer is given: the client builder (one client per controller), the one informer
//! factory, the shutdown token, and factories for queues, recorders and metrics that all
//! controllers of the process share.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;

use parking_lot::Mutex;
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

use crate::client::{ClientBuilder, ClientError};
use crate::controller::layers::ControllerMetrics;
use crate::events::{EventCounters, EventRecorder, Unwritten};
use crate::informer::{Informer, InformerResource, InformerScope, SharedInformerFactory};
use crate::shard::Ring;
use crate::workqueue::{RateLimiter, TokenBucket, WorkQueue, WorkQueueMetrics};

/// Process-wide pieces every controller shares.
pub(crate) struct Shared {
    pub(crate) registry: Arc<Mutex<Registry>>,
    pub(crate) queue_metrics: WorkQueueMetrics,
    pub(crate) controller_metrics: ControllerMetrics,
    pub(crate) retry_bucket: TokenBucket,
    pub(crate) host: String,
    /// Event-loss counters per recorder component, registered on first use.
    pub(crate) event_counters: Mutex<HashMap<String, EventCounters>>,
    /// Every recorder handed out, flushed when the manager stops.
    pub(crate) recorders: Arc<Mutex<Vec<Unwritten>>>,
}

/// Handed to each initializer; `C` is the embedder's own context (e.g. the cloud provider and its
/// options), so the framework stays free of cloud types.
pub struct InitContext<C> {
    /// Canonical name of the controller being initialized.
    pub name: String,
    /// The manager's own client (its credentials, its limiter). A controller talks to the API
    /// server with its own client from [`Self::clients`] instead, as upstream.
    pub client: kube::Client,
    /// Builds each controller's own client by client name (upstream `ControllerClientBuilder`):
    /// own QPS/burst limiter, user agent `<binary>/<client name>`, and with
    /// `--use-service-account-credentials` the ServiceAccount `kube-system/<client name>`.
    pub clients: ClientBuilder,
    /// The process's one informer factory: ask it for informers, never build watchers yourself.
    pub factory: SharedInformerFactory,
    /// Cancelled when the manager stops or loses leadership.
    pub shutdown: CancellationToken,
    /// The embedder's context.
    pub extra: Arc<C>,
    /// The controller's shard ring when it runs sharded (`--sharded-controllers`), else `None`.
    pub(crate) shard: Option<Ring>,
    pub(crate) shared: Arc<Shared>,
}

impl<C> Clone for InitContext<C> {
    fn clone(&self) -> Self {
        InitContext {
            name: self.name.clone(),
            client: self.client.clone(),
            clients: self.clients.clone(),
            factory: self.factory.clone(),
            shutdown: self.shutdown.clone(),
            extra: self.extra.clone(),
            shard: self.shard.clone(),
            shared: self.shared.clone(),
        }
    }
}

impl<C> InitContext<C> {
    /// The informer of this controller's primary kind `K` (the kind its ring hashes): in label
    /// mode (`--shard-assignment=label`) narrowed to the objects labelled to this replica, with
    /// the label loop started beside it (see [`crate::shard::sharded_informer`]); otherwise the
    /// shared informer of every `K`. Call it once, for the primary kind only.
    pub fn sharded_informer<K: InformerResource>(&self) -> Informer<K> {
        self.sharded_informer_for(InformerScope::all())
    }

    /// [`Self::sharded_informer`] for the objects of `scope`.
    pub fn sharded_informer_for<K: InformerResource>(&self, scope: InformerScope) -> Informer<K> {
        crate::shard::sharded_informer(
            self.shard.as_ref(),
            &self.factory,
            self.client.clone(),
            scope,
            self.shutdown.clone(),
        )
    }

    /// The ring this controller runs in when it is sharded: gate its reconciles with a
    /// [`crate::shard::ShardLayer`] over it and re-enqueue gained keys with
    /// [`crate::shard::requeue_gained`]. `None` when it runs on the Lease holder only.
    pub fn shard(&self) -> Option<&Ring> {
        self.shard.as_ref()
    }

    /// A named queue lane with the process's work-queue metrics.
    pub fn queue<K>(&self, name: &str, limiter: impl RateLimiter<K>) -> WorkQueue<K>
    where
        K: Clone + Eq + Hash + Send + Sync + std::fmt::Debug + 'static,
    {
        WorkQueue::builder(name)
            .rate_limiter(limiter)
            .metrics(&self.shared.queue_metrics)
            .build()
    }

    /// client-go's default controller limiter (per-key 5 ms → 1000 s, max'ed with a token
    /// bucket), whose bucket is shared by every lane in the process so total retry pressure is capped.
    pub fn default_rate_limiter<K>(&self) -> impl RateLimiter<K>
    where
        K: Clone + Eq + Hash + Send + Sync + std::fmt::Debug + 'static,
    {
        crate::workqueue::default_controller_rate_limiter_with_bucket(
            self.shared.retry_bucket.clone(),
        )
    }

    /// Reconcile metrics shared by every controller (labelled by controller name).
    pub fn controller_metrics(&self) -> ControllerMetrics {
        self.shared.controller_metrics.clone()
    }

    /// The controller's own client for `client_name` (see [`Self::clients`]).
    pub async fn client_for(&self, client_name: &str) -> Result<kube::Client, ClientError> {
        self.clients.client(client_name).await
    }

    /// An event recorder writing with `client` (the controller's own, as upstream gives each
    /// controller its own broadcaster) whose events carry `component` as their source. What it
    /// loses is counted on `/metrics` as `events_dropped_total{component}` and
    /// `events_spam_filtered_total{component}`, one series per component however many recorders
    /// share it. Events still waiting when the manager stops are written within what is left
    /// of its graceful-shutdown deadline; the rest are counted as dropped.
    pub fn event_recorder(&self, client: &kube::Client, component: &str) -> EventRecorder {
        let counters = self
            .shared
            .event_counters
            .lock()
            .entry(component.to_string())
            .or_insert_with(|| {
                let counters = EventCounters::default();
                counters.register(component, &mut self.shared.registry.lock());
                counters
            })
            .clone();
        let recorder = EventRecorder::counted(
            client.clone(),
            component,
            Some(self.shared.host.clone()),
            counters,
        );
        self.shared.recorders.lock().push(recorder.unwritten());
        recorder
    }

    /// Registers controller-specific metrics in the process registry served on `/metrics`.
    pub fn register_metrics<T>(&self, f: impl FnOnce(&mut Registry) -> T) -> T {
        f(&mut self.shared.registry.lock())
    }
}
