//! Transforms and indexes, which shape what the store holds.

use kube_runtime::watcher;

use super::*;
use crate::informer::{InformerError, NAMESPACE_INDEX};

#[tokio::test]
async fn default_transform_drops_managed_fields_before_storing() {
    let mut h = Harness::new();
    let (mut a, _r) = h.record();
    h.start();
    h.list(vec![node("a", 1)]);
    assert_eq!(a.next().await, "add a@1");
    let stored = h.informer.store().get_by_name("a").expect("cached");
    assert!(stored.metadata.managed_fields.is_none());
}

#[tokio::test]
async fn custom_transform_replaces_the_default_and_is_locked_after_start() {
    let mut h = Harness::new();
    h.informer
        .set_transform(|n: &mut Node| {
            n.metadata.annotations = Some([("seen".to_string(), "yes".to_string())].into());
        })
        .expect("before start");
    let (mut a, _r) = h.record();
    h.start();
    h.list(vec![node("a", 1)]);
    assert_eq!(a.next().await, "add a@1");
    let stored = h.informer.store().get_by_name("a").expect("cached");
    assert_eq!(
        stored
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("seen"))
            .map(String::as_str),
        Some("yes")
    );
    assert!(
        stored.metadata.managed_fields.is_some(),
        "a custom transform replaces the default"
    );

    let err = h
        .informer
        .set_transform(|_: &mut Node| {})
        .expect_err("after start");
    assert!(matches!(err, InformerError::AlreadyStarted { .. }));
    let err = h
        .informer
        .add_index("x", |_: &Node| vec![])
        .expect_err("after start");
    assert!(matches!(err, InformerError::AlreadyStarted { .. }));
}

#[tokio::test]
async fn indexes_follow_updates_and_deletes() {
    let mut h = Harness::new();
    h.informer
        .add_index("zone", |n: &Node| {
            n.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("zone").cloned())
                .into_iter()
                .collect()
        })
        .expect("index");
    assert!(matches!(
        h.informer.add_index(NAMESPACE_INDEX, |_: &Node| vec![]),
        Err(InformerError::IndexExists { .. })
    ));
    let (mut a, _r) = h.record();
    h.start();
    h.list(vec![
        labelled("a", 1, "zone", "z1"),
        labelled("b", 1, "zone", "z1"),
    ]);
    assert_eq!(a.take(2).await.len(), 2);
    let store = h.informer.store();
    let names = |zone: &str| {
        let mut v: Vec<_> = store
            .by_index("zone", zone)
            .iter()
            .filter_map(|n| n.metadata.name.clone())
            .collect();
        v.sort();
        v
    };
    assert_eq!(names("z1"), ["a", "b"]);

    h.send(watcher::Event::Apply(labelled("a", 2, "zone", "z2")));
    h.send(watcher::Event::Delete(labelled("b", 3, "zone", "z1")));
    assert_eq!(a.take(2).await.len(), 2);
    assert!(names("z1").is_empty());
    assert_eq!(names("z2"), ["a"]);
    // Cluster-scoped objects are filed under the empty namespace, as in client-go.
    assert_eq!(store.by_index(NAMESPACE_INDEX, "").len(), 1);
    assert!(store.by_index("no-such-index", "z2").is_empty());

    // A relist rebuilds the index from the new list.
    h.list(vec![labelled("c", 4, "zone", "z1")]);
    assert_eq!(a.take(2).await.len(), 2);
    assert_eq!(names("z1"), ["c"]);
    assert!(names("z2").is_empty());
}
