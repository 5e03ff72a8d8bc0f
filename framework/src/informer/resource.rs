//! Owns [`InformerResource`], the one bound a type needs to be cached by the shared informer
//! factory, and [`ScopedApi`], which turns an [`InformerScope`](super::InformerScope)'s namespace
//! into the right API path for namespaced and cluster-scoped kinds alike.

use std::fmt::Debug;

use kube::core::{ClusterResourceScope, NamespaceResourceScope};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

/// The bound every informer type satisfies; generic controller code names this one trait
/// instead of repeating the list. Every k8s-openapi type and every `#[derive(CustomResource)]`
/// type implements it automatically.
pub trait InformerResource:
    Resource<DynamicType = (), Scope: ScopedApi>
    + Clone
    + DeserializeOwned
    + Debug
    + Send
    + Sync
    + 'static
{
}

impl<K> InformerResource for K where
    K: Resource<DynamicType = (), Scope: ScopedApi>
        + Clone
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static
{
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for kube::core::NamespaceResourceScope {}
    impl Sealed for kube::core::ClusterResourceScope {}
}

/// Builds the list/watch [`Api`] for a kind's scope, so one generic `informer_for` can honour a
/// namespace for namespaced kinds while cluster-scoped kinds always watch cluster-wide.
pub trait ScopedApi: sealed::Sealed {
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
