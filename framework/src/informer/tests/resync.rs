//! Periodic resync under tokio's paused clock.

use kube_runtime::watcher;

use super::*;

#[tokio::test(start_paused = true)]
async fn resync_redelivers_the_cache_per_handler_period_as_same_object_updates() {
    let mut h = Harness::new();
    let (mut resyncing, handler) = Recorder::new();
    let _r1 = h
        .informer
        .add_handler_with_resync(handler, Duration::from_secs(30));
    let (mut plain, _r2) = h.record();
    let t0 = Instant::now();
    h.start();
    h.list(vec![node("a", 1), node("b", 1)]);
    assert_eq!(resyncing.take_sorted(2).await, ["add a@1", "add b@1"]);
    assert_eq!(plain.take(2).await.len(), 2);

    let (first, at) = resyncing.next_at().await;
    assert_eq!(at - t0, Duration::from_secs(30));
    let second = resyncing.next().await;
    let mut resynced = vec![first, second];
    resynced.sort();
    assert_eq!(resynced, ["update a@1->1 (same)", "update b@1->1 (same)"]);
    let (_, at) = resyncing.next_at().await;
    assert_eq!(
        at - t0,
        Duration::from_secs(60),
        "resync repeats every period"
    );

    // The handler without a resync period only sees real changes.
    h.send(watcher::Event::Apply(node("c", 2)));
    assert_eq!(plain.next().await, "add c@2");
}

#[tokio::test(start_paused = true)]
async fn resync_below_one_second_is_raised_to_one_second_and_zero_disables_it() {
    let mut h = Harness::with_default_resync(Some(Duration::from_secs(3600)));
    let (mut fast, handler) = Recorder::new();
    let _r1 = h
        .informer
        .add_handler_with_resync(handler, Duration::from_millis(10));
    let (mut off, handler) = Recorder::new();
    let _r2 = h.informer.add_handler_with_resync(handler, Duration::ZERO);
    let (mut default, _r3) = h.record();
    let t0 = Instant::now();
    h.start();
    h.list(vec![node("a", 1)]);
    assert_eq!(fast.next().await, "add a@1");
    assert_eq!(off.next().await, "add a@1");
    assert_eq!(default.next().await, "add a@1");

    let (event, at) = fast.next_at().await;
    assert_eq!(event, "update a@1->1 (same)");
    assert_eq!(at - t0, Duration::from_secs(1));

    let (event, at) = default.next_at().await;
    assert_eq!(event, "update a@1->1 (same)");
    assert_eq!(
        at - t0,
        Duration::from_secs(3600),
        "add_handler uses the factory default"
    );

    h.send(watcher::Event::Apply(node("a", 2)));
    assert_eq!(
        off.next().await,
        "update a@1->2",
        "period zero never resyncs"
    );
}

#[tokio::test(start_paused = true)]
async fn resync_is_ordered_with_real_events() {
    let mut h = Harness::new();
    let (mut rec, handler) = Recorder::new();
    let _r = h
        .informer
        .add_handler_with_resync(handler, Duration::from_secs(5));
    h.start();
    h.list(vec![node("a", 1)]);
    assert_eq!(rec.next().await, "add a@1");
    h.send(watcher::Event::Apply(node("a", 2)));
    assert_eq!(rec.next().await, "update a@1->2");
    // The resync reads the store under the dispatch lock, so it shows the latest state.
    assert_eq!(rec.next().await, "update a@2->2 (same)");
}
