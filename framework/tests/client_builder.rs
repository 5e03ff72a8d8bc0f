//! [`ClientBuilder`] over HTTP against kube-testenv: each client has its own QPS/burst limiter,
//! so a controller hammering the API server does not delay another controller's requests; with
//! one shared client (what the manager had before) it does.

use controller_manager::client::ClientBuilder;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube_testenv::TestEnv;
use std::time::Duration;

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

/// Creates of `serviceaccounts/token` for `name` in the request log.
fn token_requests(env: &TestEnv, name: &str) -> usize {
    env.requests()
        .iter()
        .filter(|r| {
            r.verb == "create"
                && r.resource == "serviceaccounts"
                && r.subresource.as_deref() == Some("token")
                && r.name.as_deref() == Some(name)
        })
        .count()
}

fn service_accounts(env: &TestEnv) -> ClientBuilder {
    ClientBuilder::service_accounts(
        env.config(),
        env.client(),
        "kube-system",
        "bin",
        50.0,
        100,
        None,
    )
}

#[tokio::test]
async fn service_account_clients_authenticate_as_their_service_account() {
    let env = TestEnv::start().await.unwrap();
    let builder = service_accounts(&env);
    assert_eq!(
        builder.username("node-controller").as_deref(),
        Some("system:serviceaccount:kube-system:node-controller")
    );
    let client = builder.client("node-controller").await.unwrap();
    // The ServiceAccount was created by the process's own identity.
    let sa: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(env.client(), "kube-system");
    assert!(sa.get_opt("node-controller").await.unwrap().is_some());
    Api::<ConfigMap>::namespaced(client, "default")
        .get_opt("x")
        .await
        .unwrap();
    let mine: Vec<_> = env
        .requests()
        .into_iter()
        .filter(|r| r.resource == "configmaps")
        .collect();
    assert_eq!(mine.len(), 1, "{mine:?}");
    assert_eq!(
        mine[0].user,
        "system:serviceaccount:kube-system:node-controller"
    );
    assert_eq!(
        mine[0].user_agent.as_deref(),
        Some("bin/system:serviceaccount:kube-system:node-controller")
    );
    // Token requests and ServiceAccount writes go out as the process, never as the account.
    let admin = env
        .requests()
        .into_iter()
        .find(|r| r.resource == "serviceaccounts")
        .unwrap();
    assert_ne!(admin.user, mine[0].user);
}

#[tokio::test(start_paused = true)]
async fn tokens_are_rotated_before_they_expire() {
    let env = TestEnv::start().await.unwrap();
    let builder = service_accounts(&env);
    let api: Api<ConfigMap> =
        Api::namespaced(builder.client("route-controller").await.unwrap(), "default");
    api.get_opt("x").await.unwrap();
    assert_eq!(token_requests(&env, "route-controller"), 1);
    // 3600 s tokens with 20 % leeway: still used at 47 min, replaced after 48 min.
    tokio::time::advance(Duration::from_secs(47 * 60)).await;
    api.get_opt("x").await.unwrap();
    assert_eq!(token_requests(&env, "route-controller"), 1);
    tokio::time::advance(Duration::from_secs(2 * 60)).await;
    api.get_opt("x").await.unwrap();
    assert_eq!(token_requests(&env, "route-controller"), 2);
    // Clients of one ServiceAccount share its token.
    let again: Api<ConfigMap> =
        Api::namespaced(builder.client("route-controller").await.unwrap(), "default");
    again.get_opt("x").await.unwrap();
    assert_eq!(token_requests(&env, "route-controller"), 2);
    let last = env
        .requests()
        .into_iter()
        .rev()
        .find(|r| r.resource == "configmaps")
        .unwrap();
    assert_eq!(last.status, 404, "authenticated, not found: {last:?}");
}

#[tokio::test]
async fn a_refused_token_is_replaced() {
    let env = TestEnv::start().await.unwrap();
    let builder = service_accounts(&env);
    let api: Api<ConfigMap> = Api::namespaced(
        builder.client("service-controller").await.unwrap(),
        "default",
    );
    api.get_opt("x").await.unwrap();
    // Deleting the ServiceAccount invalidates its tokens: the next request gets 401, drops the
    // token, and the one after that recreates the account and fetches a new token.
    Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(env.client(), "kube-system")
        .delete("service-controller", &Default::default())
        .await
        .unwrap();
    let refused = api.get_opt("x").await.unwrap_err();
    assert!(
        matches!(&refused, kube::Error::Api(s) if s.code == 401),
        "{refused:?}"
    );
    api.get_opt("x").await.unwrap();
    assert_eq!(token_requests(&env, "service-controller"), 2);
}
