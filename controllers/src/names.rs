//! Every stock controller's names in one place, as upstream's `k8s.io/cloud-provider/names`: the
//! canonical name (`--controllers`, logs, spans, metrics, health checks), the permanent
//! `--controllers` alias, the client name (user agent suffix, and the ServiceAccount in
//! `kube-system` with `--use-service-account-credentials`) and the event source component.
//! Canonical names and aliases are IDs: never change one without keeping the old as an alias.

/// The cloud-node controller (`node/`).
pub mod cloud_node {
    /// Canonical name: upstream `names.CloudNodeController`.
    pub const CONTROLLER_NAME: &str = "cloud-node-controller";
    /// `--controllers` alias: upstream `CCMControllerAliases` key for `CloudNodeController`.
    pub const CONTROLLER_ALIAS: &str = "cloud-node";
    /// Client name: upstream `ControllerInitContext.ClientName` of this controller.
    pub const CLIENT_NAME: &str = "node-controller";
    /// Event source: upstream `record.EventSource.Component` of its recorder.
    pub const EVENT_COMPONENT: &str = CONTROLLER_NAME;
    /// How spans and `controller_runtime_*` metrics name the periodic address refresh: the
    /// canonical name, qualified, so a pass (paced over the whole period) stays apart from the
    /// per-Node reconciles (ours; upstream's `UpdateNodeStatus` loop has no metrics).
    pub const ADDRESS_REFRESH_CONTROLLER: &str = "cloud-node-controller/address-refresh";
}

/// The cloud-node-lifecycle controller (`node_lifecycle/`).
pub mod cloud_node_lifecycle {
    /// Canonical name: upstream `names.CloudNodeLifecycleController`.
    pub const CONTROLLER_NAME: &str = "cloud-node-lifecycle-controller";
    /// `--controllers` alias: upstream `CCMControllerAliases` key for
    /// `CloudNodeLifecycleController`.
    pub const CONTROLLER_ALIAS: &str = "cloud-node-lifecycle";
    /// Client name: upstream `ControllerInitContext.ClientName` of this controller (the same
    /// ServiceAccount as the cloud-node controller's, as upstream).
    pub const CLIENT_NAME: &str = "node-controller";
    /// Event source: upstream `record.EventSource.Component` of its recorder.
    pub const EVENT_COMPONENT: &str = CONTROLLER_NAME;
}

/// The service load-balancer controller (`service/`).
pub mod service_lb {
    /// Canonical name: upstream `names.ServiceLBController`.
    pub const CONTROLLER_NAME: &str = "service-lb-controller";
    /// `--controllers` alias: upstream `CCMControllerAliases` key for `ServiceLBController`.
    pub const CONTROLLER_ALIAS: &str = "service";
    /// Client name: upstream `ControllerInitContext.ClientName` of this controller.
    pub const CLIENT_NAME: &str = "service-controller";
    /// Event source: upstream `record.EventSource.Component` of its recorder.
    pub const EVENT_COMPONENT: &str = "service-controller";
    /// How logs, spans and `controller_runtime_*` metrics name the node-sync workers: the
    /// canonical name, qualified, so their numbers stay apart from the Service workers' (ours;
    /// upstream's node sync has no workers of its own to name).
    pub const NODE_SYNC_CONTROLLER: &str = "service-lb-controller/node-sync";
}

/// The node-route controller (`route/`).
pub mod node_route {
    /// Canonical name: upstream `names.NodeRouteController`.
    pub const CONTROLLER_NAME: &str = "node-route-controller";
    /// `--controllers` alias: upstream `CCMControllerAliases` key for `NodeRouteController`.
    pub const CONTROLLER_ALIAS: &str = "route";
    /// Client name: upstream `ControllerInitContext.ClientName` of this controller.
    pub const CLIENT_NAME: &str = "route-controller";
    /// Event source: upstream `record.EventSource.Component` of its recorder.
    pub const EVENT_COMPONENT: &str = "route_controller";
}
