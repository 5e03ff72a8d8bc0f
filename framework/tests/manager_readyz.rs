//! `/readyz` and `/healthz` of a running manager before and after its caches sync: not ready
//! while the API server refuses to list, ready (with a health check per started controller) once
//! the shared cache has synced.

mod support;

use std::convert::Infallible;
use std::net::TcpListener;
use std::time::Duration;

use controller_manager::controller::{Action, Controller, Request};
use controller_manager::informer::Event;
use controller_manager::manager::{
    InitContext, InitOutcome, Initializer, Initializers, Manager, ManagerConfig,
};
use controller_manager::workqueue::ItemExponential;
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube_testenv::TestEnv;
use support::{shut_down, until};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(30);

fn node_watcher() -> Initializer<()> {
    Initializer::new("node-watcher", |ctx: InitContext<()>| async move {
        let informer = ctx.factory.informer::<Node>();
        let queue = ctx.queue::<String>("node-watcher", ItemExponential::default());
        let q = queue.clone();
        informer
            .add_handler(move |e: &Event<Node>| q.add(e.object().name_any()))
            .detach();
        let svc =
            tower::service_fn(|_req: Request<String>| async { Ok::<_, Infallible>(Action::Done) });
        let stop = ctx.shutdown.clone();
        Ok(InitOutcome::Started(Box::pin(async move {
            Controller::new("node-watcher", queue, svc).run(stop).await
        })))
    })
}

#[tokio::test]
async fn readyz_fails_until_the_cache_syncs_and_healthz_then_lists_the_controller() {
    let env = TestEnv::start().await.unwrap();
    // Every request fails until we say so: the Node informer cannot list, so nothing syncs.
    env.faults().fail_ratio(1.0, 500);

    let addr = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let mut config = ManagerConfig::new("readyz-test");
    config.admin_addr = Some(addr);
    config.admin_tls = None;
    let client = {
        let mut cfg = env.config();
        cfg.default_retry = false;
        kube::Client::try_from(cfg).unwrap()
    };
    let manager = Manager::new(config, client, ())
        .with_initializers(Initializers::new().with(node_watcher()));
    let stop = CancellationToken::new();
    let run = tokio::spawn(manager.run(stop.clone()));

    let (_, body) = until(addr, "/readyz?verbose", |status, body| {
        status == 500 && body.contains("[-]informer-sync failed")
    })
    .await;
    assert!(body.contains("readyz check failed"), "{body}");
    let (status, body) = until(addr, "/healthz?verbose", |_, _| true).await;
    assert_eq!(status, 200, "not synced is not unhealthy: {body}");
    assert!(
        !body.contains("node-watcher"),
        "no controller runs before sync: {body}"
    );

    env.faults().fail_ratio(0.0, 500);
    let (_, body) = until(addr, "/readyz?verbose", |status, _| status == 200).await;
    assert!(body.contains("[+]informer-sync ok"), "{body}");
    let (_, body) = until(addr, "/healthz?verbose", |status, body| {
        status == 200 && body.contains("[+]node-watcher ok")
    })
    .await;
    assert!(body.contains("healthz check passed"), "{body}");

    shut_down(&stop, run, WAIT).await;
}
