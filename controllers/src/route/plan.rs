//! The reconcile plan of one route pass (upstream `reconcile` in `route_controller.go`), as a
//! pure function of the Nodes, the cloud's routes and the cluster CIDRs, so every decision is
//! unit-testable without a cloud: which routes to delete, which to create, and which Nodes get
//! a NetworkUnavailable condition.
//!
//! Upstream quirks kept on purpose: a blackholed route of a live node is deleted in this pass and
//! only recreated in the next one (its action is `Keep` because a route with its CIDR exists);
//! routes of foreign CIDRs (outside every cluster CIDR) are never touched.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, NodeAddress};

use super::cidrs::Cidr;
use crate::cloud::Route;

/// What a node's pod CIDR needs (upstream `routeAction`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouteAction {
    /// A matching route exists.
    Keep,
    /// No route exists for the CIDR: create one.
    Add,
    /// A route exists but targets stale node addresses: delete and recreate it.
    Update,
}

/// One `CreateRoute` call the pass will make.
#[derive(Clone, Debug, PartialEq)]
pub struct RouteCreation {
    /// The target node's name.
    pub node: String,
    /// The target node's UID, passed to the cloud as the route's name hint.
    pub name_hint: String,
    /// The route to create.
    pub route: Route,
}

/// Everything one reconcile pass will do, decided before any cloud call.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RoutePlan {
    /// Node → pod CIDR → action, for every node with pod CIDRs or with routes targeting it
    /// (the latter possibly empty). Only these nodes get a NetworkUnavailable write.
    pub node_actions: BTreeMap<String, BTreeMap<String, RouteAction>>,
    /// Owned routes to delete.
    pub deletions: Vec<Route>,
    /// Routes to create, in node order.
    pub creations: Vec<RouteCreation>,
    /// Whether creations must wait for every deletion (upstream: when the first listed route
    /// has `enable_node_addresses`, as an `Update` re-creates the same CIDR).
    pub wait_for_deletions: bool,
}

/// Whether a route belongs to this cluster: its CIDR parses and its first or last address lies
/// in a cluster CIDR. `None` when the route's CIDR does not parse (upstream logs and skips it).
pub fn owned(route: &Route, cluster_cidrs: &[Cidr]) -> Option<bool> {
    let cidr: Cidr = route.destination_cidr.parse().ok()?;
    let inside = |ip: IpAddr| cluster_cidrs.iter().any(|c| c.contains(ip));
    Some(inside(cidr.first()) || inside(cidr.last()))
}

/// Same addresses as a set, as upstream `equalNodeAddrs` (same length, each found in the other).
fn equal_node_addrs(a: &[NodeAddress], b: &[NodeAddress]) -> bool {
    a.len() == b.len() && a.iter().all(|x| b.contains(x))
}

fn pod_cidrs(node: &Node) -> &[String] {
    node.spec
        .as_ref()
        .and_then(|s| s.pod_cidrs.as_deref())
        .unwrap_or_default()
}

fn node_addresses(node: &Node) -> Vec<NodeAddress> {
    node.status
        .as_ref()
        .and_then(|s| s.addresses.clone())
        .unwrap_or_default()
}

/// Computes the plan of one pass.
pub fn plan(nodes: &[Arc<Node>], routes: &[Route], cluster_cidrs: &[Cidr]) -> RoutePlan {
    let mut by_node: BTreeMap<&str, Vec<&Route>> = BTreeMap::new();
    for route in routes.iter().filter(|r| !r.target_node.is_empty()) {
        by_node.entry(&route.target_node).or_default().push(route);
    }

    let mut node_actions: BTreeMap<String, BTreeMap<String, RouteAction>> = BTreeMap::new();
    let mut creations = Vec::new();
    for node in nodes {
        let name = node.metadata.name.clone().unwrap_or_default();
        let cidrs = pod_cidrs(node);
        let existing = by_node.get(name.as_str());
        if cidrs.is_empty() {
            if existing.is_some() {
                node_actions.entry(name).or_default();
            }
            continue;
        }
        let addresses = node_addresses(node);
        let actions = node_actions.entry(name.clone()).or_default();
        for cidr in cidrs {
            let matching = existing
                .and_then(|rs| rs.iter().find(|r| &r.destination_cidr == cidr))
                .copied();
            let action = match matching {
                None => RouteAction::Add,
                Some(r)
                    if !r.enable_node_addresses
                        || equal_node_addrs(&r.target_node_addresses, &addresses) =>
                {
                    RouteAction::Keep
                }
                Some(_) => RouteAction::Update,
            };
            actions.insert(cidr.clone(), action);
            if action != RouteAction::Keep {
                creations.push(RouteCreation {
                    node: name.clone(),
                    name_hint: node.metadata.uid.clone().unwrap_or_default(),
                    route: Route {
                        target_node: name.clone(),
                        target_node_addresses: addresses.clone(),
                        destination_cidr: cidr.clone(),
                        ..Default::default()
                    },
                });
            }
        }
    }

    let deletions = routes
        .iter()
        .filter(|route| match owned(route, cluster_cidrs) {
            None => {
                tracing::error!(route = %route.name, cidr = %route.destination_cidr, "could not parse route destination CIDR; ignoring route");
                false
            }
            Some(false) => false,
            Some(true) => {
                let action = node_actions
                    .get(&route.target_node)
                    .and_then(|a| a.get(&route.destination_cidr));
                route.blackhole || matches!(action, None | Some(RouteAction::Update))
            }
        })
        .cloned()
        .collect();

    RoutePlan {
        node_actions,
        deletions,
        creations,
        wait_for_deletions: routes.first().is_some_and(|r| r.enable_node_addresses),
    }
}

impl RoutePlan {
    /// Records that the route for `node`/`cidr` was created, so the node's condition says so.
    pub fn mark_created(&mut self, node: &str, cidr: &str) {
        if let Some(action) = self
            .node_actions
            .get_mut(node)
            .and_then(|a| a.get_mut(cidr))
        {
            *action = RouteAction::Keep;
        }
    }

    /// Node → whether the node's network is unavailable (some route missing, or routes target it
    /// but it has no pod CIDRs), for every node with an action map.
    pub fn network_unavailable(&self) -> BTreeMap<String, bool> {
        self.node_actions
            .iter()
            .map(|(node, actions)| {
                let unavailable =
                    actions.is_empty() || actions.values().any(|a| *a != RouteAction::Keep);
                (node.clone(), unavailable)
            })
            .collect()
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
