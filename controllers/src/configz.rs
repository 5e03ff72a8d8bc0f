//! What `/configz` serves for the cloud-controller-manager: upstream's
//! `cloudcontrollermanager.config.k8s.io/v1alpha1` `CloudControllerManagerConfiguration`, in
//! its JSON shape (the CCM's own sections keep Go's field names, the generic ones their JSON
//! tags), filled from the flags this process runs with.

use controller_manager::options::GenericOptions;
use serde_json::{Value, json};

use crate::options::CloudOptions;

/// The `/configz` key upstream registers the configuration under.
pub const KEY: &str = "cloudcontrollermanager.config.k8s.io";

/// The versioned configuration for `name` running with these flags.
pub fn configuration(name: &str, cloud: &CloudOptions, generic: &GenericOptions) -> Value {
    let (c, le) = (&generic.client, &generic.leader_election);
    json!({
        "kind": "CloudControllerManagerConfiguration",
        "apiVersion": "cloudcontrollermanager.config.k8s.io/v1alpha1",
        "Generic": {
            "port": 0,
            "address": "0.0.0.0",
            "minResyncPeriod": generic.min_resync_period.to_string(),
            "clientConnection": {
                "kubeconfig": c.kubeconfig.as_ref().map(|p| p.display().to_string()).unwrap_or_default(),
                "acceptContentTypes": "",
                // --kube-api-content-type is not supported: requests are JSON.
                "contentType": "application/json",
                "qps": c.kube_api_qps,
                "burst": c.kube_api_burst,
            },
            "controllerStartInterval": generic.controller_start_interval.to_string(),
            "leaderElection": {
                "leaderElect": le.leader_elect,
                "leaseDuration": le.leader_elect_lease_duration.to_string(),
                "renewDeadline": le.leader_elect_renew_deadline.to_string(),
                "retryPeriod": le.leader_elect_retry_period.to_string(),
                "resourceLock": le.leader_elect_resource_lock,
                "resourceName": le.leader_elect_resource_name.clone().unwrap_or_else(|| name.to_string()),
                "resourceNamespace": le.leader_elect_resource_namespace,
            },
            "controllers": generic.controllers,
            "debugging": {
                "enableProfiling": generic.debugging.profiling,
                "enableContentionProfiling": generic.debugging.contention_profiling,
            },
            "leaderMigrationEnabled": false,
            "leaderMigration": {"leaderName": "", "resourceLock": "", "controllerLeaders": null},
        },
        "KubeCloudShared": {
            "CloudProvider": {
                "Name": cloud.cloud_provider,
                "CloudConfigFile": cloud.cloud_config.as_ref().map(|p| p.display().to_string()).unwrap_or_default(),
            },
            "ExternalCloudVolumePlugin": "",
            "UseServiceAccountCredentials": false,
            "AllowUntaggedCloud": cloud.allow_untagged_cloud,
            "RouteReconciliationPeriod": cloud.route_reconciliation_period.to_string(),
            "NodeMonitorPeriod": cloud.node_monitor_period.to_string(),
            "ClusterName": cloud.cluster_name,
            "ClusterCIDR": cloud.cluster_cidr,
            "AllocateNodeCIDRs": cloud.allocate_node_cidrs,
            "CIDRAllocatorType": "RangeAllocator",
            "ConfigureCloudRoutes": cloud.configure_cloud_routes,
            "NodeSyncPeriod": "0s",
        },
        "NodeController": {
            "ConcurrentNodeSyncs": cloud.concurrent_node_syncs,
            "ConcurrentNodeStatusUpdates": cloud.concurrent_node_status_updates,
        },
        "ServiceController": {"ConcurrentServiceSyncs": cloud.concurrent_service_syncs},
        "NodeStatusUpdateFrequency": cloud.node_status_update_frequency.to_string(),
        "Webhook": {"Webhooks": null},
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::CloudManagerOptions;

    #[test]
    fn flags_appear_in_upstreams_shape() {
        let ccm = CloudManagerOptions::from_args([
            "--cloud-provider=fake",
            "--cluster-cidr=10.244.0.0/16",
            "--concurrent-service-syncs=3",
        ])
        .unwrap();
        let v = configuration("cloud-controller-manager", &ccm.cloud, &ccm.generic);
        assert_eq!(v["kind"], "CloudControllerManagerConfiguration");
        assert_eq!(v["Generic"]["minResyncPeriod"], "12h0m0s");
        assert_eq!(v["Generic"]["clientConnection"]["qps"], 20.0);
        assert_eq!(
            v["Generic"]["leaderElection"]["resourceName"],
            "cloud-controller-manager"
        );
        assert_eq!(v["Generic"]["controllers"], json!(["*"]));
        assert_eq!(v["KubeCloudShared"]["CloudProvider"]["Name"], "fake");
        assert_eq!(v["KubeCloudShared"]["ClusterCIDR"], "10.244.0.0/16");
        assert_eq!(v["KubeCloudShared"]["RouteReconciliationPeriod"], "10s");
        assert_eq!(v["ServiceController"]["ConcurrentServiceSyncs"], 3);
        assert_eq!(v["NodeStatusUpdateFrequency"], "5m0s");
    }
}
