//! The `watch event` span each handler runs in: one per event, shared by every handler of that
//! event, a root, and labelled with where the event came from.

use std::collections::{BTreeMap, HashMap};

use kube_runtime::watcher;
use parking_lot::Mutex;
use tracing::span;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

use super::*;

/// What the layer saw of one span when it was opened.
#[derive(Clone, Debug)]
struct Opened {
    name: &'static str,
    root: bool,
    fields: BTreeMap<String, String>,
}

type Spans = Arc<Mutex<HashMap<span::Id, Opened>>>;

/// What a spying handler reports per event: the event, and the id and record of its span.
type Seen = (String, span::Id, Opened);

/// Remembers every span's name and fields by id. Ids are reused after a span closes, so the
/// entry for an id is only looked up while that span is alive (inside the handler).
struct SpanLog(Spans);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl tracing::field::Visit for Fields<'_> {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().to_string(), format!("{value:?}"));
    }
}

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> tracing_subscriber::Layer<S> for SpanLog {
    fn on_new_span(&self, attrs: &span::Attributes<'_>, id: &span::Id, _: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let opened = Opened {
            name: attrs.metadata().name(),
            root: attrs.is_root(),
            fields,
        };
        self.0.lock().insert(id.clone(), opened);
    }
}

/// A handler that reports, per event, `(event, span id, span)` of the span it runs in.
fn spying(
    spans: &Spans,
) -> (
    mpsc::UnboundedReceiver<Seen>,
    impl FnMut(&Event<Node>) + Send + 'static,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    let spans = Arc::clone(spans);
    let handler = move |event: &Event<Node>| {
        // Report a missing span as a failed lookup rather than panicking: the informer catches
        // handler panics, so an assertion here would only stall the test.
        let current = tracing::Span::current();
        let id = current.id().unwrap_or_else(|| span::Id::from_u64(u64::MAX));
        let opened = spans.lock().get(&id).cloned().unwrap_or(Opened {
            name: "(no span)",
            root: false,
            fields: BTreeMap::new(),
        });
        let _ = tx.send((describe(event), id, opened));
    };
    (rx, handler)
}

fn fields(opened: &Opened) -> Vec<(&str, &str)> {
    opened
        .fields
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

fn expected<'a>(
    ty: &'a str,
    source: &'a str,
    name: &'a str,
    rv: &'a str,
) -> Vec<(&'a str, &'a str)> {
    vec![
        ("event.source", source),
        ("event.type", ty),
        ("k8s.kind", "Node"),
        ("k8s.resource_version", rv),
        ("object.ref", name),
    ]
}

#[tokio::test(start_paused = true)]
async fn every_handler_runs_in_one_root_watch_event_span_per_event() {
    let spans: Spans = Arc::default();
    let subscriber = tracing_subscriber::registry().with(SpanLog(Arc::clone(&spans)));
    let _guard = tracing::subscriber::set_default(subscriber);
    // Callsites first seen by a test thread without a subscriber cached `never`.
    tracing::callsite::rebuild_interest_cache();

    let mut h = Harness::new();
    let (mut a, handler) = spying(&spans);
    let _ra = h
        .informer
        .add_handler_with_resync(handler, Duration::from_secs(30));
    let (mut b, handler) = spying(&spans);
    let _rb = h.informer.add_handler(handler);
    h.start();

    // Each event has one span, shared by both handlers, made as a root.
    let mut check = async |want: &str, fields_want: Vec<(&str, &str)>| {
        let (ea, ida, sa): Seen = a.recv().await.expect("a");
        let (eb, idb, _): Seen = b.recv().await.expect("b");
        assert_eq!(ea, want);
        assert_eq!(eb, want);
        assert_eq!(ida, idb, "one span per event, not per handler");
        assert_eq!(sa.name, "watch event");
        assert!(sa.root, "{sa:?} is a root");
        assert_eq!(fields(&sa), fields_want);
    };

    h.list(vec![node("n1", 1)]);
    check("add n1@1", expected("added", "list", "n1", "1")).await;
    h.send(watcher::Event::Apply(node("n1", 2)));
    check("update n1@1->2", expected("updated", "watch", "n1", "2")).await;
    // A relist that no longer holds n1: the delete carries the last cached state.
    h.list(vec![]);
    check("delete n1@2", expected("deleted", "relist", "n1", "2")).await;
    h.send(watcher::Event::Apply(node("n2", 3)));
    check("add n2@3", expected("added", "watch", "n2", "3")).await;

    // Resync is per handler: only `a` has a period.
    let (event, _, opened) = a.recv().await.expect("resync");
    assert_eq!(event, "update n2@3->3 (same)");
    assert_eq!(fields(&opened), expected("resync", "resync", "n2", "3"));

    // A handler registered inside another span still gets root spans for its replay.
    let outer = tracing::info_span!("outer");
    let (mut late, handler) = spying(&spans);
    let _rl = outer.in_scope(|| h.informer.add_handler(handler));
    let (event, _, opened) = late.recv().await.expect("replay");
    assert_eq!(event, "add n2@3");
    assert!(opened.root);
    assert_eq!(fields(&opened), expected("added", "replay", "n2", "3"));
}
