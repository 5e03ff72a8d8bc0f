//! Owns one informer in the factory's registry: its kind and scope, the views controllers asked
//! for, and the choice made at start of what it watches and stores.
//!
//! At start every controller has registered, so the entry knows every view of its kind:
//! - any full view (a compile-time type or a `DynamicObject`) → one full-object watch; metadata
//!   views read the full objects' metadata;
//! - metadata views only → one metadata watch (`as=PartialObjectMetadata`).
//!
//! The stored type is the first full compile-time view (the one with a transform of its own,
//! if any), else a `DynamicObject` view, else the first metadata view. A compile-time view tells
//! the resource and scope; a kind with only run-time views is resolved through discovery first,
//! and waited for while it is not served.

use std::any::TypeId;
use std::collections::BTreeSet;
use std::sync::Arc;

use kube::Client;
use kube::core::{ApiResource, GroupVersionKind};
use tokio_util::sync::CancellationToken;

use super::dispatch::Shared;
use super::open::{OpenContext, Opener, ViewOpener, WatchConfig};
use super::options::KindOptions;
use super::resolve::{Resolved, resolve_until_served};
use super::resource::{CacheResource, KindScope};
use super::scope::InformerScope;

/// One view a controller asked for.
struct ViewSpec {
    type_id: TypeId,
    metadata: bool,
    /// The resource and scope, for compile-time types.
    known: Option<Resolved>,
    opener: Arc<dyn Opener>,
}

impl ViewSpec {
    fn of<V: CacheResource>(dyntype: &V::DynamicType) -> Self {
        ViewSpec {
            type_id: TypeId::of::<V>(),
            metadata: V::metadata_api(),
            known: V::Scope::NAMESPACED.map(|namespaced| Resolved {
                resource: ApiResource::erase::<V>(dyntype),
                namespaced,
            }),
            opener: Arc::new(ViewOpener::<V>::new()),
        }
    }
}

/// One informer of the factory.
pub(crate) struct Entry {
    pub(crate) gvk: GroupVersionKind,
    pub(crate) scope: InformerScope,
    pub(crate) shared: Arc<Shared>,
    views: Vec<ViewSpec>,
    /// The namespaces the process caches the kind in (empty: all).
    namespaces: BTreeSet<String>,
    /// Whether it stores metadata only; known from start.
    metadata_only: Option<bool>,
}

impl Entry {
    /// A new, unstarted informer of `gvk` in `scope` (already restricted by `options`), first
    /// asked for as `V`.
    pub(crate) fn new<V: CacheResource>(
        gvk: GroupVersionKind,
        scope: InformerScope,
        options: Option<&KindOptions>,
        shared: Arc<Shared>,
        dyntype: &V::DynamicType,
    ) -> Self {
        for transform in options.map(KindOptions::transforms).unwrap_or_default() {
            // Unstarted: cannot fail.
            let _ = shared.add_transform(transform.clone());
        }
        let mut entry = Entry {
            gvk,
            scope,
            shared,
            views: Vec::new(),
            namespaces: options
                .map(|o| o.namespace_set().clone())
                .unwrap_or_default(),
            metadata_only: None,
        };
        entry.add_view::<V>(dyntype);
        entry
    }

    /// Whether this informer can serve view `V`: any view before start, and after start any
    /// but a full one of a metadata-only informer.
    pub(crate) fn serves<V: CacheResource>(&self) -> bool {
        V::metadata_api() || self.metadata_only != Some(true)
    }

    pub(crate) fn add_view<V: CacheResource>(&mut self, dyntype: &V::DynamicType) {
        if !self.views.iter().any(|v| v.type_id == TypeId::of::<V>()) {
            self.views.push(ViewSpec::of::<V>(dyntype));
        }
    }

    /// Whether it watches metadata only (`None` before start).
    pub(crate) fn metadata_only(&self) -> Option<bool> {
        self.metadata_only
    }

    /// Chooses what to watch and store, then opens the watches, at once for a compile-time
    /// kind, else once discovery finds the kind served (waiting meanwhile). Does nothing if
    /// already started.
    pub(crate) fn start(
        &mut self,
        client: &Client,
        config: &WatchConfig,
        shutdown: &CancellationToken,
    ) {
        if self.shared.mark_started().is_err() {
            return;
        }
        let transformed = self.shared.typed_transforms();
        let Some(stored) = self.views.iter().min_by_key(|v| {
            (
                v.metadata,
                v.known.is_none(),
                !transformed.contains(&v.type_id),
            )
        }) else {
            return;
        };
        self.metadata_only = Some(stored.metadata);
        tracing::info!(
            informer = %self.shared.describe(),
            views = self.views.len(),
            watch = if stored.metadata { "metadata only" } else { "full objects" },
            "starting informer"
        );
        let open = Open {
            shared: Arc::clone(&self.shared),
            opener: Arc::clone(&stored.opener),
            client: client.clone(),
            config: config.clone(),
            namespaces: self.namespaces.clone(),
            shutdown: shutdown.clone(),
        };
        if let Some(resolved) = self.views.iter().find_map(|v| v.known.clone()) {
            return open.open(&resolved);
        }
        if tokio::runtime::Handle::try_current().is_err() {
            return self
                .shared
                .fail("it must be started from within a Tokio runtime".to_string());
        }
        let gvk = self.gvk.clone();
        tokio::spawn(async move {
            let shared = Arc::clone(&open.shared);
            let waiting = |what| shared.set_waiting(what);
            match resolve_until_served(&open.client, &gvk, waiting, &open.shutdown).await {
                Some(Ok(resolved)) => open.open(&resolved),
                Some(Err(why)) => open.shared.fail(why),
                None => open.shared.stop(),
            }
        });
    }
}

/// Opening one informer's watches once its kind is resolved.
struct Open {
    shared: Arc<Shared>,
    opener: Arc<dyn Opener>,
    client: Client,
    config: WatchConfig,
    namespaces: BTreeSet<String>,
    shutdown: CancellationToken,
}

impl Open {
    fn open(&self, resolved: &Resolved) {
        self.shared.set_namespaced(resolved.namespaced);
        let result = parts(&self.shared, &self.namespaces, resolved.namespaced).and_then(|parts| {
            self.opener.open(
                &self.shared,
                &OpenContext {
                    client: &self.client,
                    config: &self.config,
                    resolved,
                    parts: &parts,
                    shutdown: &self.shutdown,
                },
            )
        });
        if let Err(why) = result {
            self.shared.fail(why);
        }
    }
}

/// The namespace of each watch: the scope's, or one per namespace the process caches the kind
/// in, or the whole scope; cluster-scoped kinds have one.
fn parts(
    shared: &Shared,
    namespaces: &BTreeSet<String>,
    namespaced: bool,
) -> Result<Vec<Option<String>>, String> {
    if !namespaced {
        return Ok(vec![None]);
    }
    match &shared.scope.namespace {
        Some(ns) if namespaces.is_empty() || namespaces.contains(ns) => Ok(vec![Some(ns.clone())]),
        Some(ns) => Err(format!(
            "namespace {ns} is not among the namespaces the process caches {} in ({}): add it to the kind's cache options or scope the controller to one of them",
            shared.kind,
            namespaces.iter().cloned().collect::<Vec<_>>().join(", ")
        )),
        None if namespaces.is_empty() => Ok(vec![None]),
        None => Ok(namespaces.iter().cloned().map(Some).collect()),
    }
}
