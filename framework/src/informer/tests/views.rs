//! Views: one informer read as its stored type, as metadata only, and as `DynamicObject`; and an
//! informer of several parts (one watch per namespace) into one store.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::core::{DynamicObject, PartialObjectMeta};
use kube_runtime::watcher;

use super::*;
use crate::informer::{ObjectKey, Store};

fn metadata_view(h: &Harness) -> Informer<PartialObjectMeta<Node>> {
    Informer::view_of(Arc::clone(&h.informer.shared))
}

#[tokio::test]
async fn a_metadata_view_of_a_full_informer_reads_the_objects_metadata() {
    let mut h = Harness::new();
    let meta = metadata_view(&h);
    meta.add_index("zone", |m: &PartialObjectMeta<Node>| {
        m.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("zone").cloned())
            .into_iter()
            .collect()
    })
    .expect("index on a metadata view");
    let (tx, mut rx) = mpsc::unbounded_channel();
    let _r = meta.add_handler(move |e: &Event<PartialObjectMeta<Node>>| {
        let same = matches!(e, Event::Updated { old, new } if Arc::ptr_eq(old, new));
        let _ = tx.send((e.object().metadata.name.clone(), same));
    });
    h.start();
    h.list(vec![labelled("a", 1, "zone", "z1")]);
    assert_eq!(rx.recv().await, Some((Some("a".to_string()), false)));

    let stored: Store<PartialObjectMeta<Node>> = meta.store();
    let a = stored.get_by_name("a").expect("projected");
    assert_eq!(
        a.types.as_ref().map(|t| t.kind.as_str()),
        Some("PartialObjectMetadata")
    );
    assert!(
        a.metadata.managed_fields.is_none(),
        "the default transform ran once, for all views"
    );
    assert_eq!(stored.by_index("zone", "z1").len(), 1);
    // The full view still shares the stored object.
    let full = h.informer.store();
    assert!(Arc::ptr_eq(
        &full.get_by_name("a").expect("a"),
        &full.get_by_name("a").expect("a")
    ));

    // An unchanged relist re-delivers one projection as both old and new.
    h.list(vec![labelled("a", 1, "zone", "z1")]);
    assert_eq!(rx.recv().await, Some((Some("a".to_string()), true)));
}

#[tokio::test]
async fn a_dynamic_view_of_a_typed_informer_reads_whole_objects() {
    let mut h = Harness::new();
    let dynamic: Informer<DynamicObject> = Informer::view_of(Arc::clone(&h.informer.shared));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let _r = dynamic.add_handler(move |e: &Event<DynamicObject>| {
        let _ = tx.send(e.object().data.clone());
    });
    h.start();
    let mut n = node("a", 1);
    n.spec = Some(k8s_openapi::api::core::v1::NodeSpec {
        provider_id: Some("fake://a".to_string()),
        ..Default::default()
    });
    h.list(vec![n]);
    let data = rx.recv().await.expect("event");
    assert_eq!(data["spec"]["providerID"], "fake://a");
    let stored = dynamic.store().get_by_name("a").expect("converted");
    assert_eq!(stored.types.as_ref().map(|t| t.kind.as_str()), Some("Node"));
}

#[tokio::test]
async fn a_metadata_views_transform_applies_to_whatever_is_stored() {
    let mut h = Harness::new();
    metadata_view(&h)
        .set_transform(|m: &mut PartialObjectMeta<Node>| {
            m.metadata.annotations = Some([("seen".to_string(), "yes".to_string())].into());
        })
        .expect("before start");
    let (mut a, _r) = h.record();
    h.start();
    h.list(vec![node("a", 1)]);
    assert_eq!(a.next().await, "add a@1");
    let stored = h.informer.store().get_by_name("a").expect("cached");
    assert_eq!(
        stored.metadata.annotations.as_ref().map(|a| a.len()),
        Some(1)
    );
    assert!(
        stored.metadata.managed_fields.is_some(),
        "a transform replaces the default"
    );
}

type CmItem = Result<watcher::Event<ConfigMap>, watcher::Error>;

fn cm(namespace: &str, name: &str, rv: u64) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            namespace: Some(namespace.to_string()),
            name: Some(name.to_string()),
            resource_version: Some(rv.to_string()),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn list(feed: &fmpsc::UnboundedSender<CmItem>, items: Vec<ConfigMap>) {
    let send = |e| feed.unbounded_send(Ok(e)).expect("driver gone");
    send(watcher::Event::Init);
    for item in items {
        send(watcher::Event::InitApply(item));
    }
    send(watcher::Event::InitDone);
}

#[tokio::test]
async fn parts_list_their_own_namespace_and_sync_together() {
    let informer: Informer<ConfigMap> =
        Informer::new("ConfigMap".to_string(), InformerScope::all(), None);
    let shared = Arc::clone(&informer.shared);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let _r = informer.add_handler(move |e: &Event<ConfigMap>| {
        let verb = match e {
            Event::Added(_) => "add",
            Event::Updated { .. } => "update",
            Event::Deleted(_) => "delete",
        };
        let _ = tx.send(format!(
            "{verb} {}",
            ObjectKey::from_object(e.object().as_ref())
        ));
    });
    let shutdown = CancellationToken::new();
    shared.mark_started().expect("start");
    let rt = shared
        .run(&[Some("a".to_string()), Some("b".to_string())], &shutdown)
        .expect("runtime");
    let (feed_a, rx_a) = fmpsc::unbounded();
    let (feed_b, rx_b) = fmpsc::unbounded();
    let transform = shared.transform_for::<ConfigMap>().expect("transform");
    shared.drive(&rt, 0, rx_a, Arc::clone(&transform));
    shared.drive(&rt, 1, rx_b, transform);

    list(&feed_a, vec![cm("a", "x", 1), cm("a", "y", 1)]);
    assert_eq!(rx.recv().await.as_deref(), Some("add a/x"));
    assert_eq!(rx.recv().await.as_deref(), Some("add a/y"));
    assert!(!informer.has_synced(), "part b has not listed");
    list(&feed_b, vec![cm("b", "z", 1)]);
    assert!(informer.wait_for_sync().await);
    assert_eq!(rx.recv().await.as_deref(), Some("add b/z"));

    // A relist of part a drops a's vanished objects only.
    list(&feed_a, vec![cm("a", "x", 1)]);
    assert_eq!(rx.recv().await.as_deref(), Some("update a/x"));
    assert_eq!(rx.recv().await.as_deref(), Some("delete a/y"));
    let mut keys: Vec<String> = informer
        .store()
        .keys()
        .iter()
        .map(ToString::to_string)
        .collect();
    keys.sort();
    assert_eq!(keys, ["a/x", "b/z"]);
}
