//! [`ClientBuilder`] over HTTP against kube-testenv: each client has its own QPS/burst limiter,
//! so a controller hammering the API server does not delay another controller's requests; with
//! one shared client (what the manager had before) it does.

use controller_manager::client::ClientBuilder;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube_testenv::TestEnv;

const HAMMER: usize = 20;

/// Starts `HAMMER` GETs on `busy` (10 QPS, burst 1: about 2 s of queueing), then one GET on
/// `other`, and returns how many of the busy client's requests had reached the server when the
/// other one's answer came back.
async fn busy_requests_before_other(
    env: &TestEnv,
    busy: kube::Client,
    other: kube::Client,
) -> usize {
    let api: Api<ConfigMap> = Api::namespaced(busy, "default");
    let hammer: Vec<_> = (0..HAMMER)
        .map(|i| {
            let api = api.clone();
            tokio::spawn(async move { api.get_opt(&format!("busy-{i}")).await })
        })
        .collect();
    // Let the busy client take its burst token first.
    while !env
        .requests()
        .iter()
        .any(|r| r.name.as_deref().is_some_and(|n| n.starts_with("busy-")))
    {
        tokio::task::yield_now().await;
    }
    Api::<ConfigMap>::namespaced(other, "default")
        .get_opt("other")
        .await
        .unwrap();
    let seen = env
        .requests()
        .iter()
        .filter(|r| r.name.as_deref().is_some_and(|n| n.starts_with("busy-")))
        .count();
    for task in hammer {
        task.abort();
    }
    seen
}

#[tokio::test]
async fn a_busy_controller_does_not_slow_another() {
    let env = TestEnv::start().await.unwrap();
    let builder = ClientBuilder::simple(env.config(), "test-binary", 10.0, 1, None);
    let busy = builder.client("busy-controller").await.unwrap();
    let other = builder.client("other-controller").await.unwrap();
    let seen = busy_requests_before_other(&env, busy, other).await;
    assert!(
        seen < HAMMER / 2,
        "the other controller waited for {seen} of the busy one's requests"
    );
    let agents: std::collections::BTreeSet<_> = env
        .requests()
        .into_iter()
        .filter_map(|r| r.user_agent)
        .collect();
    assert!(agents.contains("test-binary/busy-controller"), "{agents:?}");
    assert!(
        agents.contains("test-binary/other-controller"),
        "{agents:?}"
    );
}

#[tokio::test]
async fn one_shared_client_makes_everyone_wait() {
    // The contrast that makes the test above meaningful: the same load through one limiter,
    // whose waiters are served in arrival order, puts the other request behind all of them.
    let env = TestEnv::start().await.unwrap();
    let shared =
        controller_manager::client::client_from_config(env.config(), 10.0, 1, "one", None).unwrap();
    let builder = ClientBuilder::shared(shared);
    let busy = builder.client("busy-controller").await.unwrap();
    let other = builder.client("other-controller").await.unwrap();
    let seen = busy_requests_before_other(&env, busy, other).await;
    assert_eq!(seen, HAMMER);
}
