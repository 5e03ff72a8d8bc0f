//! Config-file parsing: the full format, defaults, and every rejection with its line.

use std::net::IpAddr;
use std::time::Duration;

use super::*;
use crate::{FakeCloud, Method};
use cloud_controllers::cloud::CloudProvider;

fn parse_err(yaml: &str) -> ConfigError {
    match FakeCloud::from_config(yaml.as_bytes()) {
        Ok(cloud) => panic!("config should be rejected, got {cloud:?}"),
        Err(e) => e,
    }
}

const FULL: &str = r#"
providerName: acme
hasClusterID: false
adoptUnknownNodes: true
facets:
  instances: false
  zones: false
  clusters: false
instances:
  - name: node-1
    providerID: acme://zone-a/vm-1
    instanceType: m1.large
    zone: zone-a
    region: region-1
    addresses:
      - {type: InternalIP, address: 10.0.0.1}
      - {type: Hostname, address: node-1.internal}
    state: shutdown
    additionalLabels: {example.com/pool: blue}
  - name: node-2
loadBalancerPool:
  cidr: 198.51.100.0/30
  addresses: [203.0.113.7]
clusters:
  - {name: kubernetes, master: 10.0.0.10}
"#;

#[test]
fn full_config_sets_every_field() {
    let cloud = FakeCloud::from_config(FULL.as_bytes()).unwrap();
    assert_eq!(cloud.provider_name(), "acme");
    assert!(!cloud.has_cluster_id());
    assert!(cloud.shared.world.lock().adopt_unknown_nodes);
    assert_eq!(
        cloud.facets(),
        Facets {
            instances: false,
            zones: false,
            clusters: false,
            ..Facets::all()
        }
    );
    assert!(cloud.instances().is_none() && cloud.zones().is_none() && cloud.clusters().is_none());
    assert!(cloud.instances_v2().is_some() && cloud.load_balancer().is_some());

    let n1 = cloud.instance("node-1").unwrap();
    assert_eq!(n1.provider_id, "acme://zone-a/vm-1");
    assert_eq!(n1.instance_type, "m1.large");
    assert_eq!(
        (n1.zone.as_str(), n1.region.as_str()),
        ("zone-a", "region-1")
    );
    assert_eq!(n1.addresses.len(), 2);
    assert_eq!(n1.addresses[1].type_, "Hostname");
    assert_eq!(n1.state, InstanceState::Shutdown);
    assert_eq!(n1.additional_labels["example.com/pool"], "blue");

    let n2 = cloud.instance("node-2").unwrap();
    assert_eq!(
        n2.provider_id, "acme://node-2",
        "default provider ID uses providerName"
    );
    assert_eq!(n2.instance_type, "fake.small");
    assert_eq!(n2.state, InstanceState::Running);
}

#[tokio::test]
async fn pool_from_config_hands_out_cidr_hosts_then_addresses() {
    use cloud_controllers::cloud::LoadBalancer;

    let cloud = FakeCloud::from_config(FULL.as_bytes()).unwrap();
    let mut ips = Vec::new();
    for i in 0..3 {
        let svc = crate::objects::service(&format!("s{i}"), &format!("uid-{i}"));
        cloud.ensure_load_balancer("k", &svc, &[]).await.unwrap();
        ips.push(cloud.lb_for(&format!("default/s{i}")).unwrap().ip);
    }
    let want: Vec<IpAddr> = ["198.51.100.1", "198.51.100.2", "203.0.113.7"]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
    assert_eq!(ips, want);
}

#[test]
fn empty_file_means_defaults() {
    for yaml in ["", "  \n", "{}"] {
        let cloud = FakeCloud::from_config(yaml.as_bytes()).unwrap();
        assert_eq!(cloud.provider_name(), "fake");
        assert!(cloud.has_cluster_id());
        assert_eq!(cloud.facets(), Facets::all());
        assert!(cloud.all_instances().is_empty());
    }
}

#[test]
fn unknown_fields_are_rejected_with_their_line() {
    let e = parse_err("instances:\n  - name: a\n    stat: running\n");
    let msg = e.to_string();
    assert!(matches!(e, ConfigError::Yaml(_)));
    assert!(
        msg.contains("line 3") && msg.contains("unknown field `stat`"),
        "{msg}"
    );
    let msg = parse_err("facets:\n  loadbalancer: true\n").to_string();
    assert!(
        msg.contains("line 2") && msg.contains("loadbalancer"),
        "{msg}"
    );
    let msg = parse_err("providername: x\n").to_string();
    assert!(msg.contains("providername"), "{msg}");
    let msg = parse_err("loadBalancerPool: {cidrs: [10.0.0.0/8]}\n").to_string();
    assert!(msg.contains("cidrs"), "{msg}");
}

#[test]
fn bad_state_lists_the_valid_ones() {
    let msg = parse_err("instances:\n  - name: a\n    state: paused\n").to_string();
    assert!(msg.contains("line 3"), "{msg}");
    assert!(msg.contains("running, shutdown, pending, gone"), "{msg}");
}

#[test]
fn wrong_types_are_rejected() {
    let msg = parse_err("hasClusterID: maybe\n").to_string();
    assert!(msg.contains("line 1"), "{msg}");
    let msg = parse_err("instances: node-1\n").to_string();
    assert!(msg.contains("line 1"), "{msg}");
    assert!(matches!(
        parse_err("instances:\n  - zone: a\n"),
        ConfigError::Yaml(_)
    ));
}

#[test]
fn duplicate_instance_name_points_at_the_second() {
    let e = parse_err("instances:\n  - name: a\n  - name: b\n  - name: a\n");
    assert!(
        matches!(&e, ConfigError::DuplicateInstanceName { name, at: SourceLine(Some(4)) } if name == "a"),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "duplicate instance name \"a\" (line 4): node names must be unique"
    );
}

#[test]
fn duplicate_provider_id_is_rejected_including_defaults() {
    let e = parse_err(
        "instances:\n  - name: a\n    providerID: fake://x\n  - name: b\n    providerID: fake://x\n",
    );
    assert!(
        matches!(
            &e,
            ConfigError::DuplicateProviderId {
                at: SourceLine(Some(5)),
                ..
            }
        ),
        "{e:?}"
    );
    // node "b" defaults to fake://b, which "a" already claims explicitly.
    let e = parse_err("instances:\n  - name: a\n    providerID: fake://b\n  - name: b\n");
    assert!(
        matches!(&e, ConfigError::DuplicateProviderId { provider_id, .. } if provider_id == "fake://b")
    );
}

#[test]
fn empty_names_are_rejected() {
    let e = parse_err("instances:\n  - name: \"\"\n");
    assert!(
        matches!(
            e,
            ConfigError::EmptyInstanceName {
                at: SourceLine(Some(2))
            }
        ),
        "{e:?}"
    );
    assert!(matches!(
        parse_err("providerName: \"\"\n"),
        ConfigError::InvalidProviderName {
            at: SourceLine(Some(1)),
            ..
        }
    ));
    let e = parse_err("clusters:\n  - name: \"\"\n");
    assert!(
        matches!(
            e,
            ConfigError::EmptyClusterName {
                at: SourceLine(Some(2))
            }
        ),
        "{e:?}"
    );
}

#[test]
fn bad_addresses_are_rejected() {
    let e = parse_err(
        "instances:\n  - name: a\n    addresses:\n      - {type: InternalIp, address: 10.0.0.1}\n",
    );
    assert!(
        matches!(&e, ConfigError::InvalidAddressType { type_, at: SourceLine(Some(4)), .. } if type_ == "InternalIp"),
        "{e:?}"
    );
    assert!(e.to_string().contains("InternalIP, ExternalIP"), "{e}");
    let e = parse_err(
        "instances:\n  - name: a\n    addresses:\n      - {type: ExternalIP, address: node-a}\n",
    );
    assert!(
        matches!(&e, ConfigError::InvalidNodeAddress { address, .. } if address == "node-a"),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "instance \"a\": address \"node-a\" (line 4) is not an IP address"
    );
    // Hostname and DNS addresses are not IPs, and need not be.
    FakeCloud::from_config(
        b"instances:\n  - name: a\n    addresses:\n      - {type: InternalDNS, address: a.local}\n",
    )
    .unwrap();
}

#[test]
fn bad_pools_are_rejected() {
    let e = parse_err("loadBalancerPool:\n  cidr: 10.0.0.0/33\n");
    assert!(
        matches!(
            &e,
            ConfigError::InvalidCidr {
                at: SourceLine(Some(2)),
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("prefix length"), "{e}");
    let e = parse_err("loadBalancerPool:\n  cidr: 10.0.0/24\n");
    assert!(e.to_string().contains("not an IP address"), "{e}");
    let e = parse_err("loadBalancerPool:\n  addresses:\n    - 10.0.0.1\n    - ten\n");
    assert!(
        matches!(&e, ConfigError::InvalidPoolAddress { address, at: SourceLine(Some(4)) } if address == "ten"),
        "{e:?}"
    );
    assert!(matches!(
        parse_err("loadBalancerPool: {}\n"),
        ConfigError::EmptyPool
    ));
}

#[test]
fn builder_applies_the_same_rules_without_lines() {
    use crate::FakeInstance;
    let dup = FakeCloud::builder()
        .instance(FakeInstance::new("a"))
        .instance(FakeInstance::new("a").provider_id("fake://other"))
        .build()
        .unwrap_err();
    assert!(matches!(
        dup,
        ConfigError::DuplicateInstanceName {
            at: SourceLine(None),
            ..
        }
    ));
    assert_eq!(
        dup.to_string(),
        "duplicate instance name \"a\": node names must be unique"
    );
    let dup = FakeCloud::builder()
        .instance(FakeInstance::new("a"))
        .instance(FakeInstance::new("b").provider_id("fake://a"))
        .build()
        .unwrap_err();
    assert!(matches!(dup, ConfigError::DuplicateProviderId { .. }));
    let bad = FakeCloud::builder()
        .instance(FakeInstance::new("a").internal_ip("nope"))
        .build()
        .unwrap_err();
    assert!(matches!(bad, ConfigError::InvalidNodeAddress { .. }));
    assert!(matches!(
        FakeCloud::builder()
            .instance(FakeInstance::new(" "))
            .build(),
        Err(ConfigError::EmptyInstanceName { .. })
    ));
    assert!(matches!(
        FakeCloud::builder().provider_name("a/b").build(),
        Err(ConfigError::InvalidProviderName { .. })
    ));
    assert!(matches!(
        FakeCloud::builder().lb_pool_cidr("10.0.0.0").build(),
        Err(ConfigError::InvalidCidr { .. })
    ));
    assert!(matches!(
        FakeCloud::builder().cluster("", "10.0.0.1").build(),
        Err(ConfigError::EmptyClusterName { .. })
    ));
}

#[test]
fn documented_example_parses() {
    let cloud = FakeCloud::from_config(include_bytes!("example-cloud-config.yaml")).unwrap();
    assert_eq!(cloud.all_instances().len(), 1);
    assert_eq!(
        cloud.instance("node-1").unwrap().additional_labels["example.com/pool"],
        "blue"
    );
    assert!(cloud.instances().is_none());
    let faults = &cloud.shared.faults;
    assert_eq!(
        faults.latency(Method::UpdateLoadBalancer),
        Some(Duration::from_millis(100))
    );
    assert_eq!(
        faults.latency(Method::EnsureLoadBalancer),
        Some(Duration::from_secs(2))
    );
    assert_eq!(faults.latency(Method::InstanceMetadata), None);
}

/// A cloud that answers load-balancer calls in 100 ms and allows 2 of them per second.
const SLOW_AND_LIMITED: &str = r#"
latency:
  UpdateLoadBalancer: 100ms
  InstanceMetadata: 1.5s
rateLimit:
  qps: 2
  methods: [UpdateLoadBalancer]
"#;

#[tokio::test(start_paused = true)]
async fn latency_and_rate_limit_come_from_the_config() {
    use crate::FakeInstance;

    let cloud = FakeCloud::from_config(SLOW_AND_LIMITED.as_bytes()).unwrap();
    cloud.add_instance(FakeInstance::new("node-1")).unwrap();
    let svc = crate::objects::service("web", "uid-1");
    let lb = cloud.load_balancer().unwrap();
    lb.ensure_load_balancer("k", &svc, &[]).await.unwrap();

    let start = tokio::time::Instant::now();
    lb.update_load_balancer("k", &svc, &[]).await.unwrap();
    lb.update_load_balancer("k", &svc, &[]).await.unwrap();
    assert_eq!(start.elapsed(), Duration::from_millis(200), "100 ms each");
    // The burst (qps rounded up: 2) is spent; 200 ms refilled 0.4 of a token.
    let refused = lb.update_load_balancer("k", &svc, &[]).await.unwrap_err();
    assert_eq!(refused.retry_after(), Some(Duration::from_millis(300)));
    assert_eq!(
        start.elapsed(),
        Duration::from_millis(200),
        "a 429 is instant"
    );
    let log = cloud.calls_to(Method::UpdateLoadBalancer);
    assert_eq!(log.len(), 3);
    assert!(!log[2].outcome.is_ok(), "refused calls are logged");
    tokio::time::advance(Duration::from_millis(300)).await;
    lb.update_load_balancer("k", &svc, &[]).await.unwrap();

    // Methods outside `methods` are never refused, but keep their own latency.
    let node = crate::objects::node("node-1", None);
    let v2 = cloud.instances_v2().unwrap();
    let start = tokio::time::Instant::now();
    for _ in 0..5 {
        assert!(v2.instance_metadata(&node).await.unwrap().is_some());
    }
    assert_eq!(start.elapsed(), Duration::from_millis(7500));
}

#[test]
fn bad_latency_and_rate_limits_are_rejected_with_their_line() {
    let e = parse_err("latency:\n  UpdateLoadbalancer: 1s\n");
    let msg = e.to_string();
    assert!(matches!(e, ConfigError::UnknownMethod { .. }), "{msg}");
    assert!(
        msg.starts_with("latency: \"UpdateLoadbalancer\" (line 2) is not a cloud provider method"),
        "{msg}"
    );
    assert!(
        msg.contains("UpdateLoadBalancer, EnsureLoadBalancerDeleted"),
        "{msg}"
    );

    let msg = parse_err("latency:\n  ListRoutes: 1s\n  CreateRoute: fast\n").to_string();
    assert!(
        msg.starts_with("latency of CreateRoute: \"fast\" (line 3) is not a duration"),
        "{msg}"
    );
    let msg = parse_err("latency: {GetLoadBalancerName: 1s}\n").to_string();
    assert!(msg.contains("synchronous"), "{msg}");

    // Zero, or so slow that a refused call would wait for ages (1e-300: 584 years, the longest wait there is).
    for qps in ["0", "1e-300", "0.0001", "-1", ".nan", ".inf", "1e7"] {
        let msg = parse_err(&format!("rateLimit:\n  qps: {qps}\n")).to_string();
        assert_eq!(
            msg,
            "rateLimit.qps must be a number from 0.001 (one call per 1000 s) to 1000000 calls per second (line 2)",
            "{qps}"
        );
    }
    let msg = parse_err("rateLimit: {qps: 5, burst: 0}\n").to_string();
    assert!(
        msg.starts_with("rateLimit.burst must be at least 1"),
        "{msg}"
    );
    let msg = parse_err("rateLimit: {qps: 5, methods: [Ensure]}\n").to_string();
    assert!(
        msg.starts_with("rateLimit.methods: \"Ensure\" (line 1)"),
        "{msg}"
    );
    let msg = parse_err("rateLimit: {burst: 5}\n").to_string();
    assert!(msg.contains("qps"), "{msg}");
    assert!(matches!(
        FakeCloud::builder()
            .rate_limit(crate::RateLimit::new(-1.0, 1))
            .build(),
        Err(ConfigError::InvalidRateLimit { .. })
    ));
}

/// A config with a secret next to a mistake: the error names the key and line, never the value.
#[test]
fn parse_errors_never_quote_a_value_or_a_line() {
    const SECRET: &str = "s3cr3t-value";
    for (yaml, says) in [
        (
            format!("providerName: [ \"{SECRET}\" ]\n"),
            "invalid fake cloud config: key providerName (line 1, column 15): expected string scalar",
        ),
        (
            format!("hasClusterID: {SECRET}\n"),
            "invalid fake cloud config: key hasClusterID (line 1, column 15): invalid boolean",
        ),
        (
            format!("providerName: acme\ntoken: {SECRET}\n"),
            "invalid fake cloud config: key token (line 2, column 1): unknown field `token`, expected one of",
        ),
        (
            format!("instances:\n  - name: a\n    state: {SECRET}\n"),
            "invalid fake cloud config: key instances[0].state (line 3, column 12):",
        ),
        (
            format!("clusters: \"{SECRET}\n"),
            "invalid fake cloud config: ",
        ),
    ] {
        let msg = parse_err(&yaml).to_string();
        assert!(msg.starts_with(says), "{yaml:?}: {msg}");
        assert!(!msg.contains(SECRET), "{yaml:?} leaked: {msg}");
        assert!(!msg.contains('\n'), "{yaml:?}: {msg}");
    }
}

#[test]
fn provider_names_that_cannot_be_a_provider_id_prefix_are_refused() {
    let huge = "x".repeat(1 << 20);
    for (name, problem) in [
        ("\"a/b\"", "has a slash"),
        ("\"my cloud\"", "has a space"),
        ("\"a\\0b\"", "has a control character"),
        ("\"\"", "is empty"),
        (huge.as_str(), "is longer than 63 characters"),
    ] {
        let msg = parse_err(&format!("\nproviderName: {name}\n")).to_string();
        assert!(
            msg.starts_with("providerName (line 2): provider name "),
            "{msg}"
        );
        assert!(msg.contains(problem), "{name:.80}: {msg}");
        assert!(msg.contains("1 to 63 ASCII letters"), "{msg}");
        assert!(msg.len() < 600, "{}", msg.len());
    }
}

/// `callLogFile` appends one JSON line per call, with its error and wall-clock times, to a file
/// that is created if missing and never truncated (a restarted process keeps appending).
#[tokio::test]
async fn the_call_log_file_gets_one_json_line_per_call() {
    let dir = std::env::temp_dir().join(format!("fake-call-log-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("calls.jsonl");
    std::fs::write(&path, "{\"kept\":true}\n").unwrap();
    let yaml = format!(
        "instances: [{{name: node-1}}]\ncallLogFile: {}\n",
        path.display()
    );
    let cloud = FakeCloud::from_config(yaml.as_bytes()).unwrap();
    let instances = cloud.instances().unwrap();
    assert!(
        instances
            .instance_exists_by_provider_id("fake://node-1")
            .await
            .unwrap()
    );
    let err = instances
        .instance_shutdown_by_provider_id("fake://node-2")
        .await
        .unwrap_err();

    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert_eq!(lines[0]["kept"], true, "appended, not truncated");
    assert_eq!(lines[1]["method"], "InstanceExistsByProviderID");
    assert_eq!(lines[1]["key"], "fake://node-1");
    assert!(lines[1].get("error").is_none());
    assert_eq!(lines[2]["method"], "InstanceShutdownByProviderID");
    assert_eq!(lines[2]["error"], err.to_string());
    let (start, end) = (
        lines[2]["startedUnixMicros"].as_u64().unwrap(),
        lines[2]["finishedUnixMicros"].as_u64().unwrap(),
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64;
    assert!(
        start <= end && end <= now && now - end < 60_000_000,
        "{start} {end} {now}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_call_log_file_that_cannot_be_opened_is_rejected_with_the_path() {
    let err = parse_err("callLogFile: /nonexistent-dir/calls.jsonl\n");
    let message = err.to_string();
    assert!(
        message
            .starts_with("callLogFile: cannot open \"/nonexistent-dir/calls.jsonl\" for appending"),
        "{message}"
    );
    let err = parse_err("facets: {}\ncallLogFile: ''\n");
    assert_eq!(
        err.to_string(),
        "callLogFile (line 2): cannot open \"\" for appending: the path is empty"
    );
}
