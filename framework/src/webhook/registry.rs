//! The name → webhook map, beside the controllers' map and selected the same way
//! (`--webhooks`, with `--controllers`' syntax and messages): each [`WebhookInitializer`] names
//! a webhook, the path it is served at, whether `*` turns it on, and how its handler is built
//! from a [`WebhookContext`] (the process's client, informers and the embedder's context), as
//! upstream's `WebhookConfig` map in `k8s.io/cloud-provider/app`.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use kube::Resource;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use kube::core::conversion::{ConversionRequest, ConversionResponse};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;
use tower::BoxError;
use tower::util::BoxCloneSyncService;

use super::defaulter::{Defaulter, Defaulting};
use super::endpoint::{Admission, Conversion, WebhookRequest, WebhookResponse};
use super::typed::Typed;
use super::validator::{Validating, Validator};
use crate::informer::SharedInformerFactory;

/// A webhook initializer's failure; it aborts start-up, so it must say what to change.
pub type WebhookInitError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A webhook's HTTP endpoint before the standard layers.
pub type Endpoint = BoxCloneSyncService<WebhookRequest, WebhookResponse, BoxError>;

type Build<C> = Arc<
    dyn Fn(WebhookContext<C>) -> BoxFuture<'static, Result<Endpoint, WebhookInitError>>
        + Send
        + Sync,
>;

/// What a webhook's initializer gets.
pub struct WebhookContext<C> {
    /// The webhook's name.
    pub name: String,
    /// The path it is served at.
    pub path: String,
    /// The manager's client.
    pub client: kube::Client,
    /// The process's informer factory, shared with the controllers: keep `Store`s from it, and
    /// read them, never the API server, per review. Its informers are started with the webhook
    /// server, on every replica, and `/readyz` waits for them.
    pub factory: SharedInformerFactory,
    /// Cancelled when the process stops.
    pub shutdown: CancellationToken,
    /// The embedder's context.
    pub extra: Arc<C>,
}

/// One entry of the map.
pub struct WebhookInitializer<C> {
    pub(crate) name: String,
    pub(crate) path: String,
    pub(crate) enabled_by_default: bool,
    pub(crate) build: Build<C>,
    /// The kind a typed webhook decodes (none for raw and conversion webhooks).
    pub(crate) typed: Option<Typed>,
}

impl<C> Clone for WebhookInitializer<C> {
    fn clone(&self) -> Self {
        WebhookInitializer {
            name: self.name.clone(),
            path: self.path.clone(),
            enabled_by_default: self.enabled_by_default,
            build: self.build.clone(),
            typed: self.typed.clone(),
        }
    }
}

impl<C: Send + Sync + 'static> WebhookInitializer<C> {
    /// A validating webhook over `T`, whose [`Validator`] `init` builds.
    pub fn validating<T, V, F, Fut>(
        name: impl Into<String>,
        path: impl Into<String>,
        init: F,
    ) -> Self
    where
        T: Resource<DynamicType = ()> + DeserializeOwned + Send + Sync + 'static,
        V: Validator<T>,
        F: Fn(WebhookContext<C>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<V, WebhookInitError>> + Send + 'static,
    {
        Self::raw(name, path, move |ctx| {
            let built = init(ctx);
            async move { Ok(Validating::<V, T>::new(built.await?)) }
        })
        .decoding::<T>(false)
    }

    /// A defaulting (mutating) webhook over `T`, whose [`Defaulter`] `init` builds.
    pub fn defaulting<T, D, F, Fut>(
        name: impl Into<String>,
        path: impl Into<String>,
        init: F,
    ) -> Self
    where
        T: Resource<DynamicType = ()>
            + DeserializeOwned
            + Serialize
            + Clone
            + Send
            + Sync
            + 'static,
        D: Defaulter<T>,
        F: Fn(WebhookContext<C>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<D, WebhookInitError>> + Send + 'static,
    {
        Self::raw(name, path, move |ctx| {
            let built = init(ctx);
            async move { Ok(Defaulting::<D, T>::new(built.await?)) }
        })
        .decoding::<T>(true)
    }

    /// Records that the webhook decodes `T` (a patch when `mutating`), for [`super::mismatches`].
    fn decoding<T: Resource<DynamicType = ()>>(mut self, mutating: bool) -> Self {
        self.typed = Some(Typed {
            group: T::group(&()).into_owned(),
            version: T::version(&()).into_owned(),
            kind: T::kind(&()).into_owned(),
            plural: T::plural(&()).into_owned(),
            mutating,
        });
        self
    }

    /// An admission webhook over raw reviews, for anything the typed ones do not cover (several
    /// kinds, subresources, `v1beta1` reviews): `init` builds any
    /// `Service<AdmissionRequest<DynamicObject>, Response = AdmissionResponse>`.
    pub fn raw<S, F, Fut>(name: impl Into<String>, path: impl Into<String>, init: F) -> Self
    where
        S: tower::Service<AdmissionRequest<DynamicObject>, Response = AdmissionResponse>
            + Clone
            + Send
            + Sync
            + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send + 'static,
        F: Fn(WebhookContext<C>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<S, WebhookInitError>> + Send + 'static,
    {
        Self::entry(name, path, move |ctx| {
            let built = init(ctx);
            async move { Ok(BoxCloneSyncService::new(Admission::new(built.await?))) }
        })
    }

    /// A conversion webhook: `init` builds its conversion service, usually a
    /// [`HubAndSpoke`](super::HubAndSpoke); its answers are checked as the server checks them.
    pub fn conversion<S, F, Fut>(name: impl Into<String>, path: impl Into<String>, init: F) -> Self
    where
        S: tower::Service<ConversionRequest, Response = ConversionResponse>
            + Clone
            + Send
            + Sync
            + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send + 'static,
        F: Fn(WebhookContext<C>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<S, WebhookInitError>> + Send + 'static,
    {
        Self::entry(name, path, move |ctx| {
            let built = init(ctx);
            async move { Ok(BoxCloneSyncService::new(Conversion::new(built.await?))) }
        })
    }

    fn entry<F, Fut>(name: impl Into<String>, path: impl Into<String>, build: F) -> Self
    where
        F: Fn(WebhookContext<C>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Endpoint, WebhookInitError>> + Send + 'static,
    {
        WebhookInitializer {
            name: name.into(),
            path: path.into(),
            enabled_by_default: true,
            build: Arc::new(move |ctx| Box::pin(build(ctx))),
            typed: None,
        }
    }

    /// Leaves the webhook off under `*`; it runs only when named in `--webhooks`.
    pub fn disabled_by_default(mut self) -> Self {
        self.enabled_by_default = false;
        self
    }

    /// The webhook's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The path it is served at.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Whether `*` turns it on.
    pub fn enabled_by_default(&self) -> bool {
        self.enabled_by_default
    }

    /// Builds its endpoint, before the standard layers ([`super::layers::standard`]); the
    /// manager does this for the selected webhooks, and an embedder serving them itself may.
    pub async fn build(&self, ctx: WebhookContext<C>) -> Result<Endpoint, WebhookInitError> {
        (self.build)(ctx).await
    }
}

/// Why the map refused an entry; each names both sides of a clash.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WebhooksError {
    /// Two webhooks with one name.
    #[error("webhook name {name:?} is registered twice (at {first} and at {second})")]
    DuplicateName {
        /// The name.
        name: String,
        /// The first one's path.
        first: String,
        /// The second one's path.
        second: String,
    },
    /// Two webhooks on one path.
    #[error("webhooks {first:?} and {second:?} are both served at {path}")]
    DuplicatePath {
        /// The path.
        path: String,
        /// The first one's name.
        first: String,
        /// The second one's name.
        second: String,
    },
    /// A name `--webhooks` could never select.
    #[error(
        "webhook name {0:?} is not valid: it must be non-empty, not '*', and not start with '-'"
    )]
    InvalidName(String),
    /// A path that is not absolute.
    #[error("webhook {name:?}: path {path:?} must start with '/'")]
    InvalidPath {
        /// The webhook.
        name: String,
        /// Its path.
        path: String,
    },
}

/// The ordered map of every webhook a process can serve; embedders add theirs beside the stock
/// ones, as they add controllers.
pub struct Webhooks<C> {
    entries: Vec<WebhookInitializer<C>>,
}

impl<C> Default for Webhooks<C> {
    fn default() -> Self {
        Webhooks {
            entries: Vec::new(),
        }
    }
}

impl<C> Clone for Webhooks<C> {
    fn clone(&self) -> Self {
        Webhooks {
            entries: self.entries.clone(),
        }
    }
}

impl<C: Send + Sync + 'static> Webhooks<C> {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an entry after the others; clashes are reported by [`Self::check`].
    pub fn with(mut self, entry: WebhookInitializer<C>) -> Self {
        self.entries.push(entry);
        self
    }

    /// Adds every entry of `other` after this map's own.
    pub fn merge(mut self, other: Webhooks<C>) -> Self {
        self.entries.extend(other.entries);
        self
    }

    /// Fails on a name or path registered twice, naming both webhooks, or a name `--webhooks`
    /// could not select.
    pub fn check(&self) -> Result<(), WebhooksError> {
        let mut names: HashMap<&str, &str> = HashMap::new();
        let mut paths: HashMap<&str, &str> = HashMap::new();
        for e in &self.entries {
            if e.name.is_empty() || e.name == "*" || e.name.starts_with('-') {
                return Err(WebhooksError::InvalidName(e.name.clone()));
            }
            if !e.path.starts_with('/') {
                return Err(WebhooksError::InvalidPath {
                    name: e.name.clone(),
                    path: e.path.clone(),
                });
            }
            if let Some(first) = names.insert(&e.name, &e.path) {
                return Err(WebhooksError::DuplicateName {
                    name: e.name.clone(),
                    first: first.to_string(),
                    second: e.path.clone(),
                });
            }
            if let Some(first) = paths.insert(&e.path, &e.name) {
                return Err(WebhooksError::DuplicatePath {
                    path: e.path.clone(),
                    first: first.to_string(),
                    second: e.name.clone(),
                });
            }
        }
        Ok(())
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Entries in registration order.
    pub fn iter(&self) -> impl Iterator<Item = &WebhookInitializer<C>> {
        self.entries.iter()
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use super::*;

    fn hook(name: &str, path: &str) -> WebhookInitializer<()> {
        WebhookInitializer::raw(name, path, |_| async {
            Ok(tower::service_fn(
                |r: AdmissionRequest<DynamicObject>| async move {
                    Ok::<_, Infallible>(AdmissionResponse::from(&r))
                },
            ))
        })
    }

    #[test]
    fn clashes_are_refused_naming_both() {
        let twice = Webhooks::new().with(hook("a", "/x")).with(hook("a", "/y"));
        assert_eq!(
            twice.check().unwrap_err().to_string(),
            "webhook name \"a\" is registered twice (at /x and at /y)"
        );
        let shared = Webhooks::new().with(hook("a", "/x")).with(hook("b", "/x"));
        assert_eq!(
            shared.check().unwrap_err().to_string(),
            "webhooks \"a\" and \"b\" are both served at /x"
        );
        let relative = Webhooks::new().with(hook("a", "x"));
        assert!(
            relative
                .check()
                .unwrap_err()
                .to_string()
                .contains("must start with '/'")
        );
        assert!(Webhooks::new().with(hook("-a", "/x")).check().is_err());
        assert!(
            Webhooks::new()
                .with(hook("a", "/x"))
                .with(hook("b", "/y"))
                .check()
                .is_ok()
        );
    }
}
