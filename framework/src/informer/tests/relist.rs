//! Relists (initial list, and after a 410 Gone or reconnect) are delivered as a diff.

use kube_runtime::watcher;

use super::*;

#[tokio::test]
async fn relist_reports_added_changed_unchanged_and_vanished_objects() {
    let mut h = Harness::new();
    let (mut a, _r) = h.record();
    h.start();
    h.list(vec![node("keep", 1), node("change", 1), node("vanish", 1)]);
    assert_eq!(a.take(3).await.len(), 3);

    // The watch broke (e.g. 410 Gone); kube-runtime's watcher relists.
    h.list(vec![node("keep", 1), node("change", 2), node("new", 3)]);
    assert_eq!(
        a.take(4).await,
        [
            "update keep@1->1 (same)",
            "update change@1->2",
            "add new@3",
            "delete vanish@1",
        ]
    );
    let mut names: Vec<_> = h
        .informer
        .store()
        .list()
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    names.sort();
    assert_eq!(names, ["change", "keep", "new"]);
}

#[tokio::test]
async fn an_interrupted_relist_is_discarded_and_the_next_one_applies() {
    let mut h = Harness::new();
    let (mut a, _r) = h.record();
    h.start();
    h.list(vec![node("a", 1), node("b", 1)]);
    assert_eq!(a.take(2).await.len(), 2);

    // A list that fails half-way restarts with a fresh Init; its partial items must not count.
    h.send(watcher::Event::Init);
    h.send(watcher::Event::InitApply(node("partial", 2)));
    h.fail();
    h.list(vec![node("a", 1)]);
    assert_eq!(a.take(2).await, ["update a@1->1 (same)", "delete b@1"]);
    assert!(h.informer.store().get_by_name("partial").is_none());
}
