//! Scenario 4, run in a child process: what one cached object costs.
//!
//! - `lists`: one informer (or kube-runtime reflector) over every Service, synced with each list
//!   strategy: our default (a streaming list, `sendInitialEvents=true`), streaming lists off (one
//!   unpaged `resourceVersion=0` LIST from the watch cache, what a v1.23 server gets), paged
//!   quorum LISTs of 500; kube-runtime's defaults (paged 500) and its streaming list beside them.
//! - `transform`: heap per cached Node with and without the managedFields transform, off the
//!   wire: each Node (with the five managedFields entries a real server keeps) is serialized,
//!   decoded exactly as the watcher decodes it, transformed or not, and kept as an `Arc` in a map
//!   keyed like the informer's store.
//! - `wire-transform`: the same over HTTP: one Node informer over a server whose Nodes were
//!   written by two field managers (so kube-testenv recorded their managedFields), with the
//!   default transform or with one that keeps everything.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use controller_manager::informer::{Event, ObjectKey, SharedInformerFactory, drop_managed_fields};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Service};
use kube::{Api, Client};
use kube_runtime::{reflector, watcher};
use tokio_util::sync::CancellationToken;

use crate::fixtures;
use crate::report::{Figures, secs};
use crate::shared_cache::SETTLE;

/// List strategies compared at 10,000 objects.
pub const LIST_MODES: [&str; 5] = [
    "watch-cache",
    "paged-500",
    "streaming",
    "kube-paged-500",
    "kube-streaming",
];

/// Syncs every Service with list strategy `mode` and reports heap and RSS.
pub async fn lists(client: Client, mode: &str) -> anyhow::Result<Figures> {
    let mut figures = Figures::begin();
    let start = Instant::now();
    let shutdown = CancellationToken::new();
    match mode {
        "kube-paged-500" | "kube-streaming" => {
            let config = if mode == "kube-streaming" {
                watcher::Config::default().streaming_lists()
            } else {
                watcher::Config::default()
            };
            let (reader, writer) = reflector::store::<Service>();
            let stream = reflector(writer, watcher(Api::<Service>::all(client), config));
            tokio::spawn(stream.for_each(|_| std::future::ready(())));
            reader.wait_until_ready().await?;
            figures.objects = reader.len();
            figures.sync_s = Some(secs(start.elapsed()));
            tokio::time::sleep(SETTLE).await;
            figures.settle();
            drop(reader);
        }
        _ => {
            let factory = SharedInformerFactory::new(client);
            let factory = match mode {
                "paged-500" => factory.with_watch_list(false).with_page_size(500),
                "watch-cache" => factory.with_watch_list(false),
                _ => factory,
            };
            let informer = factory.informer::<Service>();
            let seen = Arc::new(AtomicUsize::new(0));
            let s = Arc::clone(&seen);
            let registration = informer.add_handler(move |_: &Event<Service>| {
                s.fetch_add(1, Ordering::Relaxed);
            });
            factory.start(shutdown.clone());
            factory.wait_for_sync(Duration::from_secs(300)).await?;
            registration.wait_for_sync().await;
            figures.objects = informer.store().len();
            figures.sync_s = Some(secs(start.elapsed()));
            tokio::time::sleep(SETTLE).await;
            figures.settle();
        }
    }
    shutdown.cancel();
    Ok(figures)
}

/// Heap per cached Node decoded from JSON with managedFields, dropping them (`drop`) or not.
pub fn transform(objects: usize, drop: bool) -> anyhow::Result<Figures> {
    let mut figures = Figures::begin();
    figures.objects = objects;
    let mut wire = 0;
    let mut store: HashMap<ObjectKey, Arc<Node>> = HashMap::new();
    for i in 0..objects {
        let bytes = serde_json::to_vec(&fixtures::node(i, true))?;
        wire += bytes.len();
        let mut node: Node = serde_json::from_slice(&bytes)?;
        if drop {
            drop_managed_fields(&mut node);
        }
        store.insert(ObjectKey::from_object(&node), Arc::new(node));
    }
    figures.wire_bytes = Some(wire / objects.max(1));
    figures.settle();
    std::hint::black_box(&store);
    Ok(figures)
}

/// Heap per Node cached by one informer over the wire, with the default transform (`drop`) or
/// with one that keeps managedFields.
pub async fn wire_transform(client: Client, drop: bool) -> anyhow::Result<Figures> {
    let mut figures = Figures::begin();
    let start = Instant::now();
    let shutdown = CancellationToken::new();
    let factory = SharedInformerFactory::new(client);
    let informer = factory.informer::<Node>();
    if !drop {
        informer.set_transform(|_: &mut Node| {})?;
    }
    factory.start(shutdown.clone());
    factory.wait_for_sync(Duration::from_secs(300)).await?;
    let store = informer.store();
    figures.objects = store.len();
    figures.sync_s = Some(secs(start.elapsed()));
    let entries: usize = store
        .list()
        .iter()
        .map(|n| n.metadata.managed_fields.as_ref().map_or(0, Vec::len))
        .sum();
    // The premise of the comparison: the server really sent managedFields, and the default
    // transform really dropped them.
    anyhow::ensure!(
        (entries > 0) != drop,
        "{entries} managedFields entries cached with drop={drop}"
    );
    tokio::time::sleep(SETTLE).await;
    figures.settle();
    shutdown.cancel();
    Ok(figures)
}
