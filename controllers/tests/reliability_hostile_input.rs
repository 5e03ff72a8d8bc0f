//! Hostile input to the cloud controllers (issue 9): malformed `--cloud-config` files, bad
//! annotations and labels, odd object names and oversized objects from the API must give clear
//! errors (or be handled as upstream does), never a panic, a hang or an unbounded allocation.
//!
//! The parser inputs include the seeds and findings of the cargo-fuzz targets in
//! `controllers/fuzz/` (`cloud_config`, `provided_node_ip`, `node_labels`), kept here so they
//! run in CI without nightly features.

mod reliability_support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use cloud_controllers::node::addresses::{addresses_from_node_ip, parse_provided_node_ip};
use cloud_controllers::service::predicates::{
    EXCLUDE_FROM_LOAD_BALANCERS_LABEL, node_included, parse_go_bool,
};
use fake_cloud::{FakeCloud, FakeInstance, Method};
use k8s_openapi::api::core::v1::{Node, NodeAddress};
use kube::Api;
use kube::api::PostParams;
use kube_testenv::TestEnv;
use reliability_support::*;

fn config_error(yaml: &[u8]) -> String {
    match FakeCloud::from_config(yaml) {
        Ok(_) => panic!("accepted: {:?}", String::from_utf8_lossy(yaml)),
        Err(e) => e.to_string(),
    }
}

#[test]
fn malformed_cloud_configs_are_rejected_with_what_to_fix() {
    for (yaml, says) in [
        (&b"instances: 5"[..], "invalid fake cloud config"),
        (b"instances:\n  - name: a\n    bogus: 1\n", "bogus"),
        (b"nosuchkey: true\n", "nosuchkey"),
        (
            b"instances:\n  - name: ''\n",
            "instance name must not be empty",
        ),
        (
            b"instances:\n  - name: a\n  - name: a\n",
            "duplicate instance name \"a\"",
        ),
        (
            b"instances:\n  - name: a\n    state: melted\n",
            "key instances[0].state (line 3, column 12): unknown value, expected one of",
        ),
        (b"\xff\xfe\x00garbage", "invalid fake cloud config"),
        (b"{{{{", "invalid fake cloud config"),
        (b"instances: [", "invalid fake cloud config"),
        (
            b"providerName: ''\n",
            "providerName (line 1): provider name \"\" is empty",
        ),
    ] {
        let err = config_error(yaml);
        assert!(
            err.contains(says),
            "{:?}: {err}",
            String::from_utf8_lossy(yaml)
        );
    }
}

#[test]
fn empty_cloud_config_gives_the_default_cloud() {
    for yaml in [&b""[..], b"---\n", b"# only a comment\n", b"{}"] {
        if let Err(e) = FakeCloud::from_config(yaml) {
            panic!("{:?}: {e}", String::from_utf8_lossy(yaml));
        }
    }
}

#[test]
fn deeply_nested_cloud_config_is_an_error_not_a_stack_overflow() {
    for depth in [1_000, 100_000] {
        let yaml = format!("instances: {}{}", "[".repeat(depth), "]".repeat(depth));
        config_error(yaml.as_bytes());
        let yaml = format!("instances: {}", "{a: ".repeat(depth));
        config_error(yaml.as_bytes());
    }
}

#[test]
fn alias_bomb_cloud_config_is_rejected_without_expanding_it() {
    // "Billion laughs": 9 levels of 9 aliases each would expand to 9^9 strings.
    let mut yaml = String::from("a0: &a0 [\"lol\"]\n");
    for i in 1..10 {
        let prev = format!("*a{}", i - 1);
        yaml.push_str(&format!("a{i}: &a{i} [{}]\n", vec![prev; 9].join(",")));
    }
    let started = std::time::Instant::now();
    config_error(yaml.as_bytes());
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "expanded the bomb"
    );
}

#[test]
fn oversized_cloud_config_is_parsed_or_rejected_in_bounded_time() {
    let mut yaml = String::from("instances:\n");
    for i in 0..20_000 {
        yaml.push_str(&format!("  - name: n{i}\n"));
    }
    let started = std::time::Instant::now();
    let cloud = FakeCloud::from_config(yaml.as_bytes()).expect("20k instances are valid");
    assert_eq!(cloud.all_instances().len(), 20_000);
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[test]
fn bad_provided_node_ip_annotations_are_errors() {
    for bad in [
        "",
        ",",
        " ",
        "10.0.0.1,",
        "10.0.0.1,10.0.0.2",
        "fd00::1,fd00::2",
        "::,10.0.0.1",
        "0.0.0.0,fd00::1",
        "10.0.0.1,fd00::1,10.0.0.2",
        "10.0.0.256",
        "10.0.0.1/24",
        "node-1.example.com",
        "[fd00::1]",
        "10.0.0.1\0",
        "１０.0.0.1",
    ] {
        let err = parse_provided_node_ip(bad).expect_err(bad);
        assert!(!err.to_string().is_empty());
    }
    // Valid annotation, but no cloud address matches: an error, not a guess.
    let cloud = [NodeAddress {
        type_: "InternalIP".into(),
        address: "10.0.0.1".into(),
    }];
    assert!(addresses_from_node_ip("10.0.0.2", &cloud).is_err());
    assert!(addresses_from_node_ip("10.0.0.1", &cloud).is_ok());
    let huge = "1".repeat(1 << 20);
    assert!(parse_provided_node_ip(&huge).is_err());
}

#[test]
fn exclusion_label_fails_closed_on_values_go_does_not_parse() {
    let with = |value: &str| {
        let mut n = Node::default();
        n.metadata.labels = Some(BTreeMap::from([(
            EXCLUDE_FROM_LOAD_BALANCERS_LABEL.to_string(),
            value.to_string(),
        )]));
        n
    };
    for included in ["false", "False", "FALSE", "f", "F", "0"] {
        assert!(node_included(&with(included)), "{included:?}");
    }
    for excluded in [
        "", "true", "yes", "no", "off", " false", "false ", "nope", "🙂",
    ] {
        assert!(!node_included(&with(excluded)), "{excluded:?}");
        assert_ne!(parse_go_bool(excluded), Some(false), "{excluded:?}");
    }
}

/// A 253-character DNS subdomain, the longest Node name the API accepts.
fn longest_name() -> String {
    let label = "a".repeat(63);
    format!("{label}.{label}.{label}.{}", "b".repeat(61))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn odd_names_oversized_objects_and_bad_annotations_from_the_api_do_not_stop_the_controllers()
{
    init_tracing();
    let env = TestEnv::start().await.expect("testenv");
    let client = env.client();
    let long = longest_name();
    let names: Vec<String> = vec![
        "a".into(),
        "0".into(),
        "x-y.z-1".into(),
        long.clone(),
        "bad-annotation".into(),
        "huge".into(),
    ];
    let mut b = FakeCloud::builder().lb_pool_cidr("10.200.0.0/24");
    for (i, n) in names.iter().enumerate() {
        b = b.instance(
            FakeInstance::new(n.clone())
                .provider_id(format!("fake://{n}"))
                .internal_ip(format!("10.0.0.{}", i + 1)),
        );
    }
    let cloud = b.build().expect("cloud");
    let nodes: Api<Node> = Api::all(client.clone());
    for n in &names {
        let mut node = uninitialized_node(n);
        if n == "bad-annotation" {
            node.metadata.annotations = Some(BTreeMap::from([(
                "alpha.kubernetes.io/provided-node-ip".to_string(),
                "not-an-ip,,::".to_string(),
            )]));
        }
        if n == "huge" {
            // ~200 KiB of annotations and 500 labels: well inside the API's 256 KiB annotation
            // limit and its 1.5 MiB request limit.
            let annotations = (0..50)
                .map(|i| (format!("example.com/blob-{i}"), "x".repeat(4000)))
                .collect();
            node.metadata.annotations = Some(annotations);
            let labels = node.metadata.labels.get_or_insert_with(BTreeMap::new);
            for i in 0..500 {
                labels.insert(format!("example.com/l{i}"), format!("v{i}"));
            }
        }
        nodes
            .create(&PostParams::default(), &node)
            .await
            .unwrap_or_else(|e| panic!("create {n}: {e}"));
    }
    let svc_names: BTreeSet<String> = ["s", &"s".repeat(63), "svc-0-1"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    create_services(&client, svc_names.iter().cloned()).await;

    let (stop, mut manager) = start_manager(
        client.clone(),
        Arc::new(cloud.clone()),
        options(&["--configure-cloud-routes=false"]),
        manager_config("hostile"),
    );
    let check = async {
        tokio::time::timeout(Duration::from_secs(60), async {
            loop {
                let listed = Api::<Node>::all(client.clone())
                    .list(&Default::default())
                    .await
                    .expect("list");
                let uninitialized: Vec<String> = listed
                    .items
                    .iter()
                    .filter(|n| {
                        n.spec
                            .as_ref()
                            .and_then(|s| s.taints.as_ref())
                            .is_some_and(|t| t.iter().any(|t| t.key == UNINITIALIZED))
                    })
                    .filter_map(|n| n.metadata.name.clone())
                    .collect();
                let lbs: BTreeSet<String> = cloud
                    .load_balancers()
                    .into_iter()
                    .map(|l| l.service)
                    .collect();
                let want: BTreeSet<String> =
                    svc_names.iter().map(|s| format!("default/{s}")).collect();
                // Every node but the one whose annotation cannot be honoured is initialized;
                // that one stays tainted (upstream fails its initialization and retries).
                if uninitialized == ["bad-annotation"] && lbs == want {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
        .await
        .expect("controllers converge around the hostile objects");
    };
    tokio::select! {
        r = &mut manager => panic!("manager stopped: {r:?}"),
        () = check => {}
    }
    // The bad annotation is retried with backoff, not hot-looped.
    let attempts = cloud
        .calls_to(Method::InstanceMetadata)
        .iter()
        .filter(|c| c.key == "bad-annotation")
        .count();
    assert!(attempts < 20, "{attempts} attempts for the bad annotation");
    let initialized = nodes.get(&long).await.expect("longest name");
    assert_eq!(
        initialized.spec.and_then(|s| s.provider_id).as_deref(),
        Some(format!("fake://{long}").as_str())
    );
    stop.cancel();
    manager.await.expect("task").expect("clean stop");
}
