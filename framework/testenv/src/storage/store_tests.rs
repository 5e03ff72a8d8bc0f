//! Store tests: slow watches, selector transitions, snapshots and the history's bounds.

use super::*;
use serde_json::json;

fn cm(name: &str, v: &str) -> Value {
    json!({"metadata": {"name": name, "namespace": "default", "labels": {"v": v}}})
}

#[test]
fn a_slow_watch_is_closed_instead_of_blocking_writers() {
    let store = Store::new(100, 2);
    let res = crate::api::kinds::lookup("", "v1", "configmaps").unwrap();
    let mut slow = store
        .with(|s| s.subscribe(res, Filter::default(), WatchStart::From(0)))
        .unwrap();
    for i in 0..5 {
        store.with(|s| s.put(res, cm(&format!("c{i}"), "a"), EventType::Added));
    }
    assert_eq!(
        store.with(|s| s.watch_count()),
        0,
        "the watch fell behind and was dropped"
    );
    // As upstream drops a closed watcher's buffer: nothing more, and its stream ends.
    assert!(slow.rx.try_recv().is_none());
}

#[test]
fn selector_transitions_become_added_and_deleted() {
    let store = Store::new(100, 100);
    let res = crate::api::kinds::lookup("", "v1", "configmaps").unwrap();
    let filter = Filter {
        labels: crate::storage::selectors::LabelSelector::parse("v=a").unwrap(),
        ..Default::default()
    };
    let mut sub = store
        .with(|s| s.subscribe(res, filter, WatchStart::From(0)))
        .unwrap();
    store.with(|s| {
        s.put(res, cm("c", "b"), EventType::Added);
        s.put(res, cm("c", "a"), EventType::Modified);
        s.put(res, cm("c", "a"), EventType::Modified);
        s.put(res, cm("c", "b"), EventType::Modified);
        s.remove(res, "default", "c");
    });
    let mut types = Vec::new();
    while let Some(e) = sub.rx.try_recv() {
        types.push(e.ty);
    }
    assert_eq!(
        types,
        [EventType::Added, EventType::Modified, EventType::Deleted]
    );
}

#[test]
fn snapshot_at_undoes_newer_history() {
    let store = Store::new(100, 100);
    let res = crate::api::kinds::lookup("", "v1", "configmaps").unwrap();
    store.with(|s| {
        s.put(res, cm("a", "1"), EventType::Added);
        s.put(res, cm("b", "1"), EventType::Added);
        s.put(res, cm("a", "2"), EventType::Modified);
        s.remove(res, "default", "b");
        s.put(res, cm("c", "1"), EventType::Added);
        let at2 = s.snapshot_at(res, 2);
        let labels: Vec<(&str, &str)> = at2
            .iter()
            .map(|((_, n), o)| (n.as_str(), o["metadata"]["labels"]["v"].as_str().unwrap()))
            .collect();
        assert_eq!(labels, [("a", "1"), ("b", "1")]);
    });
}

#[test]
fn history_is_bounded_in_bytes_and_older_watches_get_gone() {
    let store = Store::new(10_000, 100).history_bytes(10_000);
    let res = crate::api::kinds::lookup("", "v1", "configmaps").unwrap();
    let big = |name: &str| json!({"metadata": {"name": name, "namespace": "default"}, "data": {"k": "x".repeat(1_000)}});
    let start = store.with(|s| s.rv);
    for i in 0..30 {
        store.with(|s| s.put(res, big(&format!("c{i}")), EventType::Added));
    }
    let (kept, bytes, floor) = store.with(|s| (s.history.len(), s.history_bytes, s.floor));
    assert!(bytes <= 10_000, "{bytes} bytes kept");
    assert!((5..30).contains(&kept), "{kept} events kept");
    assert_eq!(floor, start + 30 - kept as u64);
    // The running count is the sum over what is kept.
    let counted: usize = store.with(|s| s.history.iter().map(|e| e.cost).sum());
    assert_eq!(counted, bytes);
    let from_start = store.with(|s| {
        s.subscribe(res, Filter::default(), WatchStart::From(start))
            .map(|_| ())
    });
    assert_eq!(
        from_start,
        Err(floor),
        "410 Gone from before the kept events"
    );
    let recent = store
        .with(|s| s.subscribe(res, Filter::default(), WatchStart::From(floor)))
        .unwrap();
    assert_eq!(recent.initial.len(), kept);
    // One event larger than the bound is kept alone, so a watch from just before it resumes.
    let huge = json!({"metadata": {"name": "h", "namespace": "default"}, "data": {"k": "x".repeat(20_000)}});
    store.with(|s| s.put(res, huge, EventType::Added));
    assert_eq!(store.with(|s| s.history.len()), 1);
}
