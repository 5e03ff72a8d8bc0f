//! Self-managed certificates pointing the managed configurations (`--webhook-url`,
//! `--webhook-service`) against kube-testenv: every webhook of a configuration and a CRD's
//! conversion webhook get the URL or the Service, each keeping its path, beside the `caBundle`;
//! a second round writes nothing, and the write is a patch (the RBAC in docs/deploy/ grants
//! get and patch, not update).

use controller_manager::certs::{ClientTarget, Managed, SelfManagedCerts};
use controller_manager::testing::Requests;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::PostParams;
use kube_testenv::TestEnv;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

fn webhook(name: &str, path: &str) -> Value {
    json!({
        "name": name, "admissionReviewVersions": ["v1"], "sideEffects": "None",
        "clientConfig": {"service": {"namespace": "kube-system", "name": "old", "path": path}},
        "rules": [{"apiGroups": ["wh.example.com"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["widgets"]}]
    })
}

fn crd() -> CustomResourceDefinition {
    let schema = json!({"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}});
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.wh.example.com"},
        "spec": {"group": "wh.example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [
                {"name": "v1alpha1", "served": true, "storage": false, "schema": schema},
                {"name": "v1", "served": true, "storage": true, "schema": schema}
            ],
            "conversion": {"strategy": "Webhook", "webhook": {
                "clientConfig": {"service": {"namespace": "kube-system", "name": "old", "path": "/convert"}},
                "conversionReviewVersions": ["v1"]}}}
    }))
    .unwrap()
}

#[tokio::test]
async fn managed_configurations_are_pointed_at_the_url_or_service_keeping_paths() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let configs: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let config = json!({"metadata": {"name": "widgets"}, "webhooks": [webhook("a.wh.example.com", "/validate-a"), webhook("b.wh.example.com", "/validate-b")]});
    let config: ValidatingWebhookConfiguration = serde_json::from_value(config).unwrap();
    configs
        .create(&PostParams::default(), &config)
        .await
        .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &crd()).await.unwrap();

    let url = ClientTarget::url("https://127.0.0.1:9443").unwrap();
    let managed: Vec<Managed> = [
        "ValidatingWebhookConfiguration/widgets",
        "CustomResourceDefinition/widgets.wh.example.com",
    ]
    .iter()
    .map(|m| m.parse::<Managed>().unwrap().pointing_at(Some(url.clone())))
    .collect();
    let certs = SelfManagedCerts::new("kube-system", "webhook-certs", vec!["127.0.0.1".into()])
        .managing(managed.clone());
    let stop = CancellationToken::new();
    let (_, task) = certs.start(client.clone(), stop.clone()).await.unwrap();
    stop.cancel();
    task.await.unwrap();
    let bundle = certs.ensure(&client).await.unwrap().ca_bundle;

    let pointed = |c: &ValidatingWebhookConfiguration| -> Vec<(Option<String>, bool)> {
        c.webhooks
            .iter()
            .flatten()
            .map(|w| {
                let cc = &w.client_config;
                let has_bundle =
                    cc.ca_bundle.as_ref().map(|b| b.0.as_slice()) == Some(bundle.as_bytes());
                (cc.url.clone(), has_bundle && cc.service.is_none())
            })
            .collect()
    };
    let config = configs.get("widgets").await.unwrap();
    assert_eq!(
        pointed(&config),
        [
            (Some("https://127.0.0.1:9443/validate-a".to_string()), true),
            (Some("https://127.0.0.1:9443/validate-b".to_string()), true),
        ]
    );
    let conversion = |crd: CustomResourceDefinition| {
        crd.spec
            .conversion
            .unwrap()
            .webhook
            .unwrap()
            .client_config
            .unwrap()
    };
    let converted = conversion(crds.get("widgets.wh.example.com").await.unwrap());
    assert_eq!(
        converted.url.as_deref(),
        Some("https://127.0.0.1:9443/convert")
    );
    assert_eq!(converted.ca_bundle.unwrap().0, bundle.as_bytes());

    // Already in place: nothing written; every write was a patch.
    for m in &managed {
        assert!(!m.inject(&client, &bundle).await.unwrap(), "{m}");
    }
    let writes =
        |resource: &str, verb: &str| Requests::of(&env).resource(resource).verb(verb).count();
    for resource in [
        "validatingwebhookconfigurations",
        "customresourcedefinitions",
    ] {
        assert_eq!(writes(resource, "patch"), 1, "{resource}");
        assert_eq!(writes(resource, "update"), 0, "{resource}");
    }

    // Moved in-cluster: the Service, each path kept, port 443 as the server defaults it.
    let service = ClientTarget::service("kube-system/widgets-webhook").unwrap();
    for m in &managed {
        let m = m.clone().pointing_at(Some(service.clone()));
        assert!(m.inject(&client, &bundle).await.unwrap(), "{m}");
        assert!(!m.inject(&client, &bundle).await.unwrap(), "{m} again");
    }
    let config = configs.get("widgets").await.unwrap();
    let services: Vec<_> = config
        .webhooks
        .iter()
        .flatten()
        .map(|w| {
            let s = w.client_config.service.clone().unwrap();
            (
                s.namespace,
                s.name,
                s.path,
                s.port,
                w.client_config.url.clone(),
            )
        })
        .collect();
    let expected = |path: &str| {
        (
            "kube-system".to_string(),
            "widgets-webhook".to_string(),
            Some(path.to_string()),
            Some(443),
            None,
        )
    };
    assert_eq!(services, [expected("/validate-a"), expected("/validate-b")]);
    let converted = conversion(crds.get("widgets.wh.example.com").await.unwrap());
    assert_eq!(converted.service.unwrap().path.as_deref(), Some("/convert"));
}
