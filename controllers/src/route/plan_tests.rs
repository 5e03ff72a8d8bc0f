//! Table tests of the route reconcile plan.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeSpec, NodeStatus};

use super::*;
use crate::route::cidrs::parse_cluster_cidrs;

fn addr(ip: &str) -> NodeAddress {
    NodeAddress {
        type_: "InternalIP".into(),
        address: ip.into(),
    }
}

fn node(name: &str, cidrs: &[&str], ips: &[&str]) -> Arc<Node> {
    let mut n = Node {
        spec: Some(NodeSpec {
            pod_cidrs: (!cidrs.is_empty()).then(|| cidrs.iter().map(|c| c.to_string()).collect()),
            ..Default::default()
        }),
        status: Some(NodeStatus {
            addresses: Some(ips.iter().map(|ip| addr(ip)).collect()),
            ..Default::default()
        }),
        ..Default::default()
    };
    n.metadata.name = Some(name.into());
    n.metadata.uid = Some(format!("uid-{name}"));
    Arc::new(n)
}

fn route(target: &str, cidr: &str) -> Route {
    Route {
        name: format!("r-{target}-{cidr}"),
        target_node: target.into(),
        destination_cidr: cidr.into(),
        ..Default::default()
    }
}

fn with_addrs(mut r: Route, ips: &[&str]) -> Route {
    r.enable_node_addresses = true;
    r.target_node_addresses = ips.iter().map(|ip| addr(ip)).collect();
    r
}

fn blackhole(mut r: Route) -> Route {
    r.blackhole = true;
    r
}

struct Case {
    name: &'static str,
    cluster: &'static str,
    nodes: Vec<Arc<Node>>,
    routes: Vec<Route>,
    /// (node, cidr, action)
    actions: Vec<(&'static str, &'static str, RouteAction)>,
    /// nodes with an empty action map
    empty: Vec<&'static str>,
    /// destination CIDRs deleted, by route name
    deleted: Vec<String>,
    /// (node, cidr) created
    created: Vec<(&'static str, &'static str)>,
    wait: bool,
}

impl Default for Case {
    fn default() -> Self {
        Case {
            name: "",
            cluster: "10.244.0.0/16",
            nodes: vec![],
            routes: vec![],
            actions: vec![],
            empty: vec![],
            deleted: vec![],
            created: vec![],
            wait: false,
        }
    }
}

use RouteAction::*;

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "nothing",
            ..Default::default()
        },
        Case {
            name: "new node gets a route",
            nodes: vec![node("a", &["10.244.1.0/24"], &["192.168.0.1"])],
            actions: vec![("a", "10.244.1.0/24", Add)],
            created: vec![("a", "10.244.1.0/24")],
            ..Default::default()
        },
        Case {
            name: "existing route is kept",
            nodes: vec![node("a", &["10.244.1.0/24"], &[])],
            routes: vec![route("a", "10.244.1.0/24")],
            actions: vec![("a", "10.244.1.0/24", Keep)],
            ..Default::default()
        },
        Case {
            name: "route of a vanished node is deleted",
            routes: vec![route("gone", "10.244.9.0/24")],
            deleted: vec!["r-gone-10.244.9.0/24".into()],
            ..Default::default()
        },
        Case {
            name: "route of a changed pod CIDR is replaced",
            nodes: vec![node("a", &["10.244.2.0/24"], &[])],
            routes: vec![route("a", "10.244.1.0/24")],
            actions: vec![("a", "10.244.2.0/24", Add)],
            deleted: vec!["r-a-10.244.1.0/24".into()],
            created: vec![("a", "10.244.2.0/24")],
            ..Default::default()
        },
        Case {
            name: "foreign routes are untouched",
            routes: vec![
                route("gone", "10.0.0.0/8"),
                route("gone", "192.168.5.0/24"),
                route("gone", "fd00::/64"),
                blackhole(route("x", "172.16.0.0/24")),
            ],
            ..Default::default()
        },
        Case {
            name: "route equal to the cluster CIDR is owned",
            routes: vec![route("gone", "10.244.0.0/16")],
            deleted: vec!["r-gone-10.244.0.0/16".into()],
            ..Default::default()
        },
        Case {
            name: "unparsable route CIDR is ignored",
            routes: vec![route("gone", "not-a-cidr")],
            ..Default::default()
        },
        Case {
            name: "blackhole route of a live node is deleted, recreated next pass",
            nodes: vec![node("a", &["10.244.1.0/24"], &[])],
            routes: vec![blackhole(route("a", "10.244.1.0/24"))],
            actions: vec![("a", "10.244.1.0/24", Keep)],
            deleted: vec!["r-a-10.244.1.0/24".into()],
            ..Default::default()
        },
        Case {
            name: "route with empty target is deleted",
            routes: vec![route("", "10.244.3.0/24")],
            deleted: vec!["r--10.244.3.0/24".into()],
            ..Default::default()
        },
        Case {
            name: "node without pod CIDRs but with a route gets an empty map",
            nodes: vec![node("a", &[], &[]), node("b", &[], &[])],
            routes: vec![route("a", "10.244.1.0/24")],
            empty: vec!["a"],
            deleted: vec!["r-a-10.244.1.0/24".into()],
            ..Default::default()
        },
        Case {
            name: "node addresses equal as a set keep the route",
            nodes: vec![node(
                "a",
                &["10.244.1.0/24"],
                &["192.168.0.1", "192.168.0.2"],
            )],
            routes: vec![with_addrs(
                route("a", "10.244.1.0/24"),
                &["192.168.0.2", "192.168.0.1"],
            )],
            actions: vec![("a", "10.244.1.0/24", Keep)],
            wait: true,
            ..Default::default()
        },
        Case {
            name: "stale node addresses update the route",
            nodes: vec![node("a", &["10.244.1.0/24"], &["192.168.0.9"])],
            routes: vec![with_addrs(route("a", "10.244.1.0/24"), &["192.168.0.1"])],
            actions: vec![("a", "10.244.1.0/24", Update)],
            deleted: vec!["r-a-10.244.1.0/24".into()],
            created: vec![("a", "10.244.1.0/24")],
            wait: true,
            ..Default::default()
        },
        Case {
            name: "stale addresses ignored when the route does not track them",
            nodes: vec![node("a", &["10.244.1.0/24"], &["192.168.0.9"])],
            routes: vec![{
                let mut r = route("a", "10.244.1.0/24");
                r.target_node_addresses = vec![addr("192.168.0.1")];
                r
            }],
            actions: vec![("a", "10.244.1.0/24", Keep)],
            ..Default::default()
        },
        Case {
            name: "only the first route decides the wait",
            nodes: vec![
                node("a", &["10.244.1.0/24"], &[]),
                node("b", &["10.244.2.0/24"], &[]),
            ],
            routes: vec![
                route("a", "10.244.1.0/24"),
                with_addrs(route("b", "10.244.2.0/24"), &[]),
            ],
            actions: vec![("a", "10.244.1.0/24", Keep), ("b", "10.244.2.0/24", Keep)],
            ..Default::default()
        },
        Case {
            name: "dual-stack: each family independently",
            cluster: "10.244.0.0/16,fd00:10:244::/56",
            nodes: vec![node("a", &["10.244.1.0/24", "fd00:10:244:1::/64"], &[])],
            routes: vec![
                route("a", "10.244.1.0/24"),
                route("gone", "fd00:10:244:9::/64"),
            ],
            actions: vec![
                ("a", "10.244.1.0/24", Keep),
                ("a", "fd00:10:244:1::/64", Add),
            ],
            deleted: vec!["r-gone-fd00:10:244:9::/64".into()],
            created: vec![("a", "fd00:10:244:1::/64")],
            ..Default::default()
        },
        Case {
            name: "single-stack cluster leaves IPv6 routes alone",
            nodes: vec![node("a", &["10.244.1.0/24", "fd00:10:244:1::/64"], &[])],
            routes: vec![route("gone", "fd00:10:244:9::/64")],
            actions: vec![
                ("a", "10.244.1.0/24", Add),
                ("a", "fd00:10:244:1::/64", Add),
            ],
            created: vec![("a", "10.244.1.0/24"), ("a", "fd00:10:244:1::/64")],
            ..Default::default()
        },
    ]
}

#[test]
fn plan_table() {
    for case in cases() {
        let cidrs = parse_cluster_cidrs(case.cluster).unwrap();
        let got = plan(&case.nodes, &case.routes, &cidrs);
        let mut want_actions: BTreeMap<String, BTreeMap<String, RouteAction>> = BTreeMap::new();
        for n in &case.empty {
            want_actions.entry(n.to_string()).or_default();
        }
        for (n, c, a) in &case.actions {
            want_actions
                .entry(n.to_string())
                .or_default()
                .insert(c.to_string(), *a);
        }
        assert_eq!(got.node_actions, want_actions, "{}: actions", case.name);
        let deleted: Vec<String> = got.deletions.iter().map(|r| r.name.clone()).collect();
        assert_eq!(deleted, case.deleted, "{}: deletions", case.name);
        let created: Vec<(String, String)> = got
            .creations
            .iter()
            .map(|c| (c.node.clone(), c.route.destination_cidr.clone()))
            .collect();
        let want_created: Vec<(String, String)> = case
            .created
            .iter()
            .map(|(n, c)| (n.to_string(), c.to_string()))
            .collect();
        assert_eq!(created, want_created, "{}: creations", case.name);
        assert_eq!(got.wait_for_deletions, case.wait, "{}: wait", case.name);
    }
}

#[test]
fn creation_carries_name_hint_and_addresses() {
    let cidrs = parse_cluster_cidrs("10.244.0.0/16").unwrap();
    let got = plan(
        &[node("a", &["10.244.1.0/24"], &["192.168.0.1"])],
        &[],
        &cidrs,
    );
    assert_eq!(
        got.creations,
        vec![RouteCreation {
            node: "a".into(),
            name_hint: "uid-a".into(),
            route: Route {
                target_node: "a".into(),
                target_node_addresses: vec![addr("192.168.0.1")],
                destination_cidr: "10.244.1.0/24".into(),
                ..Default::default()
            },
        }]
    );
}

#[test]
fn network_unavailable_follows_creations() {
    let cidrs = parse_cluster_cidrs("10.244.0.0/16,fd00::/56").unwrap();
    let nodes = vec![
        node("a", &["10.244.1.0/24", "fd00::/64"], &[]),
        node("b", &["10.244.2.0/24"], &[]),
        node("c", &[], &[]),
        node("d", &[], &[]),
    ];
    let routes = vec![route("b", "10.244.2.0/24"), route("c", "10.244.3.0/24")];
    let mut p = plan(&nodes, &routes, &cidrs);
    let expect = |a: bool| {
        BTreeMap::from([
            ("a".to_string(), a),
            ("b".to_string(), false),
            ("c".to_string(), true),
        ])
    };
    assert_eq!(p.network_unavailable(), expect(true));
    p.mark_created("a", "10.244.1.0/24");
    assert_eq!(
        p.network_unavailable(),
        expect(true),
        "one family still missing"
    );
    p.mark_created("a", "fd00::/64");
    assert_eq!(p.network_unavailable(), expect(false));
    p.mark_created("zz", "10.0.0.0/8");
    assert_eq!(
        p.network_unavailable(),
        expect(false),
        "unknown node is ignored"
    );
}

#[test]
fn ownership_table() {
    let cidrs = parse_cluster_cidrs("10.244.0.0/16,fd00::/56").unwrap();
    let cases = [
        ("10.244.1.0/24", Some(true)),
        ("10.244.0.0/16", Some(true)),
        ("10.0.0.0/8", Some(false)),
        ("10.245.0.0/24", Some(false)),
        ("fd00:0:0:ff::/64", Some(true)),
        ("fd00:0:0:100::/64", Some(false)),
        ("garbage", None),
    ];
    for (cidr, want) in cases {
        assert_eq!(owned(&route("n", cidr), &cidrs), want, "{cidr}");
    }
}

mod properties {
    //! Invariants over random clusters: foreign routes are never deleted, and applying the plan
    //! converges (blackholed routes of live nodes take one extra pass, as upstream).

    use proptest::prelude::*;

    use super::*;

    const POOL: &[&str] = &[
        "10.244.0.0/24",
        "10.244.1.0/24",
        "10.244.2.0/24",
        "10.244.3.0/24",
        "fd00:10:244::/64",
        "fd00:10:244:1::/64",
        "192.168.0.0/24",
        "fd99::/64",
        "10.0.0.0/8",
    ];
    const TARGETS: &[&str] = &["n0", "n1", "n2", "gone", ""];

    fn arb_route() -> impl Strategy<Value = Route> {
        (
            0..POOL.len(),
            0..TARGETS.len(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(|(c, t, black, track, stale)| {
                let mut r = route(TARGETS[t], POOL[c]);
                r.blackhole = black;
                if track {
                    r = with_addrs(
                        r,
                        if stale {
                            &["192.168.9.9"]
                        } else {
                            &["192.168.0.1"]
                        },
                    );
                }
                r
            })
    }

    /// Three nodes; node i may own pool entries i and i+4 (unique per node, both families).
    fn arb_nodes() -> impl Strategy<Value = Vec<Arc<Node>>> {
        proptest::collection::vec((any::<bool>(), any::<bool>()), 3).prop_map(|picks| {
            picks
                .iter()
                .enumerate()
                .map(|(i, (v4, v6))| {
                    let mut cidrs = vec![];
                    if *v4 {
                        cidrs.push(POOL[i]);
                    }
                    if *v6 && i < 2 {
                        cidrs.push(POOL[i + 4]);
                    }
                    node(&format!("n{i}"), &cidrs, &["192.168.0.1"])
                })
                .collect()
        })
    }

    fn apply(routes: &[Route], p: &RoutePlan) -> Vec<Route> {
        let mut out: Vec<Route> = routes
            .iter()
            .filter(|r| !p.deletions.contains(r))
            .cloned()
            .collect();
        out.extend(p.creations.iter().map(|c| c.route.clone()));
        out
    }

    proptest! {
        #[test]
        fn foreign_routes_survive_and_plans_converge(
            nodes in arb_nodes(),
            routes in proptest::collection::vec(arb_route(), 0..8),
        ) {
            // A cloud route table holds one route per destination CIDR (the fake cloud enforces
            // it too). With two routes for the same node and CIDR, upstream's plan looks at the
            // first one only, so convergence would depend on list order: not a case clouds produce.
            let mut seen = std::collections::HashSet::new();
            let routes: Vec<Route> = routes
                .into_iter()
                .filter(|r| seen.insert(r.destination_cidr.clone()))
                .collect();
            let cidrs = parse_cluster_cidrs("10.244.0.0/16,fd00:10:244::/56").unwrap();
            let p = plan(&nodes, &routes, &cidrs);
            for r in &p.deletions {
                prop_assert_eq!(owned(r, &cidrs), Some(true), "deleted a foreign route {:?}", r);
            }
            for c in &p.creations {
                let node = nodes.iter().find(|n| n.metadata.name.as_deref() == Some(&c.node)).unwrap();
                prop_assert!(pod_cidrs(node).contains(&c.route.destination_cidr));
            }
            let once = apply(&routes, &p);
            // One pass converges, except that a blackholed route of a live node is only
            // recreated by the next pass.
            let next = plan(&nodes, &once, &cidrs);
            prop_assert!(next.deletions.is_empty(), "still deleting {:?}", next.deletions);
            for c in &next.creations {
                prop_assert!(
                    routes.iter().any(|r| r.blackhole && r.destination_cidr == c.route.destination_cidr),
                    "creation deferred without a blackhole: {:?}", c
                );
            }
            let twice = apply(&once, &plan(&nodes, &once, &cidrs));
            let last = plan(&nodes, &twice, &cidrs);
            prop_assert!(last.deletions.is_empty(), "still deleting {:?}", last.deletions);
            prop_assert!(last.creations.is_empty(), "still creating {:?}", last.creations);
            // Converged: only nodes without pod CIDRs (targeted by foreign routes) are unavailable.
            for (name, unavailable) in last.network_unavailable() {
                let node = nodes.iter().find(|n| n.metadata.name.as_deref() == Some(&name)).unwrap();
                prop_assert_eq!(unavailable, pod_cidrs(node).is_empty(), "node {}", name);
            }
        }
    }
}
