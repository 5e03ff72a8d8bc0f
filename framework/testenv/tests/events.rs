//! kube-runtime's event Recorder against the server: create, then a merge patch for the series,
//! stored in events.k8s.io/v1 and filterable by field selector.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event as EventV1;
use kube::api::{Api, ListParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube_testenv::TestEnv;

#[tokio::test]
async fn recorder_creates_then_patches_a_series() {
    let env = TestEnv::start().await.unwrap();
    let reporter = Reporter {
        controller: "cloud-node-controller".into(),
        instance: None,
    };
    let recorder = Recorder::new(env.client(), reporter);
    let reference = ObjectReference {
        kind: Some("Node".into()),
        name: Some("n1".into()),
        api_version: Some("v1".into()),
        ..Default::default()
    };
    let ev = Event {
        type_: EventType::Normal,
        reason: "Synced".into(),
        note: Some("ok".into()),
        action: "Sync".into(),
        secondary: None,
    };
    recorder.publish(&ev, &reference).await.unwrap();
    recorder.publish(&ev, &reference).await.unwrap();
    let events: Api<EventV1> = Api::namespaced(env.client(), "default");
    let list = events
        .list(&ListParams::default().fields("regarding.name=n1,reason=Synced"))
        .await
        .unwrap();
    assert_eq!(list.items.len(), 1);
    assert_eq!(list.items[0].series.as_ref().map(|s| s.count), Some(2));
    let verbs: Vec<String> = env
        .requests()
        .into_iter()
        .filter(|r| r.resource == "events")
        .map(|r| r.verb)
        .collect();
    assert_eq!(verbs, ["create", "patch", "list"]);
}
