//! Owns [`CacheOptions`]: what the process caches of each kind, for every informer of that kind
//! (controller-runtime's `cache.Options.ByObject` and `client.CacheOptions.DisableFor`): a label
//! and a field selector, a set of namespaces, uncached reads, and transforms that strip fields
//! before storing.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::dispatch::ViewTransform;
use super::kind::{KindError, parse_kind};
use super::resource::{CacheResource, InformerResource};
use super::scope::InformerScope;

/// Per-kind cache options for the whole process; see [`KindOptions`]. Kinds are named by group
/// and kind, so the options hold for every version of a kind.
#[derive(Clone, Debug, Default)]
pub struct CacheOptions {
    kinds: BTreeMap<(String, String), KindOptions>,
}

impl CacheOptions {
    /// No options: every informer caches what its scope says, without managedFields.
    pub fn new() -> Self {
        Self::default()
    }

    /// The options of kind `K` (and of its metadata, `PartialObjectMeta<K>`).
    pub fn kind<K: InformerResource>(mut self, options: KindOptions) -> Self {
        self.kinds.insert(
            (K::group(&()).into_owned(), K::kind(&()).into_owned()),
            options,
        );
        self
    }

    /// The options of a kind named `apiVersion/Kind`, e.g. one given at run time.
    pub fn kind_named(mut self, kind: &str, options: KindOptions) -> Result<Self, KindError> {
        let gvk = parse_kind(kind)?;
        self.kinds.insert((gvk.group, gvk.kind), options);
        Ok(self)
    }

    /// The options of `kind` in `group`, if any were given.
    pub(crate) fn get(&self, group: &str, kind: &str) -> Option<&KindOptions> {
        self.kinds.get(&(group.to_string(), kind.to_string()))
    }
}

/// What the process caches of one kind, for every informer of it.
#[derive(Clone, Default)]
pub struct KindOptions {
    label_selector: Option<String>,
    field_selector: Option<String>,
    namespaces: BTreeSet<String>,
    uncached: bool,
    transforms: Vec<ViewTransform>,
}

impl std::fmt::Debug for KindOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KindOptions")
            .field("label_selector", &self.label_selector)
            .field("field_selector", &self.field_selector)
            .field("namespaces", &self.namespaces)
            .field("uncached", &self.uncached)
            .field("transforms", &self.transforms.len())
            .finish()
    }
}

impl KindOptions {
    /// No restriction: every object of the kind, without managedFields.
    pub fn new() -> Self {
        Self::default()
    }

    /// Caches only the objects matching this label selector, whatever scope a controller asks
    /// for (its own selector is added to it). A selector the API server cannot parse fails the
    /// informer at start with the server's message.
    pub fn labels(mut self, selector: impl Into<String>) -> Self {
        self.label_selector = Some(selector.into()).filter(|s| !s.is_empty());
        self
    }

    /// Caches only the objects matching this field selector (which fields the API server
    /// selects on depends on the kind; it refuses others at start).
    pub fn fields(mut self, selector: impl Into<String>) -> Self {
        self.field_selector = Some(selector.into()).filter(|s| !s.is_empty());
        self
    }

    /// Caches only these namespaces: one watch per namespace, one store for all of them. A
    /// controller scoped to another namespace of the kind fails to start. Ignored for
    /// cluster-scoped kinds.
    pub fn namespaces<I, S>(mut self, namespaces: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.namespaces = namespaces
            .into_iter()
            .map(Into::into)
            .filter(|ns: &String| !ns.is_empty())
            .collect();
        self
    }

    /// Reads of the kind through [`SharedInformerFactory::reader`](super::SharedInformerFactory::reader)
    /// go to the API server, and opening no informer for them (controller-runtime's
    /// `DisableFor`); handlers still need an informer, and get one.
    pub fn uncached(mut self) -> Self {
        self.uncached = true;
        self
    }

    /// Applies `f` to every object before it is cached, replacing the default (which drops
    /// managedFields: call [`drop_managed_fields`](super::drop_managed_fields) in `f` to keep
    /// that). `K` is the kind's type, or its metadata (`PartialObjectMeta<K>`), whose transform
    /// applies to the metadata of whatever the informer stores. A full-object transform is
    /// skipped when every user of the kind wants metadata only.
    pub fn transform<K: CacheResource>(
        mut self,
        f: impl Fn(&mut K) + Send + Sync + 'static,
    ) -> Self {
        self.transforms.push(ViewTransform::of::<K>(f));
        self
    }

    /// Applies `f` to the metadata of every object before it is cached, whether the informer
    /// stores full objects or metadata only; like [`Self::transform`], it replaces the default.
    pub fn metadata_transform(
        mut self,
        f: impl Fn(&mut ObjectMeta) + Send + Sync + 'static,
    ) -> Self {
        self.transforms.push(ViewTransform::Meta(Arc::new(f)));
        self
    }

    /// Whether reads of the kind go to the API server.
    pub fn is_uncached(&self) -> bool {
        self.uncached
    }

    /// The namespaces the kind is cached in; empty: all.
    pub(crate) fn namespace_set(&self) -> &BTreeSet<String> {
        &self.namespaces
    }

    pub(crate) fn transforms(&self) -> &[ViewTransform] {
        &self.transforms
    }

    /// `scope` restricted by these options' selectors (both must match).
    pub(crate) fn restrict(&self, scope: InformerScope) -> InformerScope {
        let both = |a: &Option<String>, b: Option<String>| match (a, b) {
            (Some(a), Some(b)) => Some(format!("{a},{b}")),
            (Some(a), None) => Some(a.clone()),
            (None, b) => b,
        };
        InformerScope {
            label_selector: both(&self.label_selector, scope.label_selector),
            field_selector: both(&self.field_selector, scope.field_selector),
            namespace: scope.namespace,
        }
    }
}
