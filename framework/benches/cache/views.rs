//! Scenario 4c, run in a child process: what caching Secrets costs when controllers need only
//! their metadata, at N Secrets of 10 KB each. Every mode keeps one counting handler per
//! controller, as a controller's event handler would.
//!
//! - `full`: one controller over whole Secrets (our informer).
//! - `metadata`: one controller over their metadata (`PartialObjectMeta<Secret>`): one metadata
//!   watch (`as=PartialObjectMetadata`).
//! - `mixed`: one metadata controller and one full controller in one process: one full watch,
//!   the metadata handler sees each object's metadata projected from the full store.
//! - `two-informers`: the same two controllers as controller-runtime builds them (an informer
//!   for the full objects and another for the metadata: two watches, two stores), reproduced
//!   with two factories.
//! - `kube-full`, `kube-metadata`: kube-runtime's `watcher` (resp. `metadata_watcher`) feeding a
//!   `reflector` store, streaming lists on.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use controller_manager::informer::{Event, Informer, InformerResource, SharedInformerFactory};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::core::PartialObjectMeta;
use kube::{Api, Client};
use kube_runtime::{reflector, watcher};
use tokio_util::sync::CancellationToken;

use crate::report::{Figures, secs};
use crate::shared_cache::SETTLE;

/// The modes, in table order.
pub const MODES: [&str; 6] = [
    "full",
    "metadata",
    "mixed",
    "two-informers",
    "kube-full",
    "kube-metadata",
];

/// Caches every Secret as `mode` says and reports heap and RSS.
pub async fn views(client: Client, mode: &str) -> anyhow::Result<Figures> {
    let mut figures = Figures::begin();
    let start = Instant::now();
    let shutdown = CancellationToken::new();
    let mut keep = Vec::new();
    figures.objects = match mode {
        "kube-full" => {
            let (reader, writer) = reflector::store::<Secret>();
            let config = watcher::Config::default().streaming_lists();
            let stream = reflector(writer, watcher(Api::<Secret>::all(client), config));
            tokio::spawn(stream.for_each(|_| std::future::ready(())));
            reader.wait_until_ready().await?;
            keep.push(Box::new(reader.clone()) as Box<dyn std::any::Any>);
            reader.len()
        }
        "kube-metadata" => {
            let (reader, writer) = reflector::store::<PartialObjectMeta<Secret>>();
            let config = watcher::Config::default().streaming_lists();
            #[allow(deprecated)]
            // kube 5 prefers watcher(Api<PartialObjectMeta<K>>): the same requests
            let stream = reflector(
                writer,
                watcher::metadata_watcher(Api::<Secret>::all(client), config),
            );
            tokio::spawn(stream.for_each(|_| std::future::ready(())));
            reader.wait_until_ready().await?;
            keep.push(Box::new(reader.clone()) as Box<dyn std::any::Any>);
            reader.len()
        }
        _ => {
            let factories: Vec<SharedInformerFactory> = match mode {
                "two-informers" => vec![
                    SharedInformerFactory::new(client.clone()),
                    SharedInformerFactory::new(client),
                ],
                _ => vec![SharedInformerFactory::new(client)],
            };
            let (first, last) = (&factories[0], &factories[factories.len() - 1]);
            let cached = match mode {
                "full" => controller::<Secret>(first, &mut keep),
                "metadata" => controller::<PartialObjectMeta<Secret>>(first, &mut keep),
                "mixed" | "two-informers" => {
                    let metadata = controller::<PartialObjectMeta<Secret>>(last, &mut keep);
                    let full = controller::<Secret>(first, &mut keep);
                    Box::new(move || metadata().min(full()))
                }
                other => anyhow::bail!("unknown mode {other}"),
            };
            for factory in &factories {
                factory.start(shutdown.clone());
                factory.wait_for_sync(Duration::from_secs(600)).await?;
            }
            cached()
        }
    };
    figures.sync_s = Some(secs(start.elapsed()));
    tokio::time::sleep(SETTLE).await;
    figures.settle();
    std::hint::black_box(&keep);
    shutdown.cancel();
    Ok(figures)
}

/// One controller's informer and counting handler on `factory`; returns how many objects its
/// store holds once synced.
fn controller<K: InformerResource>(
    factory: &SharedInformerFactory,
    keep: &mut Vec<Box<dyn std::any::Any>>,
) -> Box<dyn Fn() -> usize> {
    let informer: Informer<K> = factory.informer::<K>();
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&seen);
    keep.push(Box::new(informer.add_handler(move |_: &Event<K>| {
        counter.fetch_add(1, Ordering::Relaxed);
    })));
    let store = informer.store();
    Box::new(move || store.len())
}
