//! CRDs through kubectl: apply a CRD, `kubectl wait` for Established, find it in
//! `kubectl api-resources`, apply, scale and get custom resources by plural, short name and
//! category with the CRD's printer columns, and delete the CRD (its resource type goes with it).

mod support;

use kube_testenv::TestEnv;
use support::kubectl::Kubectl;

const CRD_YAML: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.stable.example.com
spec:
  group: stable.example.com
  scope: Namespaced
  names:
    plural: widgets
    singular: widget
    kind: Widget
    shortNames: [wi]
    categories: [gadgets]
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
    additionalPrinterColumns:
    - name: Color
      type: string
      jsonPath: .spec.color
    - name: Size
      type: integer
      jsonPath: .spec.size
    - name: Ready
      type: string
      jsonPath: .status.conditions[?(@.type=="Ready")].status
    - name: Age
      type: date
      jsonPath: .metadata.creationTimestamp
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              color: {type: string}
              size: {type: integer, default: 3}
              replicas: {type: integer}
          status:
            type: object
            properties:
              replicas: {type: integer}
              conditions:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [type]
                items:
                  type: object
                  required: [type]
                  properties:
                    type: {type: string}
                    status: {type: string}
"#;

const WIDGET_YAML: &str = "apiVersion: stable.example.com/v1\nkind: Widget\nmetadata:\n  name: w1\nspec:\n  color: blue\n";

fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_applies_waits_for_and_prints_custom_resources() {
    let env = TestEnv::start().await.unwrap();
    let k = Kubectl::new(&env);
    let crd = k.write("crd.yaml", CRD_YAML);
    let crd = crd.to_str().unwrap();
    assert_eq!(
        k.run(&["apply", "-f", crd]).await.trim(),
        "customresourcedefinition.apiextensions.k8s.io/widgets.stable.example.com created"
    );
    let waited = k
        .run(&[
            "wait",
            "--for=condition=Established",
            "--timeout=10s",
            "crd/widgets.stable.example.com",
        ])
        .await;
    assert_eq!(
        waited.trim(),
        "customresourcedefinition.apiextensions.k8s.io/widgets.stable.example.com condition met"
    );

    let crds = k.run(&["get", "crds"]).await;
    let lines: Vec<&str> = crds.lines().collect();
    assert_eq!(words(lines[0]), ["NAME", "CREATED", "AT"], "{crds}");
    assert_eq!(words(lines[1])[0], "widgets.stable.example.com", "{crds}");
    assert!(
        words(lines[1])[1].ends_with('Z'),
        "an RFC 3339 time: {crds}"
    );

    let resources = k
        .run(&["api-resources", "--api-group=stable.example.com"])
        .await;
    let row = resources
        .lines()
        .find(|l| l.starts_with("widgets"))
        .unwrap_or_else(|| panic!("{resources}"));
    assert_eq!(
        words(row),
        ["widgets", "wi", "stable.example.com/v1", "true", "Widget"]
    );

    let explained = k.run(&["explain", "widgets.spec"]).await;
    assert!(
        explained.contains("KIND:       Widget") && explained.contains("color\t<string>"),
        "{explained}"
    );

    let cr = k.write("widget.yaml", WIDGET_YAML);
    let cr = cr.to_str().unwrap();
    assert_eq!(
        k.run(&["apply", "-f", cr]).await.trim(),
        "widget.stable.example.com/w1 created"
    );
    k.write("widget.yaml", &WIDGET_YAML.replace("blue", "red"));
    assert_eq!(
        k.run(&["apply", "-f", cr]).await.trim(),
        "widget.stable.example.com/w1 configured"
    );
    let patch_status = |body| {
        let verb = "patch widget w1 --subresource=status --type=merge -p";
        verb.split(' ').chain([body]).collect::<Vec<_>>()
    };
    let ready = r#"{"status":{"conditions":[{"type":"Ready","status":"True"}]}}"#;
    k.run(&patch_status(ready)).await;

    for what in ["widgets", "wi", "gadgets", "widget.stable.example.com"] {
        let out = k.run(&["get", what]).await;
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            words(lines[0]),
            ["NAME", "COLOR", "SIZE", "READY", "AGE"],
            "{what}: {out}"
        );
        assert_eq!(
            words(lines[1])[..4],
            ["w1", "red", "3", "True"],
            "{what}: {out}"
        );
    }
    assert_eq!(
        k.run(&["scale", "widget", "w1", "--replicas=4"])
            .await
            .trim(),
        "widget.stable.example.com/w1 scaled"
    );
    let yaml = k.run(&["get", "wi", "w1", "-o", "yaml"]).await;
    assert!(
        yaml.contains("generation: 3") && yaml.contains("size: 3") && yaml.contains("replicas: 4"),
        "{yaml}"
    );

    // A duplicate map key in a `map` list is refused by the schema.
    let duplicate = r#"{"status":{"conditions":[{"type":"Ready"},{"type":"Ready"}]}}"#;
    let (ok, _, err) = k.try_run(&patch_status(duplicate)).await;
    assert!(!ok && err.contains("Duplicate value"), "{err}");

    assert_eq!(
        k.run(&["delete", "crd", "widgets.stable.example.com"])
            .await
            .trim(),
        "customresourcedefinition.apiextensions.k8s.io \"widgets.stable.example.com\" deleted"
    );
    let resources = k
        .run(&["api-resources", "--api-group=stable.example.com"])
        .await;
    assert!(!resources.contains("widgets"), "{resources}");
    let (ok, _, err) = k.try_run(&["get", "widgets"]).await;
    assert!(
        !ok && err.contains("the server doesn't have a resource type \"widgets\""),
        "{err}"
    );
}
