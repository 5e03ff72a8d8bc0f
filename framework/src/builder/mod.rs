//! [`ControllerBuilder`]: a controller in one expression — the primary kind, the kinds it owns,
//! the kinds it watches through a key mapper, event filters, workers and the rate limiter —
//! over the same pieces a hand-wired controller uses (the shared informers, a work-queue lane,
//! the standard layers and [`Controller`]).
//!
//! ```text
//! ControllerBuilder::<Pool>::new(&ctx)      // For(&Pool{})       Controller::new(pools, ..)
//!     .owns::<ConfigMap>()                  // Owns(&ConfigMap{}) .owns(configmaps, ..)
//!     .watches::<Service, _>(mapper)        // Watches(.., MapFunc) .watches(services, .., mapper)
//!     .index("by-node", by_node)?           // IndexField           (a store indexer)
//!     .with_predicate(generation_changed)   // WithEventFilter     predicate_filter
//!     .workers(2)                           // MaxConcurrentReconciles
//!     .start(reconciler)                    // Complete(r)         .run(reconcile, ..)
//! ```
//!
//! Keys of live watch changes are queued normally, keys of re-delivered objects (initial list,
//! relist, resync) at low priority ([`WorkQueue::add_from`]), so after a (re)start fresh changes
//! are reconciled before the re-verification of everything listed.
//!
//! Every kind comes from the process's [`SharedInformerFactory`],
//! so a builder-made controller adds no LIST or WATCH for a kind another controller already
//! watches in the same scope, whichever view it asks for: the primary, owned and watched kinds
//! can be compile-time types, their metadata only (`ControllerBuilder::<PartialObjectMeta<Secret>>`,
//! `owns::<PartialObjectMeta<ConfigMap>>()`), or kinds given at run time
//! ([`ControllerBuilder::dynamic`], [`owns_kind`](ControllerBuilder::owns_kind),
//! [`watches_kind`](ControllerBuilder::watches_kind) with `DynamicObject` or
//! `PartialObjectMeta<DynamicObject>`). Which informer each call uses:
//!
//! | call | informer (kind, scope) |
//! |---|---|
//! | `new`, `dynamic(..)`, `scoped(s)`, `store()`, `index(..)` | the primary `K` in the builder's scope (default: all) |
//! | `owns::<O>()`, `watches::<W, _>(..)`, `watches_with_predicate(..)` | every `O`/`W` in the cluster |
//! | `owns_scoped::<O>(s)`, `owns_kind::<O>(k, s)`, `watches_scoped(s, ..)`, `watches_scoped_with_predicate(s, ..)`, `watches_kind::<W, _>(k, s, ..)`, `watches_annotated::<W>(s, ..)` | the `O`s/`W`s in `s` only |
//! | `index_watched::<W>(s, ..)`, `watched_store::<W>(s)` | the `W`s in `s` (the same scope as the `watches*` call) |
//!
//! Indexes ([`index`](ControllerBuilder::index), [`index_watched`](ControllerBuilder::index_watched))
//! file each object under the values a function returns, as controller-runtime's `IndexField`;
//! mappers and reconcilers look them up with [`Store::by_index`]. Owner references cannot cross
//! namespaces: [`watches_annotated`](ControllerBuilder::watches_annotated) maps copies that name
//! their primary in an annotation back to it. Keys are [`ObjectKey`]s of the primary kind; the reconciler is any
//! `tower::Service<Request<ObjectKey>, Response = Action>` and runs behind
//! [`layers::standard`]. Everything the builder does can still be written by hand (see
//! `docs/embedding.md`); the builder only removes the repetition.
//!
//! A builder-made controller whose initializer is [`shardable`](crate::manager::Initializer::shardable)
//! and named in `--sharded-controllers` is sharded with no further call: the builder puts a
//! [`ShardLayer`] over the ring of [`InitContext::shard`] in front of the standard layers and
//! re-enqueues the keys the replica gains ([`crate::shard::requeue_gained`]). With
//! `--shard-assignment=label` its primary informer also caches only the objects labelled to this
//! replica ([`sharded_informer`]). A primary kind given at run time cannot be sharded (the ring
//! re-enqueues gained keys from a compile-time kind's store).

mod cross_namespace;
mod index;
pub mod predicates;
mod sources;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tower::layer::Layer;
use tower::util::Either;
use tower::{BoxError, Service, ServiceBuilder};

pub use crate::object::controller_owner;
pub use cross_namespace::annotated_owner;

use crate::controller::layers::{self, ControllerMetrics, StandardLayer};
use crate::controller::{Action, Controller, Request};
use crate::informer::{
    CacheResource, Event, Informer, InformerResource, InformerScope, KindError, ObjectKey,
    SharedInformerFactory, Store, WithSource, dynamic_type,
};
use crate::manager::{InitContext, InitOutcome};
use crate::shard::{Ring, ShardLayer, ShardService, requeue_gained, sharded_informer};
use crate::workqueue::{RateLimiter, WorkQueue};
use kube::core::ApiResource;

/// How long one reconcile may run before it is cancelled and retried with backoff, unless
/// [`ControllerBuilder::reconcile_timeout`] says otherwise.
pub const DEFAULT_RECONCILE_TIMEOUT: Duration = Duration::from_secs(60);

type Predicate<K> = Box<dyn Fn(&Event<K>) -> bool + Send + Sync>;
type Limiter = Box<dyn RateLimiter<ObjectKey>>;
/// Makes the controller's lane (with the process's queue metrics) once its limiter is known.
type MakeQueue = Box<dyn FnOnce(&str, Option<Limiter>) -> WorkQueue<ObjectKey> + Send>;
/// Registers one event source (an owned or watched kind) once the lane and the primary
/// informer exist.
type Source<K> =
    Box<dyn FnOnce(&SharedInformerFactory, &WorkQueue<ObjectKey>, &Informer<K>) + Send>;
/// The primary kind's informer of a scope.
type Primary<K> = Arc<dyn Fn(InformerScope) -> Informer<K> + Send + Sync>;
/// Re-enqueues the keys a sharded replica gains (compile-time primary kinds only).
type Requeue<K> = Box<dyn FnOnce(Ring, Store<K>, WorkQueue<ObjectKey>, CancellationToken) + Send>;

/// Why a controller over a kind given at run time cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum BuilderError {
    /// The kind is not written as `apiVersion/Kind`.
    #[error(transparent)]
    Kind(#[from] KindError),
    /// A sharded controller's ring re-enqueues keys from a compile-time kind's store.
    #[error(
        "controller {controller} runs sharded, which needs a compile-time primary kind: take it out of --sharded-controllers"
    )]
    Sharded {
        /// The controller's name.
        controller: String,
    },
}

/// Builds a controller reconciling objects of kind `K`; see the [module docs](self).
pub struct ControllerBuilder<K: CacheResource> {
    name: String,
    /// The primary kind's dynamic type: `()`, or the `ApiResource` of a kind given at run time.
    kind: K::DynamicType,
    primary: Primary<K>,
    requeue: Option<Requeue<K>>,
    factory: SharedInformerFactory,
    shutdown: CancellationToken,
    metrics: ControllerMetrics,
    queue: MakeQueue,
    scope: InformerScope,
    predicates: Vec<Predicate<K>>,
    sources: Vec<Source<K>>,
    workers: usize,
    limiter: Option<Limiter>,
    timeout: Duration,
    shard: Option<Ring>,
}

/// The service a built controller runs: the standard layers over the reconciler, behind the
/// shard gate when the controller is sharded.
pub type BuiltService<S> = Either<
    ShardService<<StandardLayer as Layer<S>>::Service, ObjectKey>,
    <StandardLayer as Layer<S>>::Service,
>;

impl<K: CacheResource> std::fmt::Debug for ControllerBuilder<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerBuilder")
            .field("name", &self.name)
            .field("scope", &self.scope)
            .field("predicates", &self.predicates.len())
            .field("sources", &self.sources.len())
            .field("workers", &self.workers)
            .finish_non_exhaustive()
    }
}

impl<K: InformerResource> ControllerBuilder<K> {
    /// A controller for `K` named after the initializer (`ctx.name`: logs, spans, the
    /// `workqueue_*` and `controller_runtime_*` metrics), with one worker, the process's default
    /// rate limiter (client-go's, sharing the retry bucket) and a 60 s reconcile timeout.
    /// `K` may be `PartialObjectMeta<T>`: the controller then caches and reads only metadata.
    pub fn new<C: Send + Sync + 'static>(ctx: &InitContext<C>) -> Self {
        let (shard, factory) = (ctx.shard().cloned(), ctx.factory.clone());
        // Label mode's assignment labels are written with the manager's client.
        let (client, stop) = (ctx.client.clone(), ctx.shutdown.clone());
        let primary: Primary<K> = Arc::new(move |scope| {
            sharded_informer(
                shard.as_ref(),
                &factory,
                client.clone(),
                scope,
                stop.clone(),
            )
        });
        let requeue: Requeue<K> = Box::new(|ring, store, queue, stop| {
            // Ends with the controller's shutdown; it waits for the ring's first settle, which
            // comes only once the workers run.
            tokio::spawn(requeue_gained(
                ring,
                store,
                queue,
                |obj: &K| Some(ObjectKey::from_object(obj)),
                stop,
            ));
        });
        Self::with_primary(ctx, (), primary, Some(requeue))
    }
}

impl<K: CacheResource<DynamicType = ApiResource>> ControllerBuilder<K> {
    /// A controller for the kind named `apiVersion/Kind` (e.g. from a flag), as
    /// `DynamicObject`, or as `PartialObjectMeta<DynamicObject>` for its metadata only. The
    /// kind is resolved through discovery when the informers start: while it is not served
    /// (its CRD not yet Established) the controller waits for it and /readyz says so; an
    /// unknown kind fails the manager's cache sync with the reason.
    pub fn dynamic<C: Send + Sync + 'static>(
        ctx: &InitContext<C>,
        kind: &str,
    ) -> Result<Self, BuilderError> {
        let dyntype = dynamic_type(kind)?;
        if ctx.shard().is_some() {
            return Err(BuilderError::Sharded {
                controller: ctx.name.clone(),
            });
        }
        let (factory, primary_type) = (ctx.factory.clone(), dyntype.clone());
        let primary: Primary<K> =
            Arc::new(move |scope| factory.informer_with::<K>(&primary_type, scope));
        Ok(Self::with_primary(ctx, dyntype, primary, None))
    }
}

impl<K: CacheResource> ControllerBuilder<K> {
    fn with_primary<C: Send + Sync + 'static>(
        ctx: &InitContext<C>,
        kind: K::DynamicType,
        primary: Primary<K>,
        requeue: Option<Requeue<K>>,
    ) -> Self {
        let queue_ctx = ctx.clone();
        Self {
            name: ctx.name.clone(),
            kind,
            primary,
            requeue,
            factory: ctx.factory.clone(),
            shutdown: ctx.shutdown.clone(),
            metrics: ctx.controller_metrics(),
            queue: Box::new(move |name, limiter| match limiter {
                Some(limiter) => queue_ctx.queue(name, limiter),
                None => queue_ctx.queue(name, queue_ctx.default_rate_limiter()),
            }),
            scope: InformerScope::all(),
            predicates: Vec::new(),
            sources: Vec::new(),
            workers: 1,
            limiter: None,
            timeout: DEFAULT_RECONCILE_TIMEOUT,
            shard: ctx.shard().cloned(),
        }
    }

    /// Renames the controller (default: the initializer's name).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Reconciles only the primary objects in `scope` (a namespace, selectors); the informer is
    /// shared with every other user of the same kind and scope. Call it before
    /// [`store`](Self::store) and [`index`](Self::index), which use the primary's informer.
    pub fn scoped(mut self, scope: InformerScope) -> Self {
        self.scope = scope;
        self
    }

    /// Drops events of the primary kind that `predicate` rejects, e.g.
    /// [`predicates::generation_changed`]; with several, an event must pass all of them. Owned
    /// and watched kinds are not filtered.
    pub fn with_predicate(
        mut self,
        predicate: impl Fn(&Event<K>) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.predicates.push(Box::new(predicate));
        self
    }

    /// How many keys are reconciled at once (controller-runtime's `MaxConcurrentReconciles`);
    /// a key is never reconciled by two workers at the same time.
    pub fn workers(mut self, n: usize) -> Self {
        self.workers = n;
        self
    }

    /// Replaces the default rate limiter of the controller's lane.
    pub fn rate_limiter(mut self, limiter: impl RateLimiter<ObjectKey>) -> Self {
        self.limiter = Some(Box::new(limiter));
        self
    }

    /// How long one reconcile may run before it is cancelled and retried with backoff.
    pub fn reconcile_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The shared store of the primary kind, for the reconciler to read the object behind a key
    /// (of the scope set so far: call [`scoped`](Self::scoped) first).
    pub fn store(&self) -> Store<K> {
        self.primary(self.scope.clone()).store()
    }

    /// The primary kind's informer of `scope`: in label mode only the objects labelled to this
    /// replica ([`sharded_informer`]).
    fn primary(&self, scope: InformerScope) -> Informer<K> {
        (self.primary)(scope)
    }

    /// Registers every event source on the shared informers and returns the controller with the
    /// reconciler behind the standard layers (trace span, metrics, panic guard, timeout), ready
    /// to [`run`](Controller::run). Call it from the initializer, before the factory starts.
    pub fn build<S>(self, reconciler: S) -> Controller<ObjectKey, BuiltService<S>>
    where
        S: Service<Request<ObjectKey>, Response = Action> + Clone + Send + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send + 'static,
    {
        let informer = self.primary(self.scope.clone());
        let queue = (self.queue)(&self.name, self.limiter);
        let primary = queue.clone();
        let predicates = self.predicates;
        if let (Some(ring), Some(requeue)) = (&self.shard, self.requeue) {
            requeue(
                ring.clone(),
                informer.store(),
                queue.clone(),
                self.shutdown.clone(),
            );
        }
        informer
            .add_handler(WithSource(move |event: &Event<K>, source| {
                if predicates.iter().all(|p| p(event)) {
                    primary.add_from(ObjectKey::from_object(event.object().as_ref()), source);
                }
            }))
            .detach();
        for source in self.sources {
            source(&self.factory, &queue, &informer);
        }
        let gate = self
            .shard
            .map(|ring| ShardLayer::new(ring, ObjectKey::clone));
        let service = ServiceBuilder::new()
            .option_layer(gate)
            .service(layers::standard(&self.name, &self.metrics, self.timeout).service(reconciler));
        Controller::new(self.name, queue, service).workers(self.workers)
    }

    /// [`build`](Self::build)s the controller and hands it to the manager, which runs it once
    /// every cache has synced and drains it on shutdown (controller-runtime's `Complete`).
    pub fn start<S>(self, reconciler: S) -> InitOutcome
    where
        S: Service<Request<ObjectKey>, Response = Action> + Clone + Send + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send + 'static,
    {
        let shutdown = self.shutdown.clone();
        let controller = self.build(reconciler);
        InitOutcome::Started(Box::pin(controller.run(shutdown)))
    }

    /// [`start`](Self::start)s a reconciler of the cached object behind each key, as
    /// kube-runtime's reconcilers are written: `reconcile(Arc<K>)`. A key whose object is no
    /// longer cached (deleted) is done without a call; to act on deletion, hold a
    /// [`finalizer`](crate::object::finalizer).
    pub fn start_fn<F, Fut, E>(self, reconcile: F) -> InitOutcome
    where
        F: Fn(Arc<K>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: Into<BoxError> + 'static,
    {
        let (store, reconcile) = (self.store(), Arc::new(reconcile));
        self.start(tower::service_fn(move |req: Request<ObjectKey>| {
            let (object, reconcile) = (store.get(&req.key), Arc::clone(&reconcile));
            async move {
                match object {
                    Some(object) => reconcile(object).await.map_err(Into::into),
                    None => Ok::<_, BoxError>(Action::Done),
                }
            }
        }))
    }
}
