//! Safety invariants as property tests over random operation sequences (issue 9, anchors §C):
//!
//! * a Node whose instance exists is never deleted — whatever the order of cloud errors, stale
//!   ("eventually consistent") reads shorter than the grace period, Ready flaps, instance state
//!   changes and real instance removals (kubernetes PR #127424, cloud-provider-aws PR #1024);
//! * a load balancer whose Service still wants one is never deleted;
//! * the cleanup finalizer is removed only after the load balancer is gone, and never added to
//!   a Service being deleted (cloud-provider-gcp #981);
//! * once faults stop, every wanted load balancer exists and no load balancer is left over.
//!
//! The controllers run against an in-process API stub (which applies finalizer patches and
//! checks the invariants at the moment each write arrives) and the fake cloud, on tokio's paused
//! clock, so grace periods are real durations and each case takes milliseconds.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use cloud_controllers::event_sink::RecordedEvents;
use cloud_controllers::node::MemoryNodeLister;
use cloud_controllers::node_lifecycle::{DeletionGuard, NodeLifecycleController};
use cloud_controllers::node_parts::NodeParts;
use cloud_controllers::service::predicates::{
    LOAD_BALANCER_CLEANUP_FINALIZER, wants_load_balancer,
};
use cloud_controllers::service::{NodeLister, ServiceController, ServiceLister};
use fake_cloud::{FakeCloud, FakeInstance, FaultSpec, InstanceState, Method};
use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use parking_lot::Mutex;
use proptest::prelude::*;
use serde_json::{Value, json};

type Handler = dyn Fn(&http::Method, &str, &Value) -> (u16, Value) + Send + Sync;

/// A kube client whose API server is `handler(method, path, json body)`.
fn stub_client(handler: Arc<Handler>) -> kube::Client {
    let svc = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let handler = handler.clone();
        async move {
            let method = req.method().clone();
            let path = req.uri().path().to_string();
            let bytes = req.into_body().collect_bytes().await.unwrap_or_default();
            let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let (status, out) = handler(&method, &path, &body);
            let resp = http::Response::builder()
                .status(status)
                .header("content-type", "application/json")
                .body(kube::client::Body::from(
                    serde_json::to_vec(&out).expect("json"),
                ))
                .expect("response");
            Ok::<_, Infallible>(resp)
        }
    });
    kube::Client::new(svc, "default")
}

fn not_found() -> (u16, Value) {
    (
        404,
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404}),
    )
}

fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("runtime")
}

// ---------------------------------------------------------------------------------------------
// Nodes
// ---------------------------------------------------------------------------------------------

const NODES: usize = 3;
/// The production guard (`--node-deletion-grace-period=30s`, two consecutive checks).
const GUARD: DeletionGuard = DeletionGuard {
    missing_checks: 2,
    grace_period: Duration::from_secs(30),
};
/// `--node-monitor-period` default.
const TICK: Duration = Duration::from_secs(5);

#[derive(Clone, Debug)]
enum NodeOp {
    /// Advance the clock by one monitor period and run a pass.
    Tick,
    /// The cloud's reads for this instance lag: lookups say "missing" for the next `n` ticks
    /// (at most four, i.e. 20 s, shorter than the 30 s grace period); once per instance, since
    /// back-to-back windows are one long window.
    Stale(usize, u32),
    /// The next `n` existence checks fail with an error.
    CloudError(u32),
    /// Kubelet flips the Ready condition.
    Ready(usize, bool),
    /// The instance is stopped / running again.
    State(usize, bool),
    /// The instance is really gone: from now on the Node may be deleted.
    Remove(usize),
}

fn node_op() -> impl Strategy<Value = NodeOp> {
    prop_oneof![
        4 => Just(NodeOp::Tick),
        2 => (0..NODES, 1u32..=4).prop_map(|(i, n)| NodeOp::Stale(i, n)),
        1 => (1u32..=4).prop_map(NodeOp::CloudError),
        1 => (0..NODES, any::<bool>()).prop_map(|(i, r)| NodeOp::Ready(i, r)),
        1 => (0..NODES, any::<bool>()).prop_map(|(i, s)| NodeOp::State(i, s)),
        1 => (0..NODES).prop_map(NodeOp::Remove),
    ]
}

fn node(i: usize, ready: bool) -> Node {
    serde_json::from_value(json!({
        "metadata": { "name": format!("node-{i}"), "uid": format!("uid-{i}"), "resourceVersion": "1" },
        "spec": { "providerID": format!("fake://node-{i}") },
        "status": { "conditions": [{ "type": "Ready", "status": if ready { "True" } else { "False" } }] }
    }))
    .expect("node")
}

fn run_node_ops(ops: Vec<NodeOp>) -> Result<(), TestCaseError> {
    paused_runtime().block_on(async move {
        let mut b = FakeCloud::builder();
        for i in 0..NODES {
            b = b.instance(
                FakeInstance::new(format!("node-{i}")).provider_id(format!("fake://node-{i}")),
            );
        }
        let cloud = b.build().expect("cloud");
        let lister = Arc::new(MemoryNodeLister::default());
        let mut ready = [false; NODES];
        for (i, r) in ready.iter().enumerate() {
            lister.insert(node(i, *r));
        }
        let violations = Arc::new(Mutex::new(Vec::<String>::new()));
        let deleted = Arc::new(Mutex::new(Vec::<String>::new()));
        let handler: Arc<Handler> = {
            let (cloud, lister, violations, deleted) = (
                cloud.clone(),
                lister.clone(),
                violations.clone(),
                deleted.clone(),
            );
            Arc::new(move |method, path, _body| {
                let name = path.rsplit('/').next().unwrap_or_default().to_string();
                let Some(current) = lister.get(&name) else {
                    return not_found();
                };
                if method == http::Method::DELETE {
                    if cloud.instance(&name).is_some() {
                        violations
                            .lock()
                            .push(format!("{name} deleted while its instance exists"));
                    }
                    lister.remove(&name);
                    deleted.lock().push(name);
                }
                (200, serde_json::to_value(&*current).expect("json"))
            })
        };
        let parts = NodeParts::new(
            Arc::new(cloud.clone()),
            kube::Api::all(stub_client(handler)),
            lister.clone(),
            Arc::new(RecordedEvents::default()),
        )
        .expect("controller");
        let ctl = NodeLifecycleController::new(parts, GUARD);

        let mut removed = [false; NODES];
        // Stale windows end by time, not by lookups: an eventually consistent cloud catches up
        // whether or not anyone asked in between.
        let mut stale_until: [Option<tokio::time::Instant>; NODES] = [None; NODES];
        let mut was_stale = [false; NODES];
        for op in &ops {
            match *op {
                NodeOp::Tick => {
                    tokio::time::sleep(TICK).await;
                    for (i, until) in stale_until.iter_mut().enumerate() {
                        if until.is_some_and(|u| tokio::time::Instant::now() > u) {
                            let _ = cloud.set_stale_reads(&format!("node-{i}"), 0);
                            *until = None;
                        }
                    }
                    ctl.monitor_nodes().await;
                }
                NodeOp::Stale(i, n) => {
                    if !was_stale[i] {
                        was_stale[i] = true;
                        let _ = cloud.set_stale_reads(&format!("node-{i}"), n * 10);
                        stale_until[i] = Some(tokio::time::Instant::now() + TICK * n);
                    }
                }
                NodeOp::CloudError(n) => {
                    for m in [Method::InstanceExists, Method::InstanceExistsByProviderID] {
                        cloud.fail(m, FaultSpec::other("cloud API unavailable").times(n));
                    }
                }
                NodeOp::Ready(i, r) => {
                    ready[i] = r;
                    if lister.get(&format!("node-{i}")).is_some() {
                        lister.insert(node(i, r));
                    }
                }
                NodeOp::State(i, running) => {
                    let state = if running {
                        InstanceState::Running
                    } else {
                        InstanceState::Shutdown
                    };
                    let _ = cloud.set_instance_state(&format!("node-{i}"), state);
                }
                NodeOp::Remove(i) => {
                    removed[i] = true;
                    cloud.remove_instance(&format!("node-{i}"));
                }
            }
            let v = violations.lock().clone();
            prop_assert!(v.is_empty(), "after {op:?}: {v:?}");
        }
        // Liveness: with faults gone, a NotReady Node whose instance was removed is deleted
        // once the grace period has passed.
        cloud.clear_faults();
        for i in 0..NODES {
            let _ = cloud.set_stale_reads(&format!("node-{i}"), 0);
        }
        for _ in 0..8 {
            tokio::time::sleep(TICK).await;
            ctl.monitor_nodes().await;
        }
        for i in 0..NODES {
            let name = format!("node-{i}");
            let gone = deleted.lock().contains(&name);
            if removed[i] && !ready[i] {
                prop_assert!(gone, "{name}: instance removed and NotReady, never deleted");
            }
            if !removed[i] {
                prop_assert!(!gone, "{name} deleted with its instance present");
            }
        }
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------
// Services
// ---------------------------------------------------------------------------------------------

const SERVICES: usize = 2;

#[derive(Clone, Debug)]
enum SvcOp {
    /// One `sync_service` of the key, as a worker would run it.
    Sync(usize),
    /// `spec.type` changes between LoadBalancer and ClusterIP.
    SetLoadBalancer(usize, bool),
    /// `kubectl delete`: with the finalizer the Service stays, marked deleting.
    Delete(usize),
    /// A Service of the same name is created again (new UID) if none exists.
    Create(usize),
    /// The next `n` calls of a load-balancer method fail.
    Fail(usize, u32),
}

const LB_METHODS: [Method; 4] = [
    Method::GetLoadBalancer,
    Method::EnsureLoadBalancer,
    Method::UpdateLoadBalancer,
    Method::EnsureLoadBalancerDeleted,
];

fn svc_op() -> impl Strategy<Value = SvcOp> {
    prop_oneof![
        5 => (0..SERVICES).prop_map(SvcOp::Sync),
        1 => (0..SERVICES, any::<bool>()).prop_map(|(i, lb)| SvcOp::SetLoadBalancer(i, lb)),
        1 => (0..SERVICES).prop_map(SvcOp::Delete),
        1 => (0..SERVICES).prop_map(SvcOp::Create),
        2 => (0..LB_METHODS.len(), 1u32..=3).prop_map(|(m, n)| SvcOp::Fail(m, n)),
    ]
}

#[derive(Default)]
struct Services {
    by_name: Mutex<BTreeMap<String, Arc<Service>>>,
    generation: Mutex<u32>,
}

impl ServiceLister for Services {
    fn get(&self, _ns: &str, name: &str) -> Option<Arc<Service>> {
        self.by_name.lock().get(name).cloned()
    }
}

struct NoNodes;
impl NodeLister for NoNodes {
    fn list(&self) -> Vec<Arc<Node>> {
        let n: Node = serde_json::from_value(json!({"metadata": {"name": "node-0"},
            "spec": {"providerID": "fake://node-0"}}))
        .expect("node");
        vec![Arc::new(n)]
    }
}

fn new_service(name: &str, generation: u32) -> Service {
    serde_json::from_value(json!({
        "metadata": { "name": name, "namespace": "default", "uid": format!("{name}-{generation}"),
                      "resourceVersion": "1" },
        "spec": { "type": "LoadBalancer", "selector": { "app": name },
                  "ports": [{ "port": 80, "protocol": "TCP" }] }
    }))
    .expect("service")
}

fn finalizers(svc: &Service) -> Vec<String> {
    svc.metadata.finalizers.clone().unwrap_or_default()
}

/// Applies a finalizer patch of the service controller to `svc` (strategic merge as the
/// controller writes it: a full list, a null, or a `$deleteFromPrimitiveList` directive).
fn apply_finalizer_patch(svc: &mut Service, body: &Value) {
    let meta = &body["metadata"];
    let mut list = finalizers(svc);
    if let Some(remove) = meta["$deleteFromPrimitiveList/finalizers"].as_array() {
        list.retain(|f| !remove.iter().any(|r| r.as_str() == Some(f)));
    }
    match &meta["finalizers"] {
        Value::Null if meta.get("finalizers").is_some() => list.clear(),
        Value::Array(add) => {
            for f in add.iter().filter_map(|f| f.as_str()) {
                if !list.iter().any(|x| x == f) {
                    list.push(f.to_string());
                }
            }
        }
        _ => {}
    }
    svc.metadata.finalizers = (!list.is_empty()).then_some(list);
}

fn run_service_ops(ops: Vec<SvcOp>) -> Result<(), TestCaseError> {
    paused_runtime().block_on(async move {
        let cloud = FakeCloud::new();
        let world = Arc::new(Services::default());
        for i in 0..SERVICES {
            let name = format!("svc-{i}");
            world
                .by_name
                .lock()
                .insert(name.clone(), Arc::new(new_service(&name, 0)));
        }
        let violations = Arc::new(Mutex::new(Vec::<String>::new()));
        let handler: Arc<Handler> = {
            let (cloud, world, violations) = (cloud.clone(), world.clone(), violations.clone());
            Arc::new(move |method, path, body| {
                let name = path
                    .trim_end_matches("/status")
                    .rsplit('/')
                    .next()
                    .unwrap_or_default()
                    .to_string();
                let mut by_name = world.by_name.lock();
                let Some(current) = by_name.get(&name).cloned() else {
                    return not_found();
                };
                // Finalizers are patched through the status subresource, as upstream does.
                if method != http::Method::PATCH {
                    return (200, serde_json::to_value(&*current).expect("json"));
                }
                let mut next = (*current).clone();
                apply_finalizer_patch(&mut next, body);
                let had = finalizers(&current)
                    .iter()
                    .any(|f| f == LOAD_BALANCER_CLEANUP_FINALIZER);
                let has = finalizers(&next)
                    .iter()
                    .any(|f| f == LOAD_BALANCER_CLEANUP_FINALIZER);
                let key = format!("default/{name}");
                if had && !has && cloud.lb_for(&key).is_some() {
                    violations.lock().push(format!(
                        "{key}: finalizer removed while its load balancer exists"
                    ));
                }
                if !had && has && current.metadata.deletion_timestamp.is_some() {
                    violations
                        .lock()
                        .push(format!("{key}: finalizer added to a Service being deleted"));
                }
                let out = serde_json::to_value(&next).expect("json");
                if next.metadata.deletion_timestamp.is_some() && finalizers(&next).is_empty() {
                    by_name.remove(&name);
                } else {
                    by_name.insert(name, Arc::new(next));
                }
                (200, out)
            })
        };
        let ctl = ServiceController::new(
            Arc::new(cloud.clone()),
            stub_client(handler),
            "kubernetes",
            world.clone(),
            Arc::new(NoNodes),
            Arc::new(RecordedEvents::default()),
        )
        .expect("controller");

        let sync = |i: usize| {
            let ctl = &ctl;
            let world = world.clone();
            let cloud = cloud.clone();
            let violations = violations.clone();
            async move {
                let name = format!("svc-{i}");
                let key = format!("default/{name}");
                let wanted = world
                    .by_name
                    .lock()
                    .get(&name)
                    .filter(|s| s.metadata.deletion_timestamp.is_none() && wants_load_balancer(s))
                    .cloned();
                let had_lb = |uid: &str| {
                    cloud
                        .load_balancers()
                        .iter()
                        .any(|lb| lb.service_uid == uid)
                };
                let uid = wanted.and_then(|s| s.metadata.uid.clone());
                let before = uid.as_deref().is_some_and(had_lb);
                let _ = ctl.sync_service(&key).await;
                if before && !uid.as_deref().is_some_and(had_lb) {
                    violations.lock().push(format!(
                        "{key}: load balancer of a Service that wants it deleted"
                    ));
                }
            }
        };

        for op in &ops {
            match *op {
                SvcOp::Sync(i) => sync(i).await,
                SvcOp::SetLoadBalancer(i, lb) => {
                    let mut by_name = world.by_name.lock();
                    if let Some(s) = by_name.get(&format!("svc-{i}")).cloned() {
                        let mut s = (*s).clone();
                        if let Some(spec) = s.spec.as_mut() {
                            spec.type_ = Some(if lb { "LoadBalancer" } else { "ClusterIP" }.into());
                        }
                        by_name.insert(format!("svc-{i}"), Arc::new(s));
                    }
                }
                SvcOp::Delete(i) => {
                    let mut by_name = world.by_name.lock();
                    let name = format!("svc-{i}");
                    if let Some(s) = by_name.get(&name).cloned() {
                        if finalizers(&s).is_empty() {
                            by_name.remove(&name);
                        } else if s.metadata.deletion_timestamp.is_none() {
                            let mut s = (*s).clone();
                            s.metadata.deletion_timestamp =
                                Some(Time(k8s_openapi::jiff::Timestamp::now()));
                            by_name.insert(name, Arc::new(s));
                        }
                    }
                }
                SvcOp::Create(i) => {
                    let name = format!("svc-{i}");
                    let mut generation = world.generation.lock();
                    *generation += 1;
                    world
                        .by_name
                        .lock()
                        .entry(name.clone())
                        .or_insert_with(|| Arc::new(new_service(&name, *generation)));
                }
                SvcOp::Fail(m, n) => {
                    cloud.fail(LB_METHODS[m], FaultSpec::other("cloud API error").times(n))
                }
            }
            let v = violations.lock().clone();
            prop_assert!(v.is_empty(), "after {op:?}: {v:?}");
        }

        // Liveness: faults stop and every key is synced to a fixed point (as the queue's retries
        // would do): each wanted Service has exactly its load balancer, nothing else is left.
        cloud.clear_faults();
        for _ in 0..3 {
            for i in 0..SERVICES {
                sync(i).await;
            }
        }
        let v = violations.lock().clone();
        prop_assert!(v.is_empty(), "while converging: {v:?}");
        let by_name = world.by_name.lock().clone();
        for lb in cloud.load_balancers() {
            let owner = by_name
                .values()
                .find(|s| s.metadata.uid.as_deref() == Some(lb.service_uid.as_str()));
            prop_assert!(
                owner.is_some_and(
                    |s| wants_load_balancer(s) && s.metadata.deletion_timestamp.is_none()
                ),
                "leaked load balancer {} of {} ({})",
                lb.name,
                lb.service,
                lb.service_uid
            );
        }
        for s in by_name.values() {
            if wants_load_balancer(s) && s.metadata.deletion_timestamp.is_none() {
                let uid = s.metadata.uid.clone().unwrap_or_default();
                prop_assert!(
                    cloud
                        .load_balancers()
                        .iter()
                        .any(|lb| lb.service_uid == uid),
                    "{:?} wants a load balancer and has none",
                    s.metadata.name
                );
            }
        }
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn a_node_whose_instance_exists_is_never_deleted(ops in prop::collection::vec(node_op(), 1..40)) {
        run_node_ops(ops)?;
    }

    #[test]
    fn load_balancers_and_finalizers_stay_safe_under_random_operations(
        ops in prop::collection::vec(svc_op(), 1..40)
    ) {
        run_service_ops(ops)?;
    }
}
