//! Fault injection and the request log: injected 500 / 429 + Retry-After, random failures,
//! latency (under a paused clock), and the recorded verbs.

mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams, PostParams};
use kube_testenv::TestEnv;
use serde_json::json;
use support::cluster_with;

fn node(name: &str) -> Node {
    serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()
}

fn code(e: kube::Error) -> (u16, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.reason.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// A client without kube's built-in retry of 429/503/504, to see every injected failure.
fn no_retry_client(env: &TestEnv) -> kube::Client {
    let mut cfg = env.config();
    cfg.default_retry = false;
    kube::Client::try_from(cfg).unwrap()
}

#[tokio::test(start_paused = true)]
async fn kube_client_retries_injected_429_after_retry_after() {
    let env = TestEnv::start().await.unwrap();
    let nodes: Api<Node> = Api::all(env.client());
    env.faults().fail_next(2, 429, Some(Duration::from_secs(3)));
    let t0 = tokio::time::Instant::now();
    nodes.list(&ListParams::default()).await.unwrap();
    assert!(
        t0.elapsed() >= Duration::from_secs(6),
        "two Retry-After: 3 waits"
    );
    let statuses: Vec<u16> = env.requests().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [429, 429, 200]);
}

#[tokio::test]
async fn fail_next_fails_exactly_n_requests_with_status_and_retry_after() {
    let env = TestEnv::start().await.unwrap();
    let nodes: Api<Node> = Api::all(no_retry_client(&env));
    env.faults().fail_next(2, 429, Some(Duration::from_secs(3)));
    let raw = no_retry_client(&env)
        .send(
            http::Request::get("/api/v1/nodes")
                .body(kube::client::Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(raw.status().as_u16(), 429);
    assert_eq!(raw.headers()["retry-after"], "3");
    assert_eq!(
        code(nodes.list(&ListParams::default()).await.unwrap_err()),
        (429, "TooManyRequests".into())
    );
    assert!(nodes.list(&ListParams::default()).await.is_ok());

    env.faults().fail_next(1, 500, None);
    assert_eq!(
        code(
            nodes
                .create(&PostParams::default(), &node("x"))
                .await
                .unwrap_err()
        ),
        (500, "InternalError".into())
    );
    assert!(
        nodes.get("x").await.is_err(),
        "the failed create stored nothing"
    );
    let statuses: Vec<u16> = env.requests().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [429, 429, 200, 500, 404]);
}

#[tokio::test]
async fn fail_ratio_fails_some_and_zero_turns_it_off() {
    let env = TestEnv::start().await.unwrap();
    let nodes: Api<Node> = Api::all(no_retry_client(&env));
    env.faults().fail_ratio(1.0, 503);
    assert_eq!(
        code(nodes.list(&ListParams::default()).await.unwrap_err()).0,
        503
    );
    env.faults().fail_ratio(0.5, 500);
    let mut failures = 0;
    for _ in 0..60 {
        if nodes.list(&ListParams::default()).await.is_err() {
            failures += 1;
        }
    }
    assert!(
        (5..=55).contains(&failures),
        "{failures} of 60 failed at ratio 0.5"
    );
    env.faults().fail_ratio(0.0, 500);
    for _ in 0..10 {
        nodes.list(&ListParams::default()).await.unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn latency_delays_responses() {
    let env = TestEnv::start().await.unwrap();
    let nodes: Api<Node> = Api::all(env.client());
    env.faults().set_latency(Duration::from_secs(2));
    let t0 = tokio::time::Instant::now();
    nodes.list(&ListParams::default()).await.unwrap();
    assert!(t0.elapsed() >= Duration::from_secs(2));
    env.faults().set_latency(Duration::ZERO);
    let t1 = tokio::time::Instant::now();
    nodes.list(&ListParams::default()).await.unwrap();
    assert!(t1.elapsed() < Duration::from_secs(1));
}

#[tokio::test]
async fn request_log_records_verbs_resources_and_user_agent() {
    let (env, nodes) = cluster_with(node("a")).await;
    nodes.get("a").await.unwrap();
    nodes
        .list(&ListParams::default().labels("x=y"))
        .await
        .unwrap();
    let status: Api<Node> = Api::all(env.client());
    status
        .patch_status(
            "a",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"status": {"phase": "Running"}})),
        )
        .await
        .unwrap();
    nodes.delete("a", &Default::default()).await.unwrap();
    let log = env.requests();
    let verbs: Vec<(&str, &str, Option<&str>)> = log
        .iter()
        .map(|r| {
            (
                r.verb.as_str(),
                r.resource.as_str(),
                r.subresource.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        verbs,
        [
            ("create", "nodes", None),
            ("get", "nodes", None),
            ("list", "nodes", None),
            ("patch", "nodes", Some("status")),
            ("delete", "nodes", None)
        ]
    );
    assert_eq!(log[2].query, "&labelSelector=x%3Dy");
    assert_eq!(log[1].name.as_deref(), Some("a"));
    env.clear_requests();
    assert!(env.requests().is_empty());
}
