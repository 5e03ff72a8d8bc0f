//! The built-in types' JSON schemas, generated from k8s-openapi's `schemars` output (whichever
//! k8s-openapi version the final binary enables) on first use and cached for the process:
//! one entry per served built-in kind, its definitions keyed by upstream's names
//! (`io.k8s.api.core.v1.Node`) with `$ref`s to `#/definitions/<name>`.

use std::sync::{Arc, OnceLock};

use k8s_openapi::api;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
use k8s_openapi::schemars::{JsonSchema, SchemaGenerator, generate::SchemaSettings};
use serde_json::{Map, Value};

/// Where the generated `$ref`s point; `openapi` rewrites it for v3 documents.
pub const REF_PREFIX: &str = "#/definitions/";

/// One kind's schema: the name of its root definition and every definition it reaches.
#[derive(Debug)]
pub struct KindSchema {
    /// The root definition's name (`io.k8s.api.core.v1.Node`).
    pub root: String,
    /// The definitions, root included.
    pub defs: Map<String, Value>,
}

impl KindSchema {
    /// The definition a `{"$ref": ...}` node points to, or the node itself.
    pub fn resolve<'a>(&'a self, schema: &'a Value) -> &'a Value {
        match schema.get("$ref").and_then(Value::as_str) {
            Some(r) => r
                .strip_prefix(REF_PREFIX)
                .and_then(|name| self.defs.get(name))
                .unwrap_or(schema),
            None => schema,
        }
    }

    /// The root definition.
    pub fn root_schema(&self) -> Option<&Value> {
        self.defs.get(&self.root)
    }
}

struct Kind {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    generate: fn(&mut SchemaGenerator) -> Value,
    cache: OnceLock<Arc<KindSchema>>,
}

fn of<T: JsonSchema>(g: &mut SchemaGenerator) -> Value {
    g.subschema_for::<T>().to_value()
}

macro_rules! kinds {
    ($(($group:expr, $version:expr, $kind:expr, $ty:ty)),* $(,)?) => {
        [$(Kind { group: $group, version: $version, kind: $kind, generate: of::<$ty>, cache: OnceLock::new() }),*]
    };
}

/// Every built-in kind of the resource table (a test checks that none is missing), plus the
/// TokenRequest of `serviceaccounts/token`.
static KINDS: [Kind; 23] = kinds![
    ("", "v1", "Node", api::core::v1::Node),
    ("", "v1", "Service", api::core::v1::Service),
    ("", "v1", "Namespace", api::core::v1::Namespace),
    ("", "v1", "ConfigMap", api::core::v1::ConfigMap),
    ("", "v1", "Secret", api::core::v1::Secret),
    ("", "v1", "Endpoints", api::core::v1::Endpoints),
    ("", "v1", "Event", api::core::v1::Event),
    ("", "v1", "Pod", api::core::v1::Pod),
    ("", "v1", "ServiceAccount", api::core::v1::ServiceAccount),
    (
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        apiextensions::CustomResourceDefinition
    ),
    (
        "coordination.k8s.io",
        "v1",
        "Lease",
        api::coordination::v1::Lease
    ),
    ("events.k8s.io", "v1", "Event", api::events::v1::Event),
    (
        "discovery.k8s.io",
        "v1",
        "EndpointSlice",
        api::discovery::v1::EndpointSlice
    ),
    (
        "authentication.k8s.io",
        "v1",
        "TokenReview",
        api::authentication::v1::TokenReview
    ),
    (
        "authentication.k8s.io",
        "v1",
        "TokenRequest",
        api::authentication::v1::TokenRequest
    ),
    (
        "authorization.k8s.io",
        "v1",
        "SubjectAccessReview",
        api::authorization::v1::SubjectAccessReview
    ),
    (
        "authorization.k8s.io",
        "v1",
        "SelfSubjectAccessReview",
        api::authorization::v1::SelfSubjectAccessReview
    ),
    (
        "authorization.k8s.io",
        "v1",
        "LocalSubjectAccessReview",
        api::authorization::v1::LocalSubjectAccessReview
    ),
    (
        "authorization.k8s.io",
        "v1",
        "SelfSubjectRulesReview",
        api::authorization::v1::SelfSubjectRulesReview
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        api::rbac::v1::ClusterRole
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        api::rbac::v1::ClusterRoleBinding
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "Role",
        api::rbac::v1::Role
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        api::rbac::v1::RoleBinding
    ),
];

fn all() -> impl Iterator<Item = &'static Kind> {
    KINDS.iter()
}

fn generate(k: &Kind) -> KindSchema {
    let mut g = SchemaSettings::draft07()
        .with(|s| {
            s.definitions_path = "/definitions".into();
            s.meta_schema = None;
            s.transforms = Vec::new();
        })
        .into_generator();
    let root_ref = (k.generate)(&mut g);
    let defs = g.take_definitions(false);
    let root = root_ref
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix(REF_PREFIX))
        .unwrap_or_default()
        .to_string();
    KindSchema { root, defs }
}

/// The schema of a built-in kind, generated on first use.
pub fn schema(group: &str, version: &str, kind: &str) -> Option<Arc<KindSchema>> {
    let k = all().find(|k| k.group == group && k.version == version && k.kind == kind)?;
    Some(k.cache.get_or_init(|| Arc::new(generate(k))).clone())
}

/// The built-in kinds of one group-version (`kind`s), in table order.
pub fn kinds_of(group: &str, version: &str) -> Vec<&'static str> {
    all()
        .filter(|k| k.group == group && k.version == version)
        .map(|k| k.kind)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::resources::TABLE;

    #[test]
    fn every_table_kind_has_a_schema() {
        for r in TABLE {
            let s = schema(r.group, r.version, r.kind)
                .unwrap_or_else(|| panic!("no schema for {}/{} {}", r.group, r.version, r.kind));
            assert!(s.root_schema().is_some(), "{}: no root definition", r.kind);
        }
    }

    #[test]
    fn node_schema_refers_to_its_parts_by_upstream_names() {
        let s = schema("", "v1", "Node").unwrap();
        assert_eq!(s.root, "io.k8s.api.core.v1.Node");
        let spec = &s.root_schema().unwrap()["properties"]["spec"];
        assert_eq!(spec["$ref"], "#/definitions/io.k8s.api.core.v1.NodeSpec");
        assert!(
            s.defs
                .contains_key("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")
        );
    }
}
