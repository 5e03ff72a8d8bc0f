//! Owns [`Reader`]: reads of one kind that come from the shared cache, or straight from the API
//! server for a kind the process reads uncached (controller-runtime's `client.Reader` over a
//! cache with `DisableFor`), so a controller's code does not change with the cache options.

use std::sync::Arc;

use kube::api::ListParams;
use kube::core::GroupVersionKind;
use kube::{Api, Client};
use tokio::sync::OnceCell;

use super::key::ObjectKey;
use super::kind::kind_name;
use super::resolve::{Resolution, Resolved, resolve};
use super::resource::{CacheResource, KindScope, KindType};
use super::scope::InformerScope;
use super::store::Store;

/// Why a read failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The API server answered with an error.
    #[error("reading from the API server failed: {0}")]
    Api(#[from] kube::Error),
    /// Discovery cannot find the kind (given at run time) to read it.
    #[error("cannot read {kind}: {reason}")]
    NotServed {
        /// The kind, `apiVersion/Kind`.
        kind: String,
        /// What discovery said.
        reason: String,
    },
}

/// Reads objects of one kind as `V`; see the [module docs](self). Cheap to clone.
pub struct Reader<V: CacheResource> {
    source: Source<V>,
}

enum Source<V: CacheResource> {
    Cached(Store<V>),
    Uncached(Arc<Uncached<V>>),
}

struct Uncached<V: CacheResource> {
    client: Client,
    dyntype: V::DynamicType,
    scope: InformerScope,
    /// The kind as discovery found it, for a kind given at run time.
    resolved: OnceCell<Resolved>,
}

impl<V: CacheResource> Clone for Reader<V> {
    fn clone(&self) -> Self {
        let source = match &self.source {
            Source::Cached(store) => Source::Cached(store.clone()),
            Source::Uncached(api) => Source::Uncached(Arc::clone(api)),
        };
        Reader { source }
    }
}

impl<V: CacheResource> std::fmt::Debug for Reader<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("cached", &self.is_cached())
            .finish()
    }
}

impl<V: CacheResource> Reader<V> {
    pub(crate) fn cached(store: Store<V>) -> Self {
        Reader {
            source: Source::Cached(store),
        }
    }

    /// Reads of the objects of `scope` straight from the API server, through `client`.
    pub fn uncached(client: Client, dyntype: V::DynamicType, scope: InformerScope) -> Self {
        Reader {
            source: Source::Uncached(Arc::new(Uncached {
                client,
                dyntype,
                scope,
                resolved: OnceCell::new(),
            })),
        }
    }

    /// Whether reads come from the shared cache.
    pub fn is_cached(&self) -> bool {
        matches!(self.source, Source::Cached(_))
    }

    /// The object with `key`, `None` if there is none.
    pub async fn get(&self, key: &ObjectKey) -> Result<Option<Arc<V>>, ReadError> {
        match &self.source {
            Source::Cached(store) => Ok(store.get(key)),
            Source::Uncached(api) => {
                let api = api.api(key.namespace.as_deref()).await?;
                Ok(api.get_opt(&key.name).await?.map(Arc::new))
            }
        }
    }

    /// Every object of the reader's scope.
    pub async fn list(&self) -> Result<Vec<Arc<V>>, ReadError> {
        match &self.source {
            Source::Cached(store) => Ok(store.list()),
            Source::Uncached(api) => {
                let scope = &api.scope;
                let list = api.api(scope.namespace.as_deref()).await?;
                let mut params = ListParams::default();
                if let Some(labels) = &scope.label_selector {
                    params = params.labels(labels);
                }
                if let Some(fields) = &scope.field_selector {
                    params = params.fields(fields);
                }
                Ok(list
                    .list(&params)
                    .await?
                    .items
                    .into_iter()
                    .map(Arc::new)
                    .collect())
            }
        }
    }
}

impl<V: CacheResource> Uncached<V> {
    /// The API of `namespace` (ignored for a cluster-scoped kind).
    async fn api(&self, namespace: Option<&str>) -> Result<Api<V>, ReadError> {
        let resolved = self
            .resolved
            .get_or_try_init(|| async {
                let gvk = GroupVersionKind::gvk(
                    &V::group(&self.dyntype),
                    &V::version(&self.dyntype),
                    &V::kind(&self.dyntype),
                );
                if let Some(namespaced) = V::Scope::NAMESPACED {
                    let resource = kube::core::ApiResource::erase::<V>(&self.dyntype);
                    return Ok(Resolved {
                        resource,
                        namespaced,
                    });
                }
                match resolve(&self.client, &gvk).await {
                    Resolution::Served(resolved) => Ok(resolved),
                    Resolution::Waiting(reason) | Resolution::Invalid(reason) => {
                        Err(ReadError::NotServed {
                            kind: kind_name(&gvk),
                            reason,
                        })
                    }
                }
            })
            .await?;
        let dyntype = V::DynamicType::resolved(&resolved.resource);
        let namespace = namespace.filter(|_| resolved.namespaced);
        Ok(V::Scope::api_with::<V>(
            self.client.clone(),
            &dyntype,
            namespace,
        ))
    }
}
