//! The built-in types' JSON schemas, generated from k8s-openapi's `schemars` output (whichever
//! k8s-openapi version the final binary enables) on first use and cached for the process:
//! one entry per served built-in kind (its `Kind::ty`) plus the TokenRequest subresource, its
//! definitions keyed by upstream's names (`io.k8s.api.core.v1.Node`) with `$ref`s to
//! `#/definitions/<name>`.

use std::sync::{Arc, OnceLock};

use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::schemars::generate::SchemaSettings;
use serde_json::{Map, Value};

use crate::api::kind::{Type, schema_of};
use crate::api::kinds::TABLE;

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

/// The schemas served besides the kinds' own: the TokenRequest of `serviceaccounts/token`.
static EXTRA: &[Type] = &[Type {
    group: "authentication.k8s.io",
    version: "v1",
    kind: "TokenRequest",
    plural: "token",
    namespaced: true,
    schema: schema_of::<TokenRequest>,
}];

/// Every type with a schema: the kinds of the table, in its order, then [`EXTRA`].
fn all() -> impl Iterator<Item = &'static Type> {
    TABLE.iter().map(|k| &k.ty).chain(EXTRA)
}

/// One schema per [`all`] entry, generated on first use.
fn cache() -> &'static [OnceLock<Arc<KindSchema>>] {
    static CACHE: OnceLock<Vec<OnceLock<Arc<KindSchema>>>> = OnceLock::new();
    CACHE.get_or_init(|| all().map(|_| OnceLock::new()).collect())
}

fn generate(t: &Type) -> KindSchema {
    let mut g = SchemaSettings::draft07()
        .with(|s| {
            s.definitions_path = "/definitions".into();
            s.meta_schema = None;
            s.transforms = Vec::new();
        })
        .into_generator();
    let root_ref = (t.schema)(&mut g);
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
    let (i, t) = all()
        .enumerate()
        .find(|(_, t)| t.group == group && t.version == version && t.kind == kind)?;
    Some(cache()[i].get_or_init(|| Arc::new(generate(t))).clone())
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
