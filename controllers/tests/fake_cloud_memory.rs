//! The fake cloud's memory stays flat under load (issue 13): its call log is a ring and load
//! balancers share their backend node sets, so 10,000 more ensure/update calls add nothing once
//! the log is full. Measured with a counting global allocator (live bytes requested), which is
//! why this is its own test binary with a single test.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, Ordering};

use cloud_controllers::cloud::LoadBalancer;
use fake_cloud::{DEFAULT_CALL_LOG_CAPACITY, FakeCloud, Method};
use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: delegates every call to the system allocator and only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

const LBS: usize = 100;
const NODES: usize = 500;
const CALLS: usize = 10_000;

fn service(i: usize) -> Service {
    Service {
        metadata: ObjectMeta {
            namespace: Some("default".into()),
            name: Some(format!("svc-{i}")),
            uid: Some(format!("00000000-0000-0000-0000-{i:012}")),
            ..ObjectMeta::default()
        },
        ..Service::default()
    }
}

fn node(i: usize) -> Arc<Node> {
    Arc::new(Node {
        metadata: ObjectMeta {
            name: Some(format!(
                "node-with-a-realistic-name-{i:05}.zone-a.example.internal"
            )),
            ..ObjectMeta::default()
        },
        ..Node::default()
    })
}

/// One node-sync-shaped round: every load balancer updated with the same node set, which
/// changes from round to round as a node joins and another leaves.
async fn calls(cloud: &FakeCloud, services: &[Service], nodes: &[Arc<Node>], rounds: usize) {
    for round in 0..rounds {
        let start = round % NODES;
        let set: Vec<Arc<Node>> = nodes
            .iter()
            .cycle()
            .skip(start)
            .take(NODES - 1)
            .cloned()
            .collect();
        for (i, svc) in services.iter().enumerate() {
            if round % 10 == 0 && i % 10 == 0 {
                cloud
                    .ensure_load_balancer("kubernetes", svc, &set)
                    .await
                    .unwrap();
            } else {
                cloud
                    .update_load_balancer("kubernetes", svc, &set)
                    .await
                    .unwrap();
            }
        }
    }
}

#[test]
fn heap_stays_flat_over_10_000_ensure_and_update_calls() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        let services: Vec<Service> = (0..LBS).map(service).collect();
        let nodes: Vec<Arc<Node>> = (0..NODES).map(node).collect();
        let before = live();
        let cloud = FakeCloud::builder()
            .lb_pool_cidr("10.0.0.0/16")
            .build()
            .unwrap();
        for svc in &services {
            cloud
                .ensure_load_balancer("kubernetes", svc, &nodes)
                .await
                .unwrap();
        }
        // Warm-up fills the call log to its capacity.
        calls(&cloud, &services, &nodes, CALLS / LBS).await;
        let warm = live();
        calls(&cloud, &services, &nodes, CALLS / LBS).await;
        let after = live();

        let total = cloud.call_count(Method::UpdateLoadBalancer)
            + cloud.call_count(Method::EnsureLoadBalancer);
        assert_eq!(total, (LBS + 2 * CALLS) as u64);
        assert_eq!(cloud.calls().len(), DEFAULT_CALL_LOG_CAPACITY);
        let lb = cloud.lb_for("default/svc-7").unwrap();
        assert_eq!(lb.nodes.len(), NODES - 1);

        let grew = after - warm;
        let held = after - before;
        eprintln!(
            "fake cloud, {LBS} LBs x {NODES} nodes: {held} bytes held after {} calls, \
             {grew} bytes grown over the last {CALLS}",
            LBS + 2 * CALLS
        );
        assert!(
            grew.abs() < 64 * 1024,
            "the last {CALLS} calls grew the heap by {grew} bytes"
        );
        // The ring of 10,000 calls is most of it; copies per load balancer would add 100 x 500
        // names of ~60 bytes (3 MB) on their own.
        assert!(
            held < 5 * 1024 * 1024 / 2,
            "the fake cloud holds {held} bytes"
        );
    });
}
