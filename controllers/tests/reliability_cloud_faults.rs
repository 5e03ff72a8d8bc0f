//! Cloud faults against the service-lb controller's real pipeline — `ServiceController::sync_service`
//! behind the framework's `Controller` workers, the standard layers and a `WorkQueue` with the
//! controller's own 5 s → 300 s per-key backoff, errors mapped by `wiring::queue_error` exactly as
//! `service::init` does — on tokio's paused clock, so every delay is checked to the second.
//!
//! The API server is an in-process stub answering each Service PATCH with the stored object (no
//! sockets, so the paused clock never races real I/O); only the cloud misbehaves here. API
//! faults are covered end to end by `reliability_convergence`.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use cloud_controllers::event_sink::RecordedEvents;
use cloud_controllers::service::predicates::LOAD_BALANCER_CLEANUP_FINALIZER;
use cloud_controllers::service::{
    MAX_RETRY_DELAY, MIN_RETRY_DELAY, NodeLister, ServiceController, ServiceLister,
};
use cloud_controllers::wiring::{RECONCILE_TIMEOUT, queue_error};
use controller_manager::controller::layers::{self, ControllerMetrics};
use controller_manager::controller::{Action, Controller, Request};
use controller_manager::workqueue::{ItemExponential, WorkQueue};
use fake_cloud::{FakeCloud, FaultSpec, Method};
use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use parking_lot::Mutex;
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// Services and Nodes the controller's cache holds; also what the stub API answers with.
#[derive(Default)]
struct World {
    services: Mutex<HashMap<String, Arc<Service>>>,
    nodes: Vec<Arc<Node>>,
}

impl ServiceLister for World {
    fn get(&self, _ns: &str, name: &str) -> Option<Arc<Service>> {
        self.services.lock().get(name).cloned()
    }
}

impl NodeLister for World {
    fn list(&self) -> Vec<Arc<Node>> {
        self.nodes.clone()
    }
}

fn service(name: &str, uid: &str) -> Service {
    serde_json::from_value(json!({
        "metadata": { "name": name, "namespace": "default", "uid": uid, "resourceVersion": "1" },
        "spec": { "type": "LoadBalancer", "selector": { "app": name },
                  "ports": [{ "port": 80, "protocol": "TCP" }] }
    }))
    .expect("service")
}

/// A kube client whose "API server" answers every request with the stored Service named in the
/// path (PATCHes of finalizers and status succeed; nothing is persisted).
fn stub_client(world: Arc<World>) -> kube::Client {
    let svc = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let path = req.uri().path().trim_end_matches("/status").to_string();
        let name = path.rsplit('/').next().unwrap_or_default().to_string();
        let body = world
            .services
            .lock()
            .get(&name)
            .map(|s| serde_json::to_vec(&**s).expect("json"));
        async move {
            let resp = match body {
                Some(body) => http::Response::builder()
                    .status(200)
                    .header("content-type", "application/json")
                    .body(kube::client::Body::from(body)),
                None => http::Response::builder().status(404).body(kube::client::Body::from(
                    br#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}"#.to_vec(),
                )),
            };
            Ok::<_, Infallible>(resp.expect("response"))
        }
    });
    kube::Client::new(svc, "default")
}

struct Pipeline {
    world: Arc<World>,
    cloud: FakeCloud,
    queue: WorkQueue<String>,
    stop: CancellationToken,
}

/// Starts `workers` service workers wired like `service::init`.
fn pipeline(workers: usize, services: &[&str]) -> Pipeline {
    let mut world = World::default();
    for (i, name) in services.iter().enumerate() {
        world.services.lock().insert(
            name.to_string(),
            Arc::new(service(name, &format!("uid-{i}"))),
        );
    }
    world.nodes = (0..2)
        .map(|i| {
            Arc::new(
                serde_json::from_value(json!({"metadata": {"name": format!("node-{i}")},
                    "spec": {"providerID": format!("fake://node-{i}")}}))
                .expect("node"),
            )
        })
        .collect();
    let world = Arc::new(world);
    let cloud = FakeCloud::new();
    let ctl = Arc::new(
        ServiceController::new(
            Arc::new(cloud.clone()),
            stub_client(world.clone()),
            "kubernetes",
            world.clone(),
            world.clone(),
            Arc::new(RecordedEvents::default()),
        )
        .expect("controller"),
    );
    let queue = WorkQueue::new(
        "service",
        ItemExponential::new(MIN_RETRY_DELAY, MAX_RETRY_DELAY),
    );
    let metrics = ControllerMetrics::new(&mut prometheus_client::registry::Registry::default());
    let svc = layers::standard("service", &metrics, RECONCILE_TIMEOUT).service_fn(
        move |req: Request<String>| {
            let c = ctl.clone();
            async move {
                c.sync_service(&req.key)
                    .await
                    .map(|()| Action::Done)
                    .map_err(queue_error)
            }
        },
    );
    let stop = CancellationToken::new();
    tokio::spawn(
        Controller::new("service", queue.clone(), svc)
            .workers(workers)
            .run(stop.clone()),
    );
    for name in services {
        queue.add(format!("default/{name}"));
    }
    Pipeline {
        world,
        cloud,
        queue,
        stop,
    }
}

/// Calls to `method` for `key` so far.
fn count(cloud: &FakeCloud, method: Method, key: &str) -> usize {
    cloud
        .calls_to(method)
        .iter()
        .filter(|c| c.key == key)
        .count()
}

/// Samples `count` at the given virtual instants (seconds since start), advancing the paused
/// clock to each in turn.
async fn counts_at(cloud: &FakeCloud, method: Method, key: &str, at: &[u64]) -> Vec<usize> {
    let start = tokio::time::Instant::now();
    let mut out = Vec::new();
    for s in at {
        tokio::time::sleep_until(start + Duration::from_secs(*s) + Duration::from_millis(500))
            .await;
        out.push(count(cloud, method, key));
    }
    out
}

/// Retries of a key failing every time: 5 s, 10 s, 20 s, … capped at 300 s (client-go
/// `ItemExponentialFailureRateLimiter(5s, 300s)`), so attempts happen at t = 0, 5, 15, 35, 75,
/// 155, 315, 615 s.
const ATTEMPTS_AT: [u64; 8] = [0, 5, 15, 35, 75, 155, 315, 615];

fn expected_counts(samples: &[u64]) -> Vec<usize> {
    samples
        .iter()
        .map(|s| ATTEMPTS_AT.iter().filter(|a| **a <= *s).count())
        .collect()
}

#[tokio::test(start_paused = true)]
async fn an_error_storm_on_ensure_backs_off_per_key_exponentially() {
    let cloud_storm = |p: &Pipeline| {
        p.cloud.fail(
            Method::EnsureLoadBalancer,
            FaultSpec::other("quota exceeded").only_for("default/bad"),
        )
    };
    let p = pipeline(1, &[]);
    cloud_storm(&p);
    p.world
        .services
        .lock()
        .insert("bad".into(), Arc::new(service("bad", "uid-bad")));
    p.world
        .services
        .lock()
        .insert("good".into(), Arc::new(service("good", "uid-good")));
    p.queue.add("default/bad".into());
    p.queue.add("default/good".into());

    let samples = [
        0, 4, 5, 14, 15, 34, 35, 74, 75, 154, 155, 314, 315, 614, 615, 900,
    ];
    let got = counts_at(
        &p.cloud,
        Method::EnsureLoadBalancer,
        "default/bad",
        &samples,
    )
    .await;
    assert_eq!(got, expected_counts(&samples), "attempts at {samples:?}");
    // 15 minutes of a permanent error cost 8 calls, not a hot loop; the healthy key is untouched.
    assert_eq!(
        count(&p.cloud, Method::EnsureLoadBalancer, "default/good"),
        1
    );
    assert!(p.cloud.lb_for("default/good").is_some());
    assert_eq!(p.queue.num_requeues(&"default/bad".to_string()), 8);

    // The storm ends: the next retry succeeds and the backoff is forgotten.
    p.cloud.clear_faults();
    tokio::time::sleep(Duration::from_secs(301)).await;
    assert!(p.cloud.lb_for("default/bad").is_some());
    assert_eq!(p.queue.num_requeues(&"default/bad".to_string()), 0);
    p.stop.cancel();
}

/// Provisions `name`'s load balancer, then marks the Service deleting (with the finalizer) and
/// makes `method` fail until cleared; deletion must back off, keep the finalizer and the load
/// balancer, and finish once the storm ends.
async fn storm_during_deletion(method: Method) {
    let p = pipeline(1, &[]);
    let mut svc = service("gone", "uid-gone");
    p.world
        .services
        .lock()
        .insert("gone".into(), Arc::new(svc.clone()));
    p.queue.add("default/gone".into());
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(p.cloud.lb_for("default/gone").is_some());

    p.cloud
        .fail(method, FaultSpec::other("Internal Server Error"));
    svc.metadata.finalizers = Some(vec![LOAD_BALANCER_CLEANUP_FINALIZER.into()]);
    svc.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
    p.world.services.lock().insert("gone".into(), Arc::new(svc));
    p.queue.add("default/gone".into());
    let samples = [0, 4, 5, 15, 35, 75, 155, 315, 615];
    let got = counts_at(&p.cloud, method, "default/gone", &samples).await;
    assert_eq!(got, expected_counts(&samples), "{method} attempts");
    // Still there, so the finalizer must stay: it is removed only once the LB is known gone.
    assert!(p.cloud.lb_for("default/gone").is_some());

    p.cloud.clear_faults();
    tokio::time::sleep(Duration::from_secs(301)).await;
    assert!(p.cloud.lb_for("default/gone").is_none());
    p.stop.cancel();
}

#[tokio::test(start_paused = true)]
async fn an_error_storm_on_get_load_balancer_during_deletion_backs_off_and_recovers() {
    // cloud-provider-openstack #1931: "failed to check if load balancer exists before cleanup".
    storm_during_deletion(Method::GetLoadBalancer).await;
}

#[tokio::test(start_paused = true)]
async fn an_error_storm_on_delete_keeps_the_finalizer_and_backs_off() {
    storm_during_deletion(Method::EnsureLoadBalancerDeleted).await;
}

#[tokio::test(start_paused = true)]
async fn retry_after_from_the_cloud_is_honoured_exactly_and_leaves_the_backoff_alone() {
    let p = pipeline(1, &[]);
    p.cloud.fail(
        Method::EnsureLoadBalancer,
        FaultSpec::retry("operation pending", Duration::from_secs(42)),
    );
    p.world
        .services
        .lock()
        .insert("web".into(), Arc::new(service("web", "uid-web")));
    p.queue.add("default/web".into());
    let samples = [0, 41, 42, 83, 84, 125, 126];
    let got = counts_at(
        &p.cloud,
        Method::EnsureLoadBalancer,
        "default/web",
        &samples,
    )
    .await;
    assert_eq!(got, vec![1, 1, 2, 2, 3, 3, 4], "retries not every 42 s");
    assert_eq!(
        p.queue.num_requeues(&"default/web".to_string()),
        0,
        "retry-after must not grow the exponential backoff"
    );
    p.stop.cancel();
}

#[tokio::test(start_paused = true)]
async fn a_slow_cloud_call_for_one_key_does_not_stall_the_others() {
    // Two workers (--concurrent-service-syncs=2). With upstream's default of one worker every
    // key waits behind the slow one, as upstream.
    let p = pipeline(2, &[]);
    let mut gone = service("slow", "uid-slow");
    p.world
        .services
        .lock()
        .insert("slow".into(), Arc::new(gone.clone()));
    p.queue.add("default/slow".into());
    tokio::time::sleep(Duration::from_secs(1)).await;
    // Deleting `slow` parks in the cloud; meanwhile ten other Services are created.
    let held = p.cloud.hold(Method::EnsureLoadBalancerDeleted);
    gone.metadata.finalizers = Some(vec![LOAD_BALANCER_CLEANUP_FINALIZER.into()]);
    gone.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
    p.world
        .services
        .lock()
        .insert("slow".into(), Arc::new(gone));
    p.queue.add("default/slow".into());
    held.wait_for_calls(1).await;

    let others: BTreeMap<String, ()> = (0..10).map(|i| (format!("svc-{i}"), ())).collect();
    for (i, name) in others.keys().enumerate() {
        p.world
            .services
            .lock()
            .insert(name.clone(), Arc::new(service(name, &format!("uid-o{i}"))));
        p.queue.add(format!("default/{name}"));
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    for name in others.keys() {
        assert!(
            p.cloud.lb_for(&format!("default/{name}")).is_some(),
            "{name} waited behind the slow key"
        );
    }
    assert!(
        p.cloud.lb_for("default/slow").is_some(),
        "slow call finished early"
    );
    held.release();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(p.cloud.lb_for("default/slow").is_none());
    p.stop.cancel();
}
