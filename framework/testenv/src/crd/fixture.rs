//! A CRD's schema and CEL rules applied to objects without a server, for table tests of which
//! specs are valid: the same pruning, defaulting, schema validation, ratcheting and rules a
//! write through kube-testenv gets, with the same words, in microseconds.

use serde_json::Value;

use crate::api::cel::compile::{RuleTree, compile_root};
use crate::api::structural::Schema;

/// One served version of the CRD.
#[derive(Debug)]
struct Version {
    name: String,
    schema: Schema,
    rules: Option<RuleTree>,
}

/// A CRD's versions, their schemas and rules compiled (see [`CrdRules::new`]).
#[derive(Debug)]
pub struct CrdRules {
    group: String,
    versions: Vec<Version>,
}

impl CrdRules {
    /// Compiles a CRD (as JSON); the server's causes (`field: message`) when it would refuse it.
    pub fn new(crd: &Value) -> Result<CrdRules, Vec<String>> {
        // The CRD as the server takes it: its kind's defaults, then its validation.
        let admission =
            crate::api::kinds::lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions")
                .map(|id| crate::api::kinds::TABLE[id].admission);
        let mut crd = crd.clone();
        if let Some(prepare) = admission.and_then(|a| a.prepare) {
            prepare(&mut crd, None);
        }
        let refused = admission
            .and_then(|a| a.validate)
            .map(|validate| validate(&crd, None))
            .unwrap_or_default();
        if !refused.is_empty() {
            return Err(refused
                .iter()
                .map(|c| format!("{}: {}", c.field, c.message))
                .collect());
        }
        let versions = crd
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .map(|vs| {
                vs.iter()
                    .filter_map(|v| {
                        let schema = Schema::parse(v.pointer("/schema/openAPIV3Schema")?);
                        Some(Version {
                            name: v.get("name")?.as_str()?.to_string(),
                            rules: compile_root(&schema).tree,
                            schema,
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        let group = crd
            .pointer("/spec/group")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        Ok(CrdRules { group, versions })
    }

    /// Checks an object (its `apiVersion` names the version) as a create (`old`: `None`) or an
    /// update would: the object as the server would store it, or the 422's causes
    /// (`field: message`).
    pub fn check(&self, obj: &Value, old: Option<&Value>) -> Result<Value, Vec<String>> {
        let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        let version = api_version
            .strip_prefix(&format!("{}/", self.group))
            .and_then(|v| self.versions.iter().find(|x| x.name == v))
            .ok_or_else(|| {
                vec![format!(
                    "apiVersion: {api_version:?} is not a version of this CRD"
                )]
            })?;
        let mut obj = obj.clone();
        version.schema.prune_root(&mut obj);
        version.schema.apply_defaults(&mut obj);
        let causes =
            crate::crd::admit::schema_and_rules(&version.schema, version.rules.as_ref(), &obj, old);
        if causes.is_empty() {
            Ok(obj)
        } else {
            Err(causes
                .iter()
                .map(|c| format!("{}: {}", c.field, c.message))
                .collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(rule: &str) -> Value {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
                "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                    "type": "object", "properties": {"spec": {"type": "object",
                        "properties": {"min": {"type": "integer", "default": 0}, "max": {"type": "integer", "minimum": 0}},
                        "x-kubernetes-validations": [{"rule": rule, "message": "min must not exceed max"}]}}}}}]}})
    }

    #[test]
    fn objects_are_checked_without_a_server() {
        let rules = CrdRules::new(&crd("self.min <= self.max")).unwrap();
        let w = |spec: Value| json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec});
        let stored = rules.check(&w(json!({"max": 1, "x": 1})), None).unwrap();
        assert_eq!(stored["spec"], json!({"min": 0, "max": 1}));
        assert_eq!(
            rules
                .check(&w(json!({"min": 2, "max": 1})), None)
                .unwrap_err(),
            ["spec: Invalid value: \"object\": min must not exceed max"]
        );
        let old = w(json!({"min": 2, "max": 1}));
        assert!(
            rules
                .check(&w(json!({"min": 2, "max": 1})), Some(&old))
                .is_ok()
        );
        assert!(
            rules
                .check(&json!({"apiVersion": "example.com/v2"}), None)
                .is_err()
        );
    }

    /// Upstream's strategy runs no rule once the schema found a type, required, enum, length or
    /// count error; other schema errors (a minimum here) leave the rules running.
    #[test]
    fn a_blocking_schema_error_keeps_the_rules_from_running() {
        let rules = CrdRules::new(&crd("self.min <= self.max")).unwrap();
        let w = |spec: Value| json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec});
        assert_eq!(
            rules
                .check(&w(json!({"min": "2", "max": 1})), None)
                .unwrap_err(),
            [
                "spec.min: Invalid value: \"string\": spec.min in body must be of type integer: \"string\"",
                "<nil>: Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
            ]
        );
        assert_eq!(
            rules
                .check(&w(json!({"min": 2, "max": -1})), None)
                .unwrap_err(),
            [
                "spec.max: Invalid value: -1: spec.max in body should be greater than or equal to 0",
                "spec: Invalid value: \"object\": min must not exceed max",
            ]
        );
    }

    #[test]
    fn a_crd_the_server_refuses_is_refused() {
        let err = CrdRules::new(&crd("self.nope > 1")).unwrap_err();
        assert!(err[0].contains("undefined field 'nope'"), "{err:?}");
    }
}
