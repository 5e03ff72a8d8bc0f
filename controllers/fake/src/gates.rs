//! Holding calls at the cloud's door, so a test can change the world while a controller is in
//! the middle of a reconcile.
//!
//! Latency on a paused clock answers "what if the cloud is slow"; a gate answers "what if the
//! Service is deleted while `EnsureLoadBalancer` is in flight" deterministically: the test holds
//! the method, waits until the controller's call is parked, acts, then releases.
//!
//! ```
//! # async fn demo(cloud: fake_cloud::FakeCloud) {
//! use fake_cloud::Method;
//! let held = cloud.hold(Method::EnsureLoadBalancer);
//! // ... start the controller ...
//! held.wait_for_calls(1).await; // the controller is now inside EnsureLoadBalancer
//! // ... delete the Service ...
//! held.release(); // the parked call (and later ones) proceed
//! # }
//! ```

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::watch;

use super::Method;

/// One hold on one method: whether it is released, and how many calls reached it.
pub(super) struct Gate {
    released: watch::Sender<bool>,
    arrived: watch::Sender<usize>,
}

/// The holds of one fake cloud, shared by all its handles.
#[derive(Default)]
pub(super) struct Gates {
    held: Mutex<HashMap<Method, Arc<Gate>>>,
}

impl Gates {
    /// The gate on `method`, made if there is none.
    fn gate(&self, method: Method) -> Arc<Gate> {
        let mut held = self.held.lock();
        Arc::clone(held.entry(method).or_insert_with(|| {
            Arc::new(Gate {
                released: watch::Sender::new(false),
                arrived: watch::Sender::new(0),
            })
        }))
    }

    /// Parks every call of `method` until the returned hold is released; holding a held method
    /// again shares the same hold.
    pub(super) fn hold(self: &Arc<Self>, method: Method) -> HeldCalls {
        HeldCalls {
            gates: Arc::clone(self),
            method,
            gate: self.gate(method),
        }
    }

    /// Waits while `method` is held; returns at once when it is not.
    pub(super) async fn pass(&self, method: Method) {
        let Some(gate) = self.held.lock().get(&method).cloned() else {
            return;
        };
        let mut released = gate.released.subscribe();
        gate.arrived.send_modify(|n| *n += 1);
        // The sender lives in `gate`, which this future owns: waiting cannot fail.
        let _ = released.wait_for(|r| *r).await;
    }

    fn release(&self, method: Method, gate: &Arc<Gate>) {
        let mut held = self.held.lock();
        if held.get(&method).is_some_and(|g| Arc::ptr_eq(g, gate)) {
            held.remove(&method);
        }
        gate.released.send_replace(true);
    }
}

/// Calls of one method are parked until this is released or dropped (dropping releases, so a
/// failing test never leaves a controller hanging).
#[must_use = "dropping the hold releases it at once"]
pub struct HeldCalls {
    gates: Arc<Gates>,
    method: Method,
    gate: Arc<Gate>,
}

impl HeldCalls {
    /// How many calls have reached the hold so far (parked or already released).
    pub fn arrived(&self) -> usize {
        *self.gate.arrived.borrow()
    }

    /// Waits until at least `n` calls have reached the hold.
    pub async fn wait_for_calls(&self, n: usize) {
        let mut arrived = self.gate.arrived.subscribe();
        // The sender lives in `self.gate`: waiting cannot fail.
        let _ = arrived.wait_for(|count| *count >= n).await;
    }

    /// Lets the parked calls, and every later call, through.
    pub fn release(self) {
        // Drop does the work.
    }
}

impl Drop for HeldCalls {
    fn drop(&mut self) {
        self.gates.release(self.method, &self.gate);
    }
}

impl std::fmt::Debug for HeldCalls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeldCalls")
            .field("method", &self.method)
            .field("arrived", &self.arrived())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use k8s_openapi::api::core::v1::Service;

    use super::*;
    use crate::FakeCloud;
    use cloud_controllers::cloud::LoadBalancer;

    fn svc() -> Service {
        crate::objects::service("web", "uid-1")
    }

    #[tokio::test]
    async fn held_call_waits_for_release_and_sees_the_world_as_it_is_then() {
        let cloud = FakeCloud::new();
        let held = cloud.hold(Method::EnsureLoadBalancer);
        let worker = {
            let cloud = cloud.clone();
            tokio::spawn(async move { cloud.ensure_load_balancer("k", &svc(), &[]).await })
        };
        held.wait_for_calls(1).await;
        assert_eq!(held.arrived(), 1);
        assert!(!worker.is_finished());
        assert!(cloud.calls().is_empty(), "a parked call is not logged yet");
        // While parked, the test injects a fault the call will meet when it goes on.
        cloud.fail(Method::EnsureLoadBalancer, crate::FaultSpec::other("gone"));
        held.release();
        let result = worker.await.unwrap();
        assert_eq!(result.unwrap_err().to_string(), "gone");
        assert_eq!(cloud.calls_to(Method::EnsureLoadBalancer).len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn other_methods_and_released_holds_do_not_wait() {
        let cloud = FakeCloud::new();
        let held = cloud.hold(Method::EnsureLoadBalancer);
        let start = tokio::time::Instant::now();
        cloud.get_load_balancer("k", &svc()).await.unwrap();
        drop(held);
        tokio::time::timeout(
            Duration::from_secs(1),
            cloud.ensure_load_balancer("k", &svc(), &[]),
        )
        .await
        .expect("released hold lets calls through")
        .unwrap();
        assert_eq!(start.elapsed(), Duration::ZERO);
    }

    #[tokio::test]
    async fn holding_twice_shares_one_hold() {
        let cloud = FakeCloud::new();
        let first = cloud.hold(Method::GetLoadBalancer);
        let second = cloud.hold(Method::GetLoadBalancer);
        let worker = {
            let cloud = cloud.clone();
            tokio::spawn(async move { cloud.get_load_balancer("k", &svc()).await })
        };
        second.wait_for_calls(1).await;
        assert_eq!(first.arrived(), 1);
        first.release();
        worker.await.unwrap().unwrap();
    }
}
