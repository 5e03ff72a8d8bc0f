//! Owns the bounds a type needs to be cached by the shared informer factory:
//! [`CacheResource`] (any view of a kind: a compile-time type, its metadata as
//! `PartialObjectMeta<K>`, or a kind known at run time as `DynamicObject`) and
//! [`InformerResource`] (the compile-time ones), with the traits that turn a kind's dynamic type
//! and scope into the API to list and watch ([`KindType`], [`KindScope`], [`ScopedApi`]).

use std::fmt::Debug;

use kube::core::{
    ApiResource, ClusterResourceScope, DynamicResourceScope, NamespaceResourceScope, NamespaceScope,
};
use kube::{Api, Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The bound of every type an informer hands out: a compile-time kind (`Secret`, a
/// `#[derive(CustomResource)]` type), its metadata only (`PartialObjectMeta<Secret>`), or a
/// kind known at run time (`DynamicObject`, `PartialObjectMeta<DynamicObject>`, with the
/// `ApiResource` as dynamic type). Every such type implements it automatically.
pub trait CacheResource:
    Resource<DynamicType: KindType, Scope: KindScope>
    + Clone
    + DeserializeOwned
    + Serialize
    + Debug
    + Send
    + Sync
    + 'static
{
}

impl<K> CacheResource for K where
    K: Resource<DynamicType: KindType, Scope: KindScope>
        + Clone
        + DeserializeOwned
        + Serialize
        + Debug
        + Send
        + Sync
        + 'static
{
}

/// The bound of the kinds known at compile time, full or metadata only
/// (`PartialObjectMeta<K>`); generic controller code names this one trait instead of repeating
/// the list. Every k8s-openapi type and every `#[derive(CustomResource)]` type implements it
/// automatically.
pub trait InformerResource: CacheResource + Resource<DynamicType = (), Scope: ScopedApi> {}

impl<K> InformerResource for K where K: CacheResource + Resource<DynamicType = (), Scope: ScopedApi> {}

mod sealed {
    pub trait Sealed {}
    impl Sealed for () {}
    impl Sealed for kube::core::ApiResource {}
    impl Sealed for kube::core::NamespaceResourceScope {}
    impl Sealed for kube::core::ClusterResourceScope {}
    impl Sealed for kube::core::DynamicResourceScope {}
}

/// A kind's dynamic type: `()` for compile-time types, the `ApiResource` for kinds known at run
/// time, which the factory replaces by the one discovery found (the served plural).
pub trait KindType: sealed::Sealed + Clone + Debug + Send + Sync + 'static {
    /// This dynamic type for the resource discovery resolved.
    fn resolved(resource: &ApiResource) -> Self;
}

impl KindType for () {
    fn resolved(_: &ApiResource) -> Self {}
}

impl KindType for ApiResource {
    fn resolved(resource: &ApiResource) -> Self {
        resource.clone()
    }
}

/// Builds the list/watch [`Api`] of any kind in a namespace or cluster-wide: compile-time kinds
/// know their scope, kinds known at run time learn it from discovery.
pub trait KindScope: sealed::Sealed {
    /// Whether objects of this scope live in namespaces; `None` when only discovery knows.
    const NAMESPACED: Option<bool>;

    /// The API to list and watch, restricted to `namespace` (given only for namespaced kinds).
    fn api_with<K>(client: Client, dyntype: &K::DynamicType, namespace: Option<&str>) -> Api<K>
    where
        K: Resource<Scope = Self>;
}

/// `api` restricted to `namespace` when one is given.
fn narrowed<K: Resource<Scope: NamespaceScope>>(api: Api<K>, namespace: Option<&str>) -> Api<K> {
    match namespace {
        Some(ns) => api.constrain(ns),
        None => api,
    }
}

impl KindScope for NamespaceResourceScope {
    const NAMESPACED: Option<bool> = Some(true);

    fn api_with<K>(client: Client, dyntype: &K::DynamicType, namespace: Option<&str>) -> Api<K>
    where
        K: Resource<Scope = Self>,
    {
        narrowed(Api::all_with(client, dyntype), namespace)
    }
}

impl KindScope for ClusterResourceScope {
    const NAMESPACED: Option<bool> = Some(false);

    fn api_with<K>(client: Client, dyntype: &K::DynamicType, _namespace: Option<&str>) -> Api<K>
    where
        K: Resource<Scope = Self>,
    {
        Api::all_with(client, dyntype)
    }
}

impl KindScope for DynamicResourceScope {
    const NAMESPACED: Option<bool> = None;

    fn api_with<K>(client: Client, dyntype: &K::DynamicType, namespace: Option<&str>) -> Api<K>
    where
        K: Resource<Scope = Self>,
    {
        narrowed(Api::all_with(client, dyntype), namespace)
    }
}

/// Builds the list/watch [`Api`] for a compile-time kind's scope, so one generic function can
/// honour a namespace for namespaced kinds while cluster-scoped kinds always watch cluster-wide.
pub trait ScopedApi: KindScope {
    /// Whether a namespace in the informer scope means anything for this kind.
    const NAMESPACED: bool;

    /// The API to list and watch, restricted to `namespace` when the kind is namespaced.
    fn api<K>(client: Client, namespace: Option<&str>) -> Api<K>
    where
        K: Resource<Scope = Self, DynamicType = ()>;
}

impl ScopedApi for NamespaceResourceScope {
    const NAMESPACED: bool = true;

    fn api<K>(client: Client, namespace: Option<&str>) -> Api<K>
    where
        K: Resource<Scope = Self, DynamicType = ()>,
    {
        match namespace {
            Some(ns) => Api::namespaced(client, ns),
            None => Api::all(client),
        }
    }
}

impl ScopedApi for ClusterResourceScope {
    const NAMESPACED: bool = false;

    fn api<K>(client: Client, _namespace: Option<&str>) -> Api<K>
    where
        K: Resource<Scope = Self, DynamicType = ()>,
    {
        Api::all(client)
    }
}
