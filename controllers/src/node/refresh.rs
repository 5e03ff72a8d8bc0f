//! cloud-node's periodic address refresh as a task of its own: every
//! `--node-status-update-frequency` each initialized Node's addresses are fetched from the cloud,
//! the calls spread evenly over the period instead of all at once.
//!
//! Upstream (`UpdateNodeStatus` under `wait.Until`) calls the cloud for every Node back to back
//! each period, a burst the size of the cluster against the cloud's quota. Here the loop is the
//! framework's [`Periodic`] loop on a non-sliding period (named [`ADDRESS_REFRESH_CONTROLLER`]
//! in spans and `controller_runtime_*` metrics, so its passes stay apart from the per-Node
//! reconciles' numbers), and one pass starts Node `i` of `n` at
//! `i × period / n`, so each Node is still refreshed once per period while the cloud sees a
//! steady trickle (which the `--cloud-api-*` budget, applied to every cloud call, caps further).
//!
//! The loop runs in its own task, not joined with cloud-node's workers: if a pass fails or the
//! loop ends, the workers keep initializing Nodes. On shutdown the pass starts no further Node,
//! finishes the calls in flight, and the task is awaited (and aborted if the controller's future
//! is dropped), so nothing acts after the controller has stopped.

use std::sync::Arc;
use std::time::Duration;

use std::convert::Infallible;

use controller_manager::controller::layers::ControllerMetrics;
use controller_manager::controller::{ControllerScope, Period, Periodic};
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use super::NodeController;
use crate::names::cloud_node::{ADDRESS_REFRESH_CONTROLLER, CONTROLLER_NAME};

/// The refresh loop's task; await [`Self::stopped`] after cancelling its token.
pub struct RefreshTask(AbortOnDropHandle<()>);

/// Starts the loop: a pass every `period`, at most `workers` Nodes at a time, until `shutdown`;
/// its passes are counted in `metrics`.
pub fn spawn(
    controller: Arc<NodeController>,
    period: Duration,
    workers: usize,
    metrics: &ControllerMetrics,
    shutdown: CancellationToken,
) -> RefreshTask {
    let stop = shutdown.clone();
    let periodic = Periodic::new(
        ADDRESS_REFRESH_CONTROLLER,
        Period::NonSliding(period),
        metrics,
    );
    let refresh = periodic.run(shutdown, move || {
        let controller = Arc::clone(&controller);
        let stop = stop.clone();
        async move {
            controller
                .update_node_status_over(workers, period, &stop)
                .await;
            Ok::<(), Infallible>(())
        }
    });
    // The task runs in cloud-node's scope, so a panicking pass is shown on
    // `/healthz/cloud-node-controller` as the controller's own.
    let task = match ControllerScope::current() {
        Some(scope) => tokio::spawn(scope.scope(refresh)),
        None => tokio::spawn(refresh),
    };
    RefreshTask(AbortOnDropHandle::new(task))
}

impl RefreshTask {
    /// Waits for the loop to end (after its token is cancelled); a loop that died is logged.
    pub async fn stopped(self) {
        if let Err(err) = self.0.await {
            tracing::error!(
                controller = CONTROLLER_NAME,
                error = %err,
                "the node address refresh loop died; addresses are no longer refreshed"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::Node;

    use super::*;
    use crate::cloud::{CloudError, InstanceMetadata};

    /// A cloud with instances that no call reaches: the lister panics first.
    struct Unreached;

    #[async_trait::async_trait]
    impl crate::cloud::InstancesV2 for Unreached {
        async fn instance_exists(&self, _: &Node) -> Result<bool, CloudError> {
            unreachable!("the pass panics before any cloud call")
        }
        async fn instance_shutdown(&self, _: &Node) -> Result<bool, CloudError> {
            unreachable!("the pass panics before any cloud call")
        }
        async fn instance_metadata(
            &self,
            _: &Node,
        ) -> Result<Option<InstanceMetadata>, CloudError> {
            unreachable!("the pass panics before any cloud call")
        }
    }

    #[async_trait::async_trait]
    impl crate::cloud::CloudProvider for Unreached {
        fn instances_v2(&self) -> Option<&dyn crate::cloud::InstancesV2> {
            Some(self)
        }
        fn provider_name(&self) -> &str {
            "unreached"
        }
        fn has_cluster_id(&self) -> bool {
            true
        }
    }

    /// A lister whose `list` (what only the refresh pass calls) panics, after saying so.
    struct PanickingList(Arc<tokio::sync::Notify>);

    impl crate::node::NodeLister for PanickingList {
        fn get(&self, _: &str) -> Option<Arc<k8s_openapi::api::core::v1::Node>> {
            None
        }
        fn list(&self) -> Vec<Arc<k8s_openapi::api::core::v1::Node>> {
            self.0.notify_one();
            panic!("refresh pass panics")
        }
    }

    #[tokio::test]
    async fn a_panicking_refresh_pass_stays_in_its_own_task() {
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        let panicked = Arc::new(tokio::sync::Notify::new());
        let parts = crate::node_parts::NodeParts::new(
            Arc::new(Unreached),
            kube::Api::all(client),
            Arc::new(PanickingList(panicked.clone())),
            Arc::new(crate::event_sink::RecordedEvents::default()),
        )
        .unwrap();
        let controller = NodeController::new(parts, crate::node::NodeMetrics::unregistered());
        let shutdown = CancellationToken::new();
        let metrics = ControllerMetrics::new(&mut prometheus_client::registry::Registry::default());
        let task = spawn(
            Arc::new(controller),
            Duration::from_secs(300),
            1,
            &metrics,
            shutdown.clone(),
        );
        // The first pass panics inside the task (the periodic loop's panic guard catches it); the
        // caller goes on, and stopping it still completes.
        tokio::time::timeout(Duration::from_secs(10), panicked.notified())
            .await
            .expect("the first pass runs at once");
        shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(10), task.stopped())
            .await
            .expect("the loop's task ends on shutdown, dead or alive");
    }
}
