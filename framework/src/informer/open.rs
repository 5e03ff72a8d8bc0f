//! Owns opening an informer's watches once the factory has chosen the type it stores: one
//! streaming list (or LIST + WATCH) per part, each through its own watch throttle, into the
//! informer's drivers. [`Opener`] erases the stored type, so the factory can choose it at start
//! from the views registered by then.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::Client;
use kube_runtime::watcher;
use tokio_util::sync::CancellationToken;

use super::backoff::with_backoff;
use super::dispatch::Shared;
use super::resolve::Resolved;
use super::resource::{CacheResource, KindScope, KindType};
use super::watch_list;
use super::watch_throttle::WatchThrottle;

/// How informers list and watch; set per factory because it is a property of the API server
/// and the deployment, not of the objects wanted.
#[derive(Clone, Debug)]
pub(crate) struct WatchConfig {
    pub(crate) default_resync: Option<Duration>,
    pub(crate) list: ListMode,
    /// Streaming lists first (client-go's `WatchListClient`, on by default as since 1.35).
    pub(crate) watch_list: bool,
}

impl Default for WatchConfig {
    fn default() -> Self {
        WatchConfig {
            default_resync: None,
            list: ListMode::default(),
            watch_list: true,
        }
    }
}

/// How informers LIST (without streaming lists, or after falling back from them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum ListMode {
    /// `resourceVersion=0`, unpaged: served from the API server's watch cache, like client-go's
    /// reflector. kube-client drops `resourceVersion=0` whenever a page size is set, so this
    /// mode must not page.
    #[default]
    WatchCache,
    /// Quorum reads from etcd in pages of this size.
    Paged(u32),
}

/// Everything an informer's watches need once its kind is resolved.
pub(crate) struct OpenContext<'a> {
    pub(crate) client: &'a Client,
    pub(crate) config: &'a WatchConfig,
    pub(crate) resolved: &'a Resolved,
    /// The namespace of each part (`None`: the whole scope).
    pub(crate) parts: &'a [Option<String>],
    pub(crate) shutdown: &'a CancellationToken,
}

/// Starts an informer storing one view's type.
pub(crate) trait Opener: Send + Sync {
    /// Starts `shared`'s watches; `Err` says why it cannot (its transforms conflict, no runtime).
    fn open(&self, shared: &Arc<Shared>, ctx: &OpenContext<'_>) -> Result<(), String>;
}

/// Opens informers that store objects as `V`.
pub(crate) struct ViewOpener<V>(PhantomData<fn() -> V>);

impl<V> ViewOpener<V> {
    pub(crate) fn new() -> Self {
        ViewOpener(PhantomData)
    }
}

impl<V: CacheResource> Opener for ViewOpener<V> {
    fn open(&self, shared: &Arc<Shared>, ctx: &OpenContext<'_>) -> Result<(), String> {
        let transform = shared.transform_for::<V>()?;
        let rt = shared
            .run(ctx.parts, ctx.shutdown)
            .map_err(|e| e.to_string())?;
        let dyntype = V::DynamicType::resolved(&ctx.resolved.resource);
        let config = watcher_config(&shared.scope, ctx.config);
        for (part, namespace) in ctx.parts.iter().enumerate() {
            // Each watch gets its own throttle, so one whose watches are cut does not slow the
            // others down.
            let client = WatchThrottle::client(ctx.client);
            let api = V::Scope::api_with::<V>(client, &dyntype, namespace.as_deref());
            let stream = if ctx.config.watch_list {
                let list_watch = {
                    let (api, config) = (api.clone(), config.clone());
                    move || watcher(api, config).boxed()
                };
                watch_list::stream(api, config.clone(), shared.describe(), list_watch).boxed()
            } else {
                watcher(api, config.clone()).boxed()
            };
            shared.drive(&rt, part, with_backoff(stream), Arc::clone(&transform));
        }
        Ok(())
    }
}

/// The selectors and list semantics of every watch of an informer of `scope`.
fn watcher_config(scope: &super::InformerScope, factory: &WatchConfig) -> watcher::Config {
    let mut config = watcher::Config::default();
    if let Some(labels) = &scope.label_selector {
        config = config.labels(labels);
    }
    if let Some(fields) = &scope.field_selector {
        config = config.fields(fields);
    }
    match factory.list {
        ListMode::WatchCache => {
            let mut config = config.any_semantic();
            config.page_size = None;
            config
        }
        ListMode::Paged(page_size) => config.page_size(page_size),
    }
}
