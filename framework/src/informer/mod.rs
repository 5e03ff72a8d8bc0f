//! The shared informer cache: one streaming list (or LIST) + WATCH and one store per (kind,
//! scope) for the whole process, with in-order event fan-out to any number of controllers.
//!
//! ```text
//! kube_runtime::watcher ─▶ driver task ─(transform)─▶ Store ──▶ readers (Store::get/list/by_index)
//!   (LIST/WATCH, 410 relist,          │ under the dispatch lock
//!    default backoff)                 └─▶ one unbounded queue + task per handler ─▶ EventHandler
//! ```
//!
//! Why not kube-runtime's shared reflector (`reflect_shared` / `subscribe`): it drops deletes
//! (kube-rs #1590), cannot subscribe after start (#1630), lets one stalled subscriber block all
//! the others, and can lose a wakeup when an object is added and deleted before a subscriber
//! reads it. We use kube-runtime's `watcher` for the wire protocol and backoff only, and own the
//! store and fan-out here, following client-go's `sharedIndexInformer`.
//!
//! Semantics (client-go's unless noted):
//! - The store is updated first, then the event is queued to every handler. Each handler has its
//!   own unbounded queue and task, so a slow handler only grows its own queue; per handler,
//!   events arrive in order.
//! - A handler registered after start gets the current contents as `Added` first, atomically
//!   with respect to later changes (no gap, no duplicate); its [`HandlerRegistration`] reports
//!   `has_synced` once that replay (or the initial list) has been processed.
//! - A relist (initial list, or after a 410 Gone or a reconnect) is applied in one step at its
//!   end and delivered as a diff: new → `Added`, existing → `Updated` (also when unchanged, as
//!   client-go's `Replace`; then old and new are the same `Arc`), vanished → `Deleted` with the
//!   last cached state.
//! - Every handler runs each event inside that event's root `watch event` span (INFO; kind,
//!   type, source, object ref, resourceVersion), one span per event shared by all handlers, so
//!   the `enqueue` span a handler opens, and through its link the reconcile, lead back to the
//!   event (see docs/tracing.md). client-go has no such span.
//! - Resync re-delivers every cached object as `Updated` with old == new, per handler period
//!   (minimum 1 s; zero disables), queued in order with real events; it never calls the API.
//! - The initial list and every relist after a 410 Gone are streaming lists by default (one
//!   watch with `sendInitialEvents=true`, KEP-3157, client-go's `WatchListClient`; the watch then
//!   carries on as the informer's watch), applied at the `k8s.io/initial-events-end` bookmark.
//!   Where the server refuses them (v1.23, or the `WatchList` gate off) or ignores them, the
//!   informer falls back to LIST + WATCH for good (see `watch_list`); client-go instead tries
//!   again at every relist. [`SharedInformerFactory::with_watch_list`] turns them off.
//! - LISTs use `resourceVersion=0` (`any_semantic`, served from the API server's watch cache, as
//!   client-go's reflector lists), unpaged because kube-client drops `resourceVersion=0` when a
//!   page size is set; see [`SharedInformerFactory::with_page_size`] (quorum reads, paged).
//!
//! Deliberate differences from client-go:
//! - A watch `DELETED` for an object the cache never held is dropped (client-go forwards it);
//!   no handler saw it appear, so there is nothing to undo.
//! - A handler panic is caught and logged and the handler keeps receiving events (client-go
//!   crashes the process by default).
//! - Each handler's resync runs on its own timer at exactly its period; client-go instead checks
//!   all handlers on one informer-wide interval and raises periods requested after start to it.
//! - Transforms and indexes must be set before start; after start they fail with
//!   [`InformerError::AlreadyStarted`] (client-go returns the same kind of error).

mod backoff;
mod compact;
mod dispatch;
mod driver;
mod entry;
mod event;
mod event_span;
mod factory;
mod key;
mod kind;
mod listener;
mod object;
mod open;
mod options;
mod reader;
mod resolve;
mod resource;
mod scope;
mod shared;
mod source;
mod store;
mod view;
mod watch_list;
mod watch_throttle;

#[cfg(test)]
mod tests;

pub(crate) use backoff::with_backoff;
pub use dispatch::drop_managed_fields;
pub use event::{Event, EventHandler, WithSource};
pub use factory::{InformerStatus, SharedInformerFactory};
pub use key::ObjectKey;
pub use kind::{KindError, dynamic_type, parse_kind};
pub use listener::{HandlerRegistration, HandlerSynced};
pub use options::{CacheOptions, KindOptions};
pub use reader::{ReadError, Reader};
pub use resource::{CacheResource, InformerResource, KindScope, KindType, ScopedApi};
pub use scope::InformerScope;
pub use shared::Informer;
pub use source::EventSource;
pub use store::{NAMESPACE_INDEX, Store};

use std::time::Duration;

/// Why configuring or starting an informer failed; each says what to change.
#[derive(Debug, thiserror::Error)]
pub enum InformerError {
    /// Transforms and indexes shape what the store holds, so they cannot change once objects
    /// are cached.
    #[error(
        "informer for {informer} has already started: set transforms and indexes before SharedInformerFactory::start"
    )]
    AlreadyStarted {
        /// Kind and scope of the informer.
        informer: String,
    },
    /// Two indexes under one name would silently shadow each other.
    #[error("informer for {informer} already has an index named {index:?}: pick another name")]
    IndexExists {
        /// Kind and scope of the informer.
        informer: String,
        /// The duplicated index name.
        index: String,
    },
    /// The informer spawns tasks, so it needs a Tokio runtime.
    #[error("informer for {informer} must be started from within a Tokio runtime")]
    NoRuntime {
        /// Kind and scope of the informer.
        informer: String,
    },
}

/// Why [`SharedInformerFactory::wait_for_sync`] gave up; names the informers still unsynced so an
/// operator can check RBAC or connectivity for exactly those kinds.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// The deadline passed first.
    #[error("caches not synced after {timeout:?}: {}; check the API server connection and list/watch RBAC for these kinds", unsynced.join(", "))]
    Timeout {
        /// The deadline that passed.
        timeout: Duration,
        /// Kind (and scope) of every informer not yet synced.
        unsynced: Vec<String>,
    },
    /// Informers that will never list: an unknown kind, one served without list and watch, a
    /// selector the API server refused, a namespace outside the kind's cache options.
    #[error("informers cannot start: {}", failed.join("; "))]
    Failed {
        /// Each informer (kind and scope) with why it cannot start.
        failed: Vec<String>,
    },
    /// Shutdown stopped the informers before they synced.
    #[error("informers stopped before their caches synced: {}", unsynced.join(", "))]
    Stopped {
        /// Kind (and scope) of every informer that never synced.
        unsynced: Vec<String>,
    },
}
