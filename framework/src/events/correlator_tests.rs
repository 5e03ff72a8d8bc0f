//! The correlator against client-go's numbers, on tokio's paused clock.

use k8s_openapi::api::core::v1::{EventSource, ObjectReference};

use super::*;

fn node(name: &str) -> ObjectReference {
    ObjectReference {
        kind: Some("Node".into()),
        name: Some(name.into()),
        uid: Some(format!("uid-{name}")),
        api_version: Some("v1".into()),
        ..ObjectReference::default()
    }
}

fn event(object: &str, reason: &str, message: &str) -> Event {
    let wall = Timestamp::now();
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{object}.{:x}", wall.as_nanosecond())),
            namespace: Some("default".into()),
            ..ObjectMeta::default()
        },
        involved_object: node(object),
        reason: Some(reason.into()),
        message: Some(message.into()),
        type_: Some("Normal".into()),
        count: Some(1),
        first_timestamp: Some(Time(wall)),
        last_timestamp: Some(Time(wall)),
        source: Some(EventSource {
            component: Some("cloud-node-controller".into()),
            host: None,
        }),
        ..Event::default()
    }
}

fn correlate(c: &mut EventCorrelator, e: Event) -> Correlation {
    c.correlate(e, Instant::now(), Timestamp::now())
}

fn created(c: Correlation) -> Event {
    match c {
        Correlation::Create(e) => e,
        other => panic!("expected create, got {other:?}"),
    }
}

fn patched(c: Correlation) -> (Event, serde_json::Value) {
    match c {
        Correlation::Patch { event, patch } => (event, patch),
        other => panic!("expected patch, got {other:?}"),
    }
}

/// The server's copy after a write: the same event with a resourceVersion.
fn written(mut e: Event, rv: &str) -> Event {
    e.metadata.resource_version = Some(rv.into());
    e
}

#[tokio::test(start_paused = true)]
async fn identical_events_become_one_event_with_a_count() {
    let mut c = EventCorrelator::default();
    let first = created(correlate(
        &mut c,
        event("n1", "Synced", "Node synced successfully"),
    ));
    c.update_state(&written(first.clone(), "7"));

    tokio::time::advance(Duration::from_secs(5)).await;
    let (second, patch) = patched(correlate(
        &mut c,
        event("n1", "Synced", "Node synced successfully"),
    ));
    assert_eq!(second.metadata.name, first.metadata.name, "same API object");
    assert_eq!(second.metadata.resource_version.as_deref(), Some("7"));
    assert_eq!(second.count, Some(2));
    assert_eq!(second.first_timestamp, first.first_timestamp);
    assert_eq!(patch["count"], 2);
    assert_eq!(patch["message"], "Node synced successfully");
    assert!(patch.get("lastTimestamp").is_some());

    let (third, _) = patched(correlate(
        &mut c,
        event("n1", "Synced", "Node synced successfully"),
    ));
    assert_eq!(third.count, Some(3));
}

#[tokio::test(start_paused = true)]
async fn a_different_message_is_a_different_event() {
    let mut c = EventCorrelator::default();
    created(correlate(&mut c, event("n1", "Synced", "a")));
    created(correlate(&mut c, event("n1", "Synced", "b")));
    created(correlate(&mut c, event("n2", "Synced", "a")));
}

#[tokio::test(start_paused = true)]
async fn the_tenth_distinct_message_is_combined() {
    let mut c = EventCorrelator::default();
    for i in 0..9 {
        let e = created(correlate(
            &mut c,
            event("svc", "SyncLoadBalancerFailed", &format!("error {i}")),
        ));
        assert_eq!(e.message.as_deref(), Some(format!("error {i}").as_str()));
    }
    let combined = created(correlate(
        &mut c,
        event("svc", "SyncLoadBalancerFailed", "error 9"),
    ));
    assert_eq!(
        combined.message.as_deref(),
        Some("(combined from similar events): error 9")
    );
    assert_eq!(combined.count, Some(1));
    assert_eq!(combined.reason.as_deref(), Some("SyncLoadBalancerFailed"));

    let (again, patch) = patched(correlate(
        &mut c,
        event("svc", "SyncLoadBalancerFailed", "error 10"),
    ));
    assert_eq!(again.metadata.name, combined.metadata.name);
    assert_eq!(again.count, Some(2));
    assert_eq!(patch["message"], "(combined from similar events): error 10");

    // A different reason is aggregated separately.
    created(correlate(
        &mut c,
        event("svc", "EnsuringLoadBalancer", "error 0"),
    ));
}

#[tokio::test(start_paused = true)]
async fn aggregation_starts_over_after_ten_quiet_minutes() {
    let mut c = EventCorrelator::default();
    for i in 0..9 {
        created(correlate(&mut c, event("svc", "R", &format!("m{i}"))));
    }
    tokio::time::advance(AGGREGATE_INTERVAL + Duration::from_secs(1)).await;
    let e = created(correlate(&mut c, event("svc", "R", "m9")));
    assert_eq!(
        e.message.as_deref(),
        Some("m9"),
        "window expired: not combined"
    );
}

#[tokio::test(start_paused = true)]
async fn spam_filter_allows_a_burst_of_25_then_one_per_five_minutes() {
    let mut c = EventCorrelator::default();
    let mut accepted = 0;
    for i in 0..40 {
        // Identical events are still subject to the spam filter.
        if correlate(&mut c, event("n1", "Synced", &format!("m{}", i % 2))) != Correlation::Skip {
            accepted += 1;
        }
    }
    assert_eq!(accepted, 25);

    tokio::time::advance(Duration::from_secs(299)).await;
    assert_eq!(
        correlate(&mut c, event("n1", "Synced", "m0")),
        Correlation::Skip
    );
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_ne!(
        correlate(&mut c, event("n1", "Synced", "m0")),
        Correlation::Skip
    );
    assert_eq!(
        correlate(&mut c, event("n1", "Synced", "m0")),
        Correlation::Skip
    );

    // Another object has its own bucket.
    assert_ne!(
        correlate(&mut c, event("n2", "Synced", "m0")),
        Correlation::Skip
    );
}

#[tokio::test(start_paused = true)]
async fn update_state_keeps_the_servers_name_for_the_next_patch() {
    let mut c = EventCorrelator::default();
    let first = created(correlate(&mut c, event("n1", "Synced", "x")));
    let mut server = written(first, "9");
    server.metadata.name = Some("n1.server-chosen".into());
    c.update_state(&server);
    let (second, _) = patched(correlate(&mut c, event("n1", "Synced", "x")));
    assert_eq!(second.metadata.name.as_deref(), Some("n1.server-chosen"));
    assert_eq!(second.metadata.resource_version.as_deref(), Some("9"));
}
