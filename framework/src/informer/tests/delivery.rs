//! Fan-out: order per handler, late registration, isolation of slow handlers, removal.

use std::collections::HashSet;

use kube_runtime::watcher;

use super::*;

#[tokio::test]
async fn handlers_see_adds_updates_and_deletes_in_order_after_the_store() {
    let mut h = Harness::new();
    let (mut a, reg_a) = h.record();
    let (mut b, _reg_b) = h.record();
    h.start();
    h.list(vec![node("a", 1), node("b", 1)]);
    h.send(watcher::Event::Apply(node("a", 2)));
    h.send(watcher::Event::Delete(node("b", 3)));

    let expected = ["add a@1", "add b@1", "update a@1->2", "delete b@3"];
    assert_eq!(a.take(4).await, expected);
    assert_eq!(b.take(4).await, expected);
    // The store is written before events are queued, so it is current by now.
    let store = h.informer.store();
    assert_eq!(store.len(), 1);
    assert_eq!(
        store
            .get_by_name("a")
            .and_then(|n| n.metadata.resource_version.clone())
            .as_deref(),
        Some("2")
    );
    assert!(store.get_by_name("b").is_none());
    assert!(h.informer.has_synced());
    assert!(reg_a.has_synced());
}

#[tokio::test]
async fn registration_is_synced_only_after_its_initial_list_is_processed() {
    let mut h = Harness::new();
    let (mut a, reg) = h.record();
    assert!(!reg.has_synced());
    h.start();
    h.send(watcher::Event::Init);
    h.send(watcher::Event::InitApply(node("a", 1)));
    h.send(watcher::Event::InitDone);
    assert_eq!(a.next().await, "add a@1");
    assert!(reg.wait_for_sync().await);
    assert!(reg.has_synced());
}

#[tokio::test]
async fn late_handler_gets_current_contents_as_adds_then_later_changes() {
    let mut h = Harness::new();
    let (mut early, _r1) = h.record();
    h.start();
    h.list(vec![node("a", 1), node("b", 1)]);
    h.send(watcher::Event::Delete(node("b", 2)));
    h.send(watcher::Event::Apply(node("c", 3)));
    assert_eq!(early.take(4).await.len(), 4);

    let (mut late, reg) = h.record();
    assert_eq!(late.take_sorted(2).await, ["add a@1", "add c@3"]);
    h.send(watcher::Event::Apply(node("a", 4)));
    assert_eq!(late.next().await, "update a@1->4");
    assert!(reg.has_synced());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_registration_during_a_burst_has_no_gap_and_no_duplicate() {
    let mut h = Harness::new();
    h.start();
    h.list(vec![]);
    assert!(h.informer.wait_for_sync().await);
    const N: u64 = 2000;
    let feeder = {
        let feed = h.feed.clone();
        std::thread::spawn(move || {
            for i in 0..N {
                let _ =
                    feed.unbounded_send(Ok(watcher::Event::Apply(node(&format!("n{i}"), i + 1))));
            }
        })
    };
    // Register while the burst is being applied.
    tokio::task::yield_now().await;
    let (mut late, _reg) = h.record();
    feeder.join().expect("feeder");

    // A sentinel applied after the burst: everything before it is replay or burst.
    h.send(watcher::Event::Apply(node("sentinel", N + 1)));
    let mut seen = HashSet::new();
    loop {
        let event = tokio::time::timeout(Duration::from_secs(10), late.next())
            .await
            .expect("no gap: every object arrives");
        if event.starts_with("add sentinel@") {
            break;
        }
        let name = event
            .strip_prefix("add ")
            .unwrap_or_else(|| panic!("only adds expected, got {event}"))
            .split('@')
            .next()
            .unwrap_or_default()
            .to_string();
        assert!(seen.insert(name), "duplicate delivery: {event}");
    }
    assert_eq!(
        seen.len(),
        N as usize,
        "no gap: every object before the sentinel"
    );
    assert_eq!(h.informer.store().len(), N as usize + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_handler_blocks_neither_the_watch_nor_other_handlers() {
    let mut h = Harness::new();
    let (gate_tx, gate_rx) = std::sync::mpsc::channel::<()>();
    let (slow_tx, mut slow_rx) = mpsc::unbounded_channel();
    let mut first = true;
    let _slow = h.informer.add_handler(move |e: &Event<Node>| {
        if std::mem::take(&mut first) {
            // Stuck until the test opens the gate; block_in_place keeps the stall off the
            // scheduler so only this handler's task waits.
            let _ = tokio::task::block_in_place(|| gate_rx.recv());
        }
        let _ = slow_tx.send(describe(e));
    });
    let (mut fast, _fast_reg) = h.record();
    h.start();
    h.list(vec![node("a", 1)]);
    for rv in 2..=200 {
        h.send(watcher::Event::Apply(node("a", rv)));
    }
    let fast_seen = fast.take(200).await;
    assert_eq!(
        fast_seen.last().map(String::as_str),
        Some("update a@199->200")
    );
    assert_eq!(
        h.informer
            .store()
            .get_by_name("a")
            .and_then(|n| n.metadata.resource_version.clone())
            .as_deref(),
        Some("200")
    );
    assert!(
        slow_rx.try_recv().is_err(),
        "slow handler should still be stuck"
    );

    gate_tx.send(()).expect("gate");
    let mut slow_seen = Vec::new();
    for _ in 0..200 {
        slow_seen.push(slow_rx.recv().await.expect("slow handler"));
    }
    assert_eq!(
        slow_seen, fast_seen,
        "the slow handler gets the same events in the same order"
    );
}

#[tokio::test]
async fn removed_handler_stops_receiving_and_detached_one_keeps_going() {
    let mut h = Harness::new();
    let (mut removed, reg_removed) = h.record();
    let (mut dropped, reg_dropped) = h.record();
    let (mut detached, reg_detached) = h.record();
    let (mut witness, _w) = h.record();
    h.start();
    h.list(vec![node("a", 1)]);
    for rec in [&mut removed, &mut dropped, &mut detached, &mut witness] {
        assert_eq!(rec.next().await, "add a@1");
    }
    reg_removed.remove();
    drop(reg_dropped);
    reg_detached.detach();
    h.send(watcher::Event::Apply(node("b", 2)));
    assert_eq!(witness.next().await, "add b@2");
    assert_eq!(detached.next().await, "add b@2");
    // A removed handler's task ends and drops the handler, closing the recorder.
    assert!(removed.rx.recv().await.is_none());
    assert!(dropped.rx.recv().await.is_none());
}

#[tokio::test]
async fn a_panicking_handler_keeps_receiving_later_events() {
    let mut h = Harness::new();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let _reg = h.informer.add_handler(move |e: &Event<Node>| {
        if e.object().metadata.name.as_deref() == Some("boom") {
            panic!("handler bug");
        }
        let _ = tx.send(describe(e));
    });
    h.start();
    h.list(vec![node("boom", 1)]);
    h.send(watcher::Event::Apply(node("a", 2)));
    assert_eq!(rx.recv().await.as_deref(), Some("add a@2"));
}

#[tokio::test]
async fn watch_errors_are_counted_and_do_not_stop_the_informer() {
    let mut h = Harness::new();
    let (mut a, _r) = h.record();
    h.start();
    h.fail();
    h.list(vec![node("a", 1)]);
    h.fail();
    h.send(watcher::Event::Apply(node("a", 2)));
    assert_eq!(a.take(2).await, ["add a@1", "update a@1->2"]);
    assert_eq!(h.informer.watch_errors(), 2);
}

#[tokio::test]
async fn shutdown_before_sync_releases_waiters_and_ends_handlers() {
    let mut h = Harness::new();
    let (mut a, reg) = h.record();
    h.start();
    h.shutdown.cancel();
    assert!(!h.informer.wait_for_sync().await);
    assert!(
        a.rx.recv().await.is_none(),
        "handler task ends once the informer stops"
    );
    assert!(!reg.has_synced());
}

#[tokio::test]
async fn delete_of_an_uncached_object_is_not_delivered() {
    let mut h = Harness::new();
    let (mut a, _r) = h.record();
    h.start();
    h.list(vec![]);
    h.send(watcher::Event::Delete(node("ghost", 5)));
    h.send(watcher::Event::Apply(node("a", 6)));
    assert_eq!(a.next().await, "add a@6");
}

#[tokio::test]
async fn handlers_learn_whether_an_event_is_fresh_or_a_re_delivery() {
    use crate::informer::{EventSource, WithSource};
    let mut h = Harness::new();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let early_tx = tx.clone();
    h.informer
        .add_handler(WithSource(move |e: &Event<Node>, source| {
            let _ = early_tx.send(("early", describe(e), source));
        }))
        .detach();
    h.start();
    h.list(vec![node("a", 1)]);
    h.send(watcher::Event::Apply(node("b", 2)));
    h.list(vec![node("a", 1), node("b", 2)]);
    let mut seen = Vec::new();
    for _ in 0..4 {
        seen.push(rx.recv().await.unwrap().2);
    }
    assert_eq!(
        seen,
        [
            EventSource::List,
            EventSource::Watch,
            EventSource::Relist,
            EventSource::Relist
        ]
    );
    h.informer
        .add_handler(WithSource(move |e: &Event<Node>, source| {
            let _ = tx.send(("late", describe(e), source));
        }))
        .detach();
    let (_, _, source) = rx.recv().await.unwrap();
    assert_eq!(source, EventSource::Replay);
    assert!(!source.is_fresh() && EventSource::Watch.is_fresh());
}
