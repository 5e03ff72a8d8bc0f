//! Unit tests of the informer core driven by synthetic watcher streams: what handlers see for
//! adds, updates, deletes and relists, late registration, slow handlers, resync and transforms.

mod delivery;
mod factory;
mod relist;
mod resync;
mod setup;
mod spans;
mod views;

use std::sync::Arc;
use std::time::Duration;

use futures::channel::mpsc as fmpsc;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta};
use kube_runtime::watcher;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Event, HandlerRegistration, Informer, InformerScope};

type WatchItem = Result<watcher::Event<Node>, watcher::Error>;

/// An informer fed by a channel standing in for kube-runtime's watcher.
struct Harness {
    informer: Informer<Node>,
    feed: fmpsc::UnboundedSender<WatchItem>,
    feed_rx: Option<fmpsc::UnboundedReceiver<WatchItem>>,
    shutdown: CancellationToken,
}

impl Harness {
    fn new() -> Self {
        Self::with_default_resync(None)
    }

    fn with_default_resync(resync: Option<Duration>) -> Self {
        let (feed, feed_rx) = fmpsc::unbounded();
        Self {
            informer: Informer::new("Node".to_string(), InformerScope::all(), resync),
            feed,
            feed_rx: Some(feed_rx),
            shutdown: CancellationToken::new(),
        }
    }

    fn start(&mut self) {
        let rx = self.feed_rx.take().expect("started twice");
        self.informer
            .start_with_stream(rx, &self.shutdown)
            .expect("start");
    }

    fn send(&self, event: watcher::Event<Node>) {
        self.feed.unbounded_send(Ok(event)).expect("driver gone");
    }

    fn fail(&self) {
        self.feed
            .unbounded_send(Err(watcher::Error::NoResourceVersion))
            .expect("driver gone");
    }

    /// Sends one complete list, as the watcher does on start and after a 410 Gone.
    fn list(&self, nodes: Vec<Node>) {
        self.send(watcher::Event::Init);
        for n in nodes {
            self.send(watcher::Event::InitApply(n));
        }
        self.send(watcher::Event::InitDone);
    }

    fn record(&self) -> (Recorder, HandlerRegistration) {
        let (rec, handler) = Recorder::new();
        (rec, self.informer.add_handler(handler))
    }
}

/// Receives what a handler saw, as `add a@1`, `update a@1->2`, `delete a@2`.
struct Recorder {
    rx: mpsc::UnboundedReceiver<(String, Instant)>,
}

impl Recorder {
    fn new() -> (Self, impl FnMut(&Event<Node>) + Send + 'static) {
        let (tx, rx) = mpsc::unbounded_channel();
        let handler = move |event: &Event<Node>| {
            let _ = tx.send((describe(event), Instant::now()));
        };
        (Self { rx }, handler)
    }

    async fn next(&mut self) -> String {
        self.next_at().await.0
    }

    async fn next_at(&mut self) -> (String, Instant) {
        self.rx.recv().await.expect("handler stopped")
    }

    async fn take(&mut self, n: usize) -> Vec<String> {
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(self.next().await);
        }
        out
    }

    /// Next `n` events, sorted, for deliveries whose relative order is unspecified (replays).
    async fn take_sorted(&mut self, n: usize) -> Vec<String> {
        let mut out = self.take(n).await;
        out.sort();
        out
    }
}

fn describe(event: &Event<Node>) -> String {
    let id = |n: &Node| {
        format!(
            "{}@{}",
            n.metadata.name.as_deref().unwrap_or_default(),
            n.metadata.resource_version.as_deref().unwrap_or_default()
        )
    };
    match event {
        Event::Added(n) => format!("add {}", id(n)),
        Event::Updated { old, new } => {
            let same = if Arc::ptr_eq(old, new) { " (same)" } else { "" };
            format!(
                "update {}->{}{same}",
                id(old),
                new.metadata.resource_version.as_deref().unwrap_or_default()
            )
        }
        Event::Deleted(n) => format!("delete {}", id(n)),
    }
}

fn node(name: &str, rv: u64) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            resource_version: Some(rv.to_string()),
            managed_fields: Some(vec![ManagedFieldsEntry {
                manager: Some("kubelet".to_string()),
                ..Default::default()
            }]),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn labelled(name: &str, rv: u64, key: &str, value: &str) -> Node {
    let mut n = node(name, rv);
    n.metadata.labels = Some([(key.to_string(), value.to_string())].into());
    n
}
