//! The event recorder end to end against the embedded API server, observed through `Api<Event>`.

use controller_manager::events::{EventRecorder, EventType};
use k8s_openapi::api::core::v1::{Event, ObjectReference};
use kube::Api;
use kube::api::{DeleteParams, ListParams};
use kube_testenv::TestEnv;

fn node(name: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: Some(name.into()),
        uid: Some(format!("uid-{name}")),
        ..ObjectReference::default()
    }
}

fn service(namespace: &str, name: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Service".into()),
        name: Some(name.into()),
        namespace: Some(namespace.into()),
        uid: Some(format!("uid-{name}")),
        ..ObjectReference::default()
    }
}

async fn events_about(env: &TestEnv, namespace: &str, object: &str) -> Vec<Event> {
    let api: Api<Event> = Api::namespaced(env.client(), namespace);
    let mut items: Vec<Event> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(object))
        .collect();
    items.sort_by_key(|e| e.metadata.creation_timestamp.clone().map(|t| t.0));
    items
}

/// How many Events were created or patched.
fn event_writes(env: &TestEnv) -> usize {
    let writes = env
        .requests()
        .into_iter()
        .filter(|r| r.resource == "events");
    writes
        .filter(|r| r.verb == "create" || r.verb == "patch")
        .count()
}

#[tokio::test]
async fn identical_events_are_one_event_with_a_count() {
    let env = TestEnv::start().await.unwrap();
    let rec = EventRecorder::new(env.client(), "cloud-node-controller", None);
    let synced = || {
        rec.event(
            &node("n1"),
            EventType::Normal,
            "Synced",
            "Node synced successfully",
        )
    };
    // Recorded back to back, the repeats wait in the queue together: one create, count 3.
    for _ in 0..3 {
        synced();
    }
    rec.flush().await;
    // Recorded one by one after that, each repeat patches the count (client-go's way).
    for _ in 0..2 {
        synced();
        rec.flush().await;
    }

    let events = events_about(&env, "default", "n1").await;
    assert_eq!(events.len(), 1, "{events:#?}");
    let e = &events[0];
    assert_eq!(e.count, Some(5));
    assert_eq!(e.reason.as_deref(), Some("Synced"));
    assert_eq!(e.type_.as_deref(), Some("Normal"));
    assert_eq!(e.message.as_deref(), Some("Node synced successfully"));
    assert_eq!(
        e.source.as_ref().and_then(|s| s.component.as_deref()),
        Some("cloud-node-controller")
    );
    assert_eq!(e.involved_object.kind.as_deref(), Some("Node"));
    let verbs: Vec<String> = env
        .requests()
        .into_iter()
        .filter(|r| r.resource == "events" && r.verb != "list")
        .map(|r| r.verb)
        .collect();
    assert_eq!(verbs, vec!["create", "patch", "patch"]);
    assert_eq!(rec.dropped() + rec.spam_filtered(), 0);
}

#[tokio::test]
async fn namespaced_objects_get_events_in_their_namespace() {
    let env = TestEnv::start().await.unwrap();
    let rec = EventRecorder::new(env.client(), "service-controller", Some("host-a".into()));
    rec.event(
        &service("kube-system", "lb"),
        EventType::Warning,
        "SyncLoadBalancerFailed",
        "cloud said no",
    );
    rec.flush().await;
    let events = events_about(&env, "kube-system", "lb").await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].type_.as_deref(), Some("Warning"));
    assert_eq!(
        events[0].source.as_ref().and_then(|s| s.host.as_deref()),
        Some("host-a")
    );
    assert!(events_about(&env, "default", "lb").await.is_empty());
}

#[tokio::test]
async fn similar_events_are_combined_after_ten_messages() {
    let env = TestEnv::start().await.unwrap();
    let rec = EventRecorder::new(env.client(), "service-controller", None);
    let svc = service("default", "web");
    for i in 0..12 {
        rec.event(
            &svc,
            EventType::Warning,
            "SyncLoadBalancerFailed",
            format!("attempt {i} failed"),
        );
    }
    rec.flush().await;

    let events = events_about(&env, "default", "web").await;
    let (combined, single): (Vec<_>, Vec<_>) = events.into_iter().partition(|e| {
        e.message
            .as_deref()
            .is_some_and(|m| m.starts_with("(combined from similar events): "))
    });
    assert_eq!(single.len(), 9, "{single:#?}");
    assert_eq!(combined.len(), 1, "{combined:#?}");
    assert_eq!(combined[0].count, Some(3), "messages 10, 11 and 12");
    assert_eq!(
        combined[0].message.as_deref(),
        Some("(combined from similar events): attempt 11 failed")
    );
}

#[tokio::test]
async fn a_repeat_of_a_deleted_event_creates_it_again() {
    let env = TestEnv::start().await.unwrap();
    let rec = EventRecorder::new(env.client(), "cloud-node-controller", None);
    rec.event(&node("n2"), EventType::Normal, "Synced", "ok");
    rec.flush().await;
    let first = events_about(&env, "default", "n2").await.remove(0);
    let api: Api<Event> = Api::namespaced(env.client(), "default");
    api.delete(
        first.metadata.name.as_deref().unwrap(),
        &DeleteParams::default(),
    )
    .await
    .unwrap();

    rec.event(&node("n2"), EventType::Normal, "Synced", "ok");
    rec.flush().await;
    let events = events_about(&env, "default", "n2").await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].count, Some(2));
    assert_eq!(events[0].metadata.name, first.metadata.name);
}

#[tokio::test]
async fn the_spam_filter_caps_one_object_at_25_writes() {
    let env = TestEnv::start().await.unwrap();
    let rec = EventRecorder::new(env.client(), "cloud-node-controller", None);
    for i in 0..30 {
        rec.event(
            &node("n3"),
            EventType::Normal,
            "Synced",
            format!("m{}", i % 3),
        );
        // One at a time, so no repeat is folded into a waiting one.
        rec.flush().await;
    }
    let writes = event_writes(&env);
    assert_eq!(writes, 25);
    let total: i32 = events_about(&env, "default", "n3")
        .await
        .iter()
        .filter_map(|e| e.count)
        .sum();
    assert_eq!(total, 25);
    assert_eq!(rec.spam_filtered(), 5, "counted, not only logged");
}

#[tokio::test]
async fn a_burst_of_repeats_is_a_bounded_number_of_writes() {
    let env = TestEnv::start().await.unwrap();
    let rec = EventRecorder::new(env.client(), "service-controller", None);
    // 300 load balancers each updated 20 times in a burst (upstream's node-sync storm).
    for _ in 0..20 {
        for i in 0..300 {
            rec.event(
                &service("default", &format!("lb-{i}")),
                EventType::Normal,
                "UpdatedLoadBalancer",
                "Updated load balancer with new hosts",
            );
        }
    }
    rec.flush().await;
    let writes = event_writes(&env);
    assert_eq!(writes, 300, "one write per load balancer");
    let events = Api::<Event>::namespaced(env.client(), "default")
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(events.items.iter().all(|e| e.count == Some(20)));
    assert_eq!(rec.dropped() + rec.spam_filtered(), 0, "nothing lost");
}
