//! Owns the builder's indexes (controller-runtime's `IndexField`): a named index on the primary
//! kind's or a watched kind's shared informer, and the stores mappers and reconcilers query
//! with [`Store::by_index`].

use crate::informer::{CacheResource, InformerError, InformerResource, InformerScope, Store};

use super::ControllerBuilder;

impl<K: CacheResource> ControllerBuilder<K> {
    /// Files every primary object (of the scope set so far: call [`scoped`](Self::scoped)
    /// first) under the values `f` returns, in the index `name` of its shared informer; query it
    /// with `builder.store().by_index(name, value)`, e.g. from a watched kind's mapper: "which
    /// mirrors copy this Secret?"
    ///
    /// ```text
    /// let builder = ControllerBuilder::<Mirror>::new(&ctx).index("source", |m: &Mirror| vec![m.spec.source.clone()])?;
    /// let mirrors = builder.store();
    /// builder.watches_scoped(sources, move |s: &Secret| {
    ///     let key = ObjectKey::from_object(s).to_string();
    ///     mirrors.by_index("source", &key).iter().map(|m| ObjectKey::from_object(m.as_ref())).collect::<Vec<_>>()
    /// })
    /// ```
    ///
    /// Fails (an `InitError` through `?`) when the informer already has an index of that name,
    /// e.g. one another controller registered on the same shared informer, or has started.
    pub fn index(
        self,
        name: &str,
        f: impl Fn(&K) -> Vec<String> + Send + Sync + 'static,
    ) -> Result<Self, InformerError> {
        self.factory
            .informer_with::<K>(&self.kind, self.scope.clone())
            .add_index(name, f)?;
        Ok(self)
    }

    /// [`index`](Self::index) on the informer of the `W`s in `scope`, the one
    /// `watches_scoped(scope, ..)` (or `watches(..)` with [`InformerScope::all`]) uses; query
    /// it with [`watched_store`](Self::watched_store)`::<W>(scope).by_index(name, value)`.
    pub fn index_watched<W: InformerResource>(
        self,
        scope: InformerScope,
        name: &str,
        f: impl Fn(&W) -> Vec<String> + Send + Sync + 'static,
    ) -> Result<Self, InformerError> {
        self.factory.informer_for::<W>(scope).add_index(name, f)?;
        Ok(self)
    }

    /// The shared store of the `W`s in `scope`: the cache a `watches_scoped(scope, ..)` call
    /// fills, for a reconciler to read the watched objects (and their indexes) without a request.
    pub fn watched_store<W: InformerResource>(&self, scope: InformerScope) -> Store<W> {
        self.factory.informer_for::<W>(scope).store()
    }
}
