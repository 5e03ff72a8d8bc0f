//! What a provider hands the kit: the instances it knows, a Service to balance, a cluster name and
//! route CIDRs reserved for the checks, and the Kubernetes objects the checks build from them.

use k8s_openapi::api::core::v1::{Node, NodeSpec, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// A machine as Kubernetes names it: its Node name and its `spec.providerID`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instance {
    /// The Node name (the kubelet's hostname or `--hostname-override`).
    pub node_name: String,
    /// `<provider-name>://<instance-id>`, as the provider reports it.
    pub provider_id: String,
}

impl Instance {
    /// The instance whose Node is `node_name` and whose provider ID is `provider_id`.
    pub fn new(node_name: impl Into<String>, provider_id: impl Into<String>) -> Self {
        Instance {
            node_name: node_name.into(),
            provider_id: provider_id.into(),
        }
    }

    /// Its Node once initialized: name and `spec.providerID` set.
    pub fn node(&self) -> Node {
        node(&self.node_name, Some(&self.provider_id))
    }

    /// Its Node before initialization: only the name, no provider ID yet.
    pub fn unregistered_node(&self) -> Node {
        node(&self.node_name, None)
    }
}

/// A Node called `name`, with `spec.providerID` when given.
pub(crate) fn node(name: &str, provider_id: Option<&str>) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            provider_id: provider_id.map(str::to_owned),
            ..NodeSpec::default()
        }),
        ..Node::default()
    }
}

/// What the checks run against. The provider must know `existing` (running), must not know
/// `missing` (a deleted machine: for a cloud that tells "never had" from "deleted", one it had),
/// and must not already balance `service`; the route CIDRs must be free and are the kit's to
/// create and delete.
#[derive(Clone, Debug)]
pub struct Fixture {
    /// `--cluster-name`, passed to every load-balancer and route call.
    pub cluster_name: String,
    /// A running instance.
    pub existing: Instance,
    /// An instance that does not exist (any more).
    pub missing: Instance,
    /// A stopped instance, which must still exist; its checks are skipped without one.
    pub stopped: Option<Instance>,
    /// A Service of type LoadBalancer with namespace, name and UID; see [`load_balancer_service`].
    pub service: Service,
    /// Pod CIDRs to route to `existing`; the route checks are skipped without one.
    pub route_cidrs: Vec<String>,
}

impl Fixture {
    /// A fixture without a stopped instance or route CIDRs (add them with the setters below).
    pub fn new(
        cluster_name: impl Into<String>,
        existing: Instance,
        missing: Instance,
        service: Service,
    ) -> Self {
        Fixture {
            cluster_name: cluster_name.into(),
            existing,
            missing,
            stopped: None,
            service,
            route_cidrs: Vec::new(),
        }
    }

    /// Adds a stopped instance, for the shutdown checks.
    pub fn stopped(mut self, instance: Instance) -> Self {
        self.stopped = Some(instance);
        self
    }

    /// Sets the pod CIDRs the route checks may create routes to.
    pub fn route_cidrs<S: Into<String>>(mut self, cidrs: impl IntoIterator<Item = S>) -> Self {
        self.route_cidrs = cidrs.into_iter().map(Into::into).collect();
        self
    }

    /// Why the checks cannot run on this fixture, if they cannot.
    pub fn validate(&self) -> Result<(), FixtureError> {
        let meta = &self.service.metadata;
        let missing_field = |v: &Option<String>| v.as_deref().is_none_or(str::is_empty);
        if missing_field(&meta.namespace) || missing_field(&meta.name) || missing_field(&meta.uid) {
            return Err(FixtureError::ServiceIdentity);
        }
        let instances = [
            Some(&self.existing),
            Some(&self.missing),
            self.stopped.as_ref(),
        ];
        for i in instances.into_iter().flatten() {
            if i.node_name.is_empty() || i.provider_id.is_empty() {
                return Err(FixtureError::EmptyInstance(i.clone()));
            }
        }
        if self.existing.node_name == self.missing.node_name
            || self.existing.provider_id == self.missing.provider_id
        {
            return Err(FixtureError::SameInstance);
        }
        if self.cluster_name.is_empty() {
            return Err(FixtureError::EmptyClusterName);
        }
        Ok(())
    }
}

/// Why a [`Fixture`] cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum FixtureError {
    /// The Service lacks what identifies it to a provider.
    #[error("the fixture's service needs metadata.namespace, metadata.name and metadata.uid")]
    ServiceIdentity,
    /// An instance without a node name or provider ID.
    #[error("fixture instance {0:?} needs both a node name and a provider ID")]
    EmptyInstance(Instance),
    /// `existing` and `missing` share a name or provider ID.
    #[error(
        "the fixture's existing and missing instances must differ in node name and provider ID"
    )]
    SameInstance,
    /// No cluster name.
    #[error("the fixture's cluster name is empty")]
    EmptyClusterName,
}

/// The smallest Service a provider balances: `namespace/name` with UID `uid`, type LoadBalancer,
/// one TCP port 80.
pub fn load_balancer_service(namespace: &str, name: &str, uid: &str) -> Service {
    Service {
        metadata: ObjectMeta {
            namespace: Some(namespace.to_owned()),
            name: Some(name.to_owned()),
            uid: Some(uid.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".to_owned()),
            ports: Some(vec![ServicePort {
                name: Some("http".to_owned()),
                protocol: Some("TCP".to_owned()),
                port: 80,
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}
