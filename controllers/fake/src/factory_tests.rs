//! The `fake` provider through the registry: an empty cloud without `--cloud-config`, the file's
//! cloud with one, and the registry's error for a bad file.

use cloud_controllers::cloud::{CloudProviderRegistry, RegistryError};

use crate::{PROVIDER_NAME, factory};

fn registry() -> CloudProviderRegistry {
    let mut r = CloudProviderRegistry::new();
    r.register(PROVIDER_NAME, factory).unwrap();
    r
}

#[tokio::test]
async fn fake_without_config_is_an_empty_cloud_that_adopts_nothing() {
    let r = registry();
    assert_eq!(r.names(), vec!["fake"]);
    assert!(CloudProviderRegistry::new().names().is_empty());
    let cloud = r.init("fake", None).unwrap();
    assert_eq!(cloud.provider_name(), "fake");
    assert!(cloud.load_balancer().is_some());
    let instances = cloud.instances().unwrap();
    let exists = instances
        .instance_exists_by_provider_id("fake://any-node")
        .await;
    assert!(!exists.unwrap(), "no instance was configured");
    let err = instances.node_addresses("any-node").await.unwrap_err();
    assert!(
        err.to_string().contains("leaves that Node alone"),
        "an unknown node name is not \"not found\": {err}"
    );
}

#[test]
fn fake_reads_its_config_file() {
    let dir = std::env::temp_dir().join(format!("registry-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("cloud.yaml");
    std::fs::write(&path, "providerName: acme\nfacets: {loadBalancer: false}\n").unwrap();
    let cloud = registry().init("fake", Some(&path)).unwrap();
    assert_eq!(cloud.provider_name(), "acme");
    assert!(cloud.load_balancer().is_none());

    std::fs::write(&path, "bogus: 1\n").unwrap();
    let e = match registry().init("fake", Some(&path)) {
        Ok(_) => panic!("a bad file is an error"),
        Err(e) => e,
    };
    assert!(matches!(e, RegistryError::Init { .. }));
    let msg = e.to_string();
    let from = format!(
        "could not init cloud provider \"fake\" from --cloud-config file {}: ",
        path.display()
    );
    assert!(msg.starts_with(&from), "{msg}");
    assert!(msg.contains("key bogus (line 1, column 1)"), "{msg}");
    std::fs::remove_dir_all(&dir).unwrap();
}
