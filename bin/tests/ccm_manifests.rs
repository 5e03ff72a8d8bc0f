//! Drop-in check: the real binary starts with the container args of the public manifests of five
//! clouds' cloud-controller-managers, with the provider swapped for `fake`, and serves: the
//! admin port answers `/healthz` and lists the controllers that manifest runs.
//!
//! Each list is the manifest's args verbatim except: `--cloud-provider` (the harness passes
//! `fake`), `--cloud-config` (the harness passes a fake cloud with the facets that cloud has in
//! that mode), and `--secure-port`/`--bind-address` (the harness serves on a free loopback port,
//! so the tests run in parallel). Nothing else is dropped.

mod admin_support;

use std::time::Duration;

use admin_support::{Ccm, Credentials, scratch_dir};
use kube_testenv::TestEnv;

/// What one manifest runs and what the check expects of it.
struct Manifest {
    tag: &'static str,
    args: &'static [&'static str],
    /// Facets of the fake cloud standing in for this provider.
    facets: &'static str,
    /// Controllers whose `/healthz` checks must appear (started), and ones that must not.
    started: &'static [&'static str],
    not_started: &'static [&'static str],
}

const LB_AND_INSTANCES: &str = "{loadBalancer: true, instancesV2: true, instances: false, zones: false, routes: false, clusters: false}";
const NODE_AND_SERVICE: &[&str] = &[
    "cloud-node-controller",
    "cloud-node-lifecycle-controller",
    "service-lb-controller",
];

const MANIFESTS: &[Manifest] = &[
    // kubernetes/cloud-provider-aws: examples/existing-cluster/base/aws-cloud-controller-manager-daemonset.yaml
    Manifest {
        tag: "aws",
        args: &[
            "--v=2",
            "--use-service-account-credentials=true",
            "--configure-cloud-routes=false",
        ],
        facets: LB_AND_INSTANCES,
        started: NODE_AND_SERVICE,
        not_started: &["node-route-controller"],
    },
    // kubernetes-sigs/cloud-provider-azure: examples/out-of-tree/cloud-controller-manager.yaml
    Manifest {
        tag: "azure",
        args: &[
            "--allocate-node-cidrs=true",
            "--cluster-cidr=10.244.0.0/16",
            "--cluster-name=k8s",
            "--controllers=*,-cloud-node",
            "--configure-cloud-routes=true",
            "--leader-elect=true",
            "--route-reconciliation-period=10s",
            "--v=4",
        ],
        facets: "{loadBalancer: true, instancesV2: true, instances: false, zones: false, routes: true, clusters: false}",
        started: &[
            "cloud-node-lifecycle-controller",
            "service-lb-controller",
            "node-route-controller",
        ],
        not_started: &["cloud-node-controller"],
    },
    // kubernetes/cloud-provider-openstack: manifests/controller-manager/openstack-cloud-controller-manager-ds.yaml
    // (its first arg is the command, /bin/openstack-cloud-controller-manager)
    Manifest {
        tag: "openstack",
        args: &["--v=1", "--use-service-account-credentials=true"],
        facets: LB_AND_INSTANCES,
        started: NODE_AND_SERVICE,
        not_started: &["node-route-controller"],
    },
    // hetznercloud/hcloud-cloud-controller-manager: deploy/ccm.yaml (no private network, so no routes)
    Manifest {
        tag: "hetzner",
        args: &[
            "--allow-untagged-cloud",
            "--leader-elect=false",
            "--route-reconciliation-period=30s",
        ],
        facets: LB_AND_INSTANCES,
        started: NODE_AND_SERVICE,
        not_started: &["node-route-controller"],
    },
    // digitalocean/digitalocean-cloud-controller-manager:
    // releases/digitalocean-cloud-controller-manager/v0.1.71.yml (the provider is built in)
    Manifest {
        tag: "digitalocean",
        args: &["--leader-elect=false"],
        facets: LB_AND_INSTANCES,
        started: NODE_AND_SERVICE,
        not_started: &["node-route-controller"],
    },
];

async fn starts_and_serves(m: &Manifest) {
    let env = TestEnv::start().await.unwrap();
    let dir = scratch_dir(&format!("manifest-{}", m.tag)).unwrap();
    let cloud = dir.join("cloud.yaml");
    std::fs::write(&cloud, format!("facets: {}\n", m.facets)).unwrap();
    let mut args: Vec<String> = m.args.iter().map(|a| a.to_string()).collect();
    args.push(format!("--cloud-config={}", cloud.display()));
    let ccm = Ccm::start(&env, &dir, &args)
        .await
        .unwrap_or_else(|e| panic!("{}: {e:#}", m.tag));

    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let body = loop {
        let r = ccm.get("/healthz?verbose", &Credentials::None).await;
        if let Ok(r) = &r
            && r.status == 200
            && m.started
                .iter()
                .all(|c| r.body.contains(&format!("[+]{c} ok")))
        {
            break r.body.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{}: /healthz never listed {:?}: {:?}\n--- log ---\n{}",
            m.tag,
            m.started,
            r.map(|r| r.body),
            ccm.logs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    for c in m.not_started {
        assert!(
            !body.contains(&format!("[+]{c} ok")),
            "{}: {c} started:\n{body}",
            m.tag
        );
    }
}

#[tokio::test]
async fn aws_manifest_starts_and_serves() {
    starts_and_serves(&MANIFESTS[0]).await;
}

#[tokio::test]
async fn azure_manifest_starts_and_serves() {
    starts_and_serves(&MANIFESTS[1]).await;
}

#[tokio::test]
async fn openstack_manifest_starts_and_serves() {
    starts_and_serves(&MANIFESTS[2]).await;
}

#[tokio::test]
async fn hetzner_manifest_starts_and_serves() {
    starts_and_serves(&MANIFESTS[3]).await;
}

#[tokio::test]
async fn digitalocean_manifest_starts_and_serves() {
    starts_and_serves(&MANIFESTS[4]).await;
}
