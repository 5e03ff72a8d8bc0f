//! `docs/deploy/` stays true: the Deployment's arguments are valid flags of the stock controller
//! manager, its probes point at the port `--secure-port` serves, it runs as the ServiceAccount
//! the RBAC binds, and a manager started with exactly those arguments answers the probes.
//! (The RBAC itself is checked against real requests in `bin/tests/rbac_least_privilege.rs`.)

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use cloud_controllers::app::{CloudControllerManager, CloudManagerOptions, try_parse_args_from};
use cloud_controllers::cloud_initializers;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Container, Node};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, PostParams};
use kube::runtime::wait::await_condition;
use kube_testenv::TestEnv;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    ccm: CloudManagerOptions,
}

fn deploy_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/deploy")
}

fn documents(file: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(deploy_dir().join(file)).unwrap();
    serde_saphyr::from_multiple(&text).unwrap()
}

fn deployment() -> Deployment {
    let docs = documents("deployment.yaml");
    assert_eq!(docs.len(), 1);
    serde_json::from_value(docs[0].clone()).unwrap()
}

fn container(d: &Deployment) -> Container {
    let spec = d.spec.clone().unwrap().template.spec.unwrap();
    assert_eq!(spec.containers.len(), 1);
    spec.containers[0].clone()
}

fn port_of(c: &Container, port: &IntOrString) -> i32 {
    match port {
        IntOrString::Int(p) => *p,
        IntOrString::String(name) => {
            c.ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(name))
                .unwrap_or_else(|| panic!("no containerPort named {name}"))
                .container_port
        }
    }
}

#[test]
fn deployment_args_are_valid_flags_and_probes_hit_the_admin_port() {
    let d = deployment();
    let c = container(&d);
    let args = c.args.clone().unwrap();
    let argv = std::iter::once("cloud-controller-manager".to_string()).chain(args);
    let cli: Cli = try_parse_args_from(argv).expect("Deployment args parse");
    assert_eq!(
        cli.ccm.validate(
            &cloud_initializers(),
            &cloud_controllers::webhooks::cloud_webhooks()
        ),
        Vec::<String>::new()
    );
    // As shipped it names no real provider: the stock binary (which has only the fake) refuses
    // to start, and says what to change, instead of coming up healthy with a test double.
    let stock = CloudControllerManager::new("cloud-controller-manager", cli.ccm.clone())
        .provider(fake_cloud::PROVIDER_NAME, fake_cloud::factory);
    assert_eq!(
        stock.validate(),
        vec![
            "--cloud-provider=your-cloud-provider: unknown cloud provider; registered providers are fake"
        ]
    );
    assert!(
        cli.ccm.generic.leader_election.leader_elect,
        "leader election on"
    );

    let admin = i32::from(cli.ccm.generic.serving.secure_port);
    for (probe, path) in [
        (&c.liveness_probe, "/healthz"),
        (&c.readiness_probe, "/readyz"),
    ] {
        let get = probe.clone().unwrap().http_get.unwrap();
        assert_eq!(get.path.as_deref(), Some(path));
        assert_eq!(
            get.scheme.as_deref(),
            Some("HTTPS"),
            "--secure-port serves HTTPS"
        );
        assert_eq!(port_of(&c, &get.port), admin, "{path} probes --secure-port");
    }

    let rbac = documents("rbac.yaml");
    let sa = rbac.iter().find(|d| d["kind"] == "ServiceAccount").unwrap();
    let pod = d.spec.unwrap().template.spec.unwrap();
    assert_eq!(
        pod.service_account_name.as_deref(),
        sa["metadata"]["name"].as_str()
    );
    assert_eq!(
        d.metadata.namespace.as_deref(),
        sa["metadata"]["namespace"].as_str()
    );

    let kustomization = documents("kustomization.yaml");
    let listed: Vec<&str> = kustomization[0]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        listed,
        ["rbac.yaml", "delegated-auth.yaml", "deployment.yaml"]
    );
}

#[test]
fn delegated_auth_binds_the_service_account_to_upstreams_two_roles() {
    let docs = documents("delegated-auth.yaml");
    let sa = serde_json::json!([{"kind": "ServiceAccount", "name": "cloud-controller-manager", "namespace": "kube-system"}]);
    let bound: Vec<(String, String, String)> = docs
        .iter()
        .map(|d| {
            assert_eq!(d["subjects"], sa, "{d:#?}");
            (
                d["kind"].as_str().unwrap_or_default().to_string(),
                d["roleRef"]["kind"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                d["roleRef"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    assert_eq!(
        bound,
        [
            (
                "ClusterRoleBinding".to_string(),
                "ClusterRole".to_string(),
                "system:auth-delegator".to_string()
            ),
            (
                "RoleBinding".to_string(),
                "Role".to_string(),
                "extension-apiserver-authentication-reader".to_string()
            ),
        ]
    );
    assert_eq!(docs[1]["metadata"]["namespace"], "kube-system");
}

/// One HTTP/1.1 GET over TLS, trusting the CA the manager wrote to `cert_dir`; the status code.
async fn get(port: u16, cert_dir: &std::path::Path, path: &str) -> u16 {
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
    use tokio_rustls::rustls::{ClientConfig, RootCertStore};

    let mut roots = RootCertStore::empty();
    let chain = cert_dir.join("cloud-controller-manager.crt");
    for cert in CertificateDer::pem_file_iter(&chain).unwrap() {
        let _ = roots.add(cert.unwrap()); // the CA is the anchor; the serving cert is not a CA
    }
    let provider = std::sync::Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    let mut s = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
        .connect(name, tcp)
        .await
        .unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out.split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn a_manager_started_with_the_deployment_args_answers_its_probes() {
    let env = TestEnv::start().await.unwrap();
    let nodes: Api<Node> = Api::all(env.client());
    let taint = json!({"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"});
    let node = json!({"metadata": {"name": "n1"}, "spec": {"taints": [taint]}});
    let node: Node = serde_json::from_value(node).unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();

    // The Deployment's args, on a free loopback port instead of 10258.
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = free.local_addr().unwrap().port();
    drop(free);
    let args = container(&deployment()).args.unwrap();
    // Keep the generated certificate, so the probe below can trust it.
    let cert_dir = std::env::temp_dir().join(format!("deploy-manifests-{}", std::process::id()));
    std::fs::create_dir_all(&cert_dir).unwrap();
    // The provider placeholder filled in, as a user does: the fake, told about n1.
    let cloud_config = cert_dir.join("cloud.yaml");
    std::fs::write(&cloud_config, "instances:\n  - name: n1\n").unwrap();
    let argv = std::iter::once("ccm".to_string()).chain(args).chain([
        "--cloud-provider=fake".into(),
        format!("--cloud-config={}", cloud_config.display()),
        format!("--secure-port={port}"),
        "--bind-address=127.0.0.1".into(),
        format!("--cert-dir={}", cert_dir.display()),
    ]);
    let cli: Cli = try_parse_args_from(argv).unwrap();
    let stop = CancellationToken::new();
    let manager = CloudControllerManager::new("cloud-controller-manager", cli.ccm)
        .provider(fake_cloud::PROVIDER_NAME, fake_cloud::factory)
        .with_client_config(env.config())
        .run(stop.clone());
    let manager = tokio::spawn(manager);

    // Once n1 is initialized, the leader runs its controllers, so caches are synced.
    let initialized = |n: Option<&Node>| {
        n.and_then(|n| n.spec.as_ref()?.provider_id.clone())
            .is_some()
    };
    let waited = tokio::time::timeout(
        Duration::from_secs(60),
        await_condition(nodes, "n1", initialized),
    );
    assert!(matches!(waited.await, Ok(Ok(_))), "n1 was not initialized");
    assert_eq!(get(port, &cert_dir, "/healthz").await, 200);
    assert_eq!(get(port, &cert_dir, "/readyz").await, 200);

    stop.cancel();
    manager.await.unwrap().unwrap();
}

/// metal-ccm's flag set, as its binary parses it.
#[derive(Parser)]
struct MetalCli {
    #[command(flatten)]
    ccm: CloudManagerOptions,
    #[command(flatten)]
    node_inventory: embedding_examples::node_inventory::NodeInventoryOptions,
}

fn metal_doc<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    let mut found = docs.iter().filter(|d| d["kind"] == kind);
    let doc = found.next().unwrap_or_else(|| panic!("no {kind}"));
    assert!(found.next().is_none(), "one {kind}");
    doc
}

/// The rules of `role` that grant `verb` on `resource`: the names they are limited to (empty:
/// every name).
fn granted(role: &Value, resource: &str, verb: &str) -> Vec<Vec<String>> {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect()
    };
    role["rules"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| strings(&r["resources"]).iter().any(|r| r == resource))
        .filter(|r| strings(&r["verbs"]).iter().any(|v| v == verb))
        .map(|r| strings(&r["resourceNames"]))
        .collect()
}

#[test]
fn metal_ccm_serves_its_webhooks_with_self_managed_certificates_the_manifests_agree_with() {
    use cloud_controllers::app::CloudControllerManager;
    use controller_manager::certs::{ClientTarget, ManagedKind};
    use controller_manager::webhook::CertSource;
    use embedding_examples::address_pool::{self, AddressPools};
    use embedding_examples::static_inventory::{self, StaticInventory};

    let docs = documents("metal-ccm.yaml");
    let deployment: Deployment =
        serde_json::from_value(metal_doc(&docs, "Deployment").clone()).unwrap();
    let c = container(&deployment);
    let argv = std::iter::once("metal-ccm".to_string()).chain(c.args.clone().unwrap());
    let cli = MetalCli::try_parse_from(argv).expect("metal-ccm parses the Deployment args");
    let pools = AddressPools::default();
    let mut ccm = CloudControllerManager::new("metal-ccm", cli.ccm.clone())
        .controller(embedding_examples::node_inventory::initializer(
            cli.node_inventory,
        ))
        .controller(address_pool::initializer(pools.clone()))
        .provider(static_inventory::NAME, StaticInventory::factory_with(pools));
    for webhook in address_pool::webhooks().iter() {
        ccm = ccm.webhook(webhook.clone());
    }
    assert_eq!(ccm.validate(), Vec::<String>::new());

    // Self-managed certificates, on by default, naming the Service's DNS name.
    let gates = cli.ccm.generic.feature_gates().unwrap();
    let serving = cli.ccm.webhooks.serving(&gates).expect("webhooks served");
    let CertSource::SelfManaged(certs) = serving.certificates else {
        panic!("self-managed certificates: {:?}", serving.certificates);
    };
    let service = metal_doc(&docs, "Service");
    let (svc_ns, svc_name) = (
        service["metadata"]["namespace"].as_str().unwrap(),
        service["metadata"]["name"].as_str().unwrap(),
    );
    assert_eq!(certs.dns_names, [format!("{svc_name}.{svc_ns}.svc")]);
    let webhook_port = i32::from(cli.ccm.webhooks.webhook_secure_port);
    let target = &service["spec"]["ports"][0];
    assert_eq!(target["port"], 443);
    let named = IntOrString::String(target["targetPort"].as_str().unwrap().to_string());
    assert_eq!(
        port_of(&c, &named),
        webhook_port,
        "the Service reaches --webhook-secure-port"
    );
    let pod_labels = deployment
        .spec
        .clone()
        .unwrap()
        .template
        .metadata
        .unwrap()
        .labels;
    for (k, v) in service["spec"]["selector"].as_object().unwrap() {
        assert_eq!(
            pod_labels.as_ref().unwrap().get(k).map(String::as_str),
            v.as_str()
        );
    }

    // Every configuration and the CRD are managed, pointed at that Service, and call a path a
    // registered webhook serves.
    let mut shipped = documents("addresspool-webhooks.yaml");
    shipped.extend(documents("addresspool-crd.yaml"));
    let served: Vec<String> = address_pool::webhooks::<()>()
        .iter()
        .map(|w| w.path().to_string())
        .collect();
    let mut objects = Vec::new();
    for mut doc in shipped {
        let kind = ManagedKind::of(doc["kind"].as_str().unwrap()).unwrap();
        let name = format!(
            "{}/{}",
            doc["kind"].as_str().unwrap(),
            doc["metadata"]["name"].as_str().unwrap()
        );
        for config in kind.client_configs(&mut doc) {
            assert_eq!(config["service"]["namespace"], svc_ns, "{name}");
            assert_eq!(config["service"]["name"], svc_name, "{name}");
            let path = ClientTarget::path_in(config).unwrap();
            assert!(
                served.contains(&path),
                "{name} calls {path}, not in {served:?}"
            );
        }
        objects.push(name);
    }
    let managed: Vec<String> = certs.managed.iter().map(|m| m.to_string()).collect();
    let (mut sorted_objects, mut sorted_managed) = (objects.clone(), managed.clone());
    sorted_objects.sort();
    sorted_managed.sort();
    assert_eq!(sorted_managed, sorted_objects);
    let pointed = ClientTarget::service(&format!("{svc_ns}/{svc_name}")).unwrap();
    assert!(
        certs
            .managed
            .iter()
            .all(|m| m.client == Some(pointed.clone()))
    );

    // RBAC: get and patch on exactly the managed objects; the Secret by name in its namespace.
    let cluster_role = metal_doc(&docs, "ClusterRole");
    for (resource, kind) in [
        (
            "validatingwebhookconfigurations",
            "ValidatingWebhookConfiguration",
        ),
        (
            "mutatingwebhookconfigurations",
            "MutatingWebhookConfiguration",
        ),
        ("customresourcedefinitions", "CustomResourceDefinition"),
    ] {
        let names: Vec<String> = certs
            .managed
            .iter()
            .filter(|m| m.to_string().starts_with(&format!("{kind}/")))
            .map(|m| m.name.clone())
            .collect();
        for verb in ["get", "patch"] {
            assert_eq!(
                granted(cluster_role, resource, verb),
                std::slice::from_ref(&names),
                "{verb} {resource}"
            );
        }
        assert!(
            granted(cluster_role, resource, "update").is_empty(),
            "{resource}: patch, never update"
        );
    }
    let role = metal_doc(&docs, "Role");
    assert_eq!(role["metadata"]["namespace"], certs.namespace.as_str());
    // The replicas read the Secret with a get every resync (no watch), and replace it.
    for verb in ["get", "update"] {
        assert_eq!(
            granted(role, "secrets", verb),
            [vec![certs.secret.clone()]],
            "{verb} secrets"
        );
    }
    assert_eq!(granted(role, "secrets", "create"), [Vec::<String>::new()]);
    for verb in ["get", "list", "create", "update", "delete"] {
        assert_eq!(granted(role, "leases", verb).len(), 1, "{verb} leases");
    }
    for (resource, verb) in [
        ("secrets", "list"),
        ("secrets", "watch"),
        ("leases", "watch"),
    ] {
        assert!(
            granted(role, resource, verb).is_empty(),
            "{verb} {resource}: granted but never used"
        );
    }
    let sa = documents("rbac.yaml")
        .into_iter()
        .find(|d| d["kind"] == "ServiceAccount")
        .unwrap();
    let pod = deployment.spec.unwrap().template.spec.unwrap();
    assert_eq!(
        pod.service_account_name.as_deref(),
        sa["metadata"]["name"].as_str()
    );
    for binding in ["ClusterRoleBinding", "RoleBinding"] {
        assert_eq!(
            metal_doc(&docs, binding)["subjects"][0]["name"],
            sa["metadata"]["name"]
        );
    }
}
