//! What CRD validation rules cost a write: custom resources created and updated over real HTTP
//! against a CRD with 0, 5 and 50 rules (on the object, its nested fields, list items and map
//! values, a transition rule among them), one writer, so the figures are per-request latency.
//! Run with `cargo bench -p kube-testenv --bench cel_rules`; tests run unoptimized, and
//! `cargo test -p kube-testenv --bench cel_rules -- --run` measures that build.

use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube_testenv::TestEnv;
use serde_json::{Value, json};

const WRITES: usize = 400;

/// `n` rules spread over the schema's levels, each true for the objects written.
fn rules(n: usize) -> (Vec<Value>, Vec<Value>, Vec<Value>, Vec<Value>) {
    let pool_spec = [
        "self.min <= self.max",
        "!has(self.name) || self.name.matches('^[a-z0-9-]+$')",
        "self.min == oldSelf.min || self.min < self.max",
        "!has(self.tags) || self.tags.all(t, t.size() > 0)",
        "!has(self.labels) || self.labels.all(k, k.size() < 64)",
    ];
    let (mut spec, mut name, mut item, mut value) = (vec![], vec![], vec![], vec![]);
    for i in 0..n {
        match i % 4 {
            0 => spec.push(json!({"rule": pool_spec[(i / 4) % pool_spec.len()]})),
            1 => name.push(json!({"rule": format!("self.size() < {}", 40 + i)})),
            2 => item.push(json!({"rule": format!("self != 'forbidden-{i}'")})),
            _ => value
                .push(json!({"rule": format!("self.startsWith('v') || self.size() < {}", 10 + i)})),
        }
    }
    (spec, name, item, value)
}

fn crd(plural: &str, n: usize) -> DynamicObject {
    let (spec, name, item, value) = rules(n);
    serde_json::from_value(json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.bench.example.com")},
        "spec": {"group": "bench.example.com", "scope": "Namespaced",
            "names": {"plural": plural, "kind": plural.to_uppercase()},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
                    "type": "object", "x-kubernetes-validations": spec, "properties": {
                        "min": {"type": "integer"}, "max": {"type": "integer"},
                        "name": {"type": "string", "maxLength": 63, "x-kubernetes-validations": name},
                        "tags": {"type": "array", "maxItems": 16, "items": {"type": "string", "maxLength": 32, "x-kubernetes-validations": item}},
                        "labels": {"type": "object", "maxProperties": 16, "additionalProperties": {"type": "string", "maxLength": 63, "x-kubernetes-validations": value}}
                    }}}}}}]}}))
    .expect("crd")
}

/// Creates, then patches, `WRITES` objects of a CRD with `n` rules named by `label`; the time
/// each phase took.
async fn measure(env: &TestEnv, n: usize, label: &str) -> (Duration, Duration) {
    let plural = format!("{label}{n}s");
    let crds: Api<DynamicObject> = Api::all_with(
        env.client(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            "customresourcedefinitions",
        ),
    );
    crds.create(&PostParams::default(), &crd(&plural, n))
        .await
        .expect("create crd");
    let kind = plural.to_uppercase();
    let api: Api<DynamicObject> = Api::namespaced_with(
        env.client(),
        "default",
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("bench.example.com", "v1", &kind),
            &plural,
        ),
    );
    let object = |i: usize| -> DynamicObject {
        serde_json::from_value(json!({"apiVersion": "bench.example.com/v1", "kind": kind,
            "metadata": {"name": format!("o-{i:04}")},
            "spec": {"min": 1, "max": 5, "name": format!("name-{i}"), "tags": ["a", "b", "c"],
                "labels": {"app": "v1", "tier": "web"}}}))
        .expect("object")
    };
    let t0 = Instant::now();
    for i in 0..WRITES {
        api.create(&PostParams::default(), &object(i))
            .await
            .expect("create");
    }
    let created = t0.elapsed();
    let t1 = Instant::now();
    for i in 0..WRITES {
        let p = Patch::Merge(json!({"spec": {"max": 6, "tags": ["a", "b", "c", "d"]}}));
        api.patch(&format!("o-{i:04}"), &PatchParams::default(), &p)
            .await
            .expect("patch");
    }
    (created, t1.elapsed())
}

fn main() {
    // `cargo test --benches` builds and starts every bench: measure only when asked.
    let asked = std::env::args().any(|a| a == "--bench" || a == "--run");
    if !asked {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let env = TestEnv::start().await.expect("start");
        // The first writes of a fresh server pay for its warm-up.
        measure(&env, 0, "warm").await;
        for n in [0, 5, 50] {
            let (created, patched) = measure(&env, n, "r").await;
            println!(
                "{n:>2} rules: create {:.0}/s ({:?} each), merge patch {:.0}/s ({:?} each)",
                WRITES as f64 / created.as_secs_f64(),
                created / WRITES as u32,
                WRITES as f64 / patched.as_secs_f64(),
                patched / WRITES as u32,
            );
        }
    });
}
