//! ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding
//! (`admissionregistration.k8s.io/v1`, cluster-scoped): the CEL policies `admission::policies`
//! runs. Upstream's v1 defaults (`failurePolicy: Fail`; a `matchConstraints` or
//! `matchResources` with `matchPolicy: Equivalent`, empty selectors and its rules' `scope: *`;
//! a `paramRef`'s `parameterNotFoundAction: Deny`) and its validation (`validation`). A policy
//! has a status subresource, which the server writes (`admission::policies::status`), and both
//! keep `generation`.

mod validation;

use k8s_openapi::api::admissionregistration::v1 as openapi;
use k8s_pb::api::admissionregistration::v1 as pb;
use serde_json::{Map, Value, json};

use crate::api::kind::{
    Admission, Column, Kind, Lifecycle, ListStrategy, NameRule, Names, Printer, Protobuf, Rest,
    Shape, Type,
};
use crate::api::printing::{age, row};

/// ValidatingAdmissionPolicy.
pub const POLICY: Kind = Kind {
    ty: Type::of::<openapi::ValidatingAdmissionPolicy>(),
    names: Names {
        singular: "validatingadmissionpolicy",
        short: &[],
        categories: &["api-extensions"],
    },
    rest: Rest {
        status: true,
        generation: true,
        ..Rest::PLAIN
    },
    lifecycle: Lifecycle::AdmissionPolicy,
    name_rule: NameRule::Subdomain,
    field_selectors: &[],
    patch_lists: &[("spec.matchConditions", ListStrategy::MergeByKey("name"))],
    admission: Admission {
        defaults: Some(default_policy),
        validate: Some(validation::policy),
        ..Admission::NONE
    },
    printer: Printer {
        columns: &[
            Column::text("Name"),
            Column::new("Validations", "integer", 0),
            Column::text("ParamKind"),
            Column::text("Age"),
        ],
        cells: policy_cells,
    },
    protobuf: Protobuf::of::<pb::ValidatingAdmissionPolicy, pb::ValidatingAdmissionPolicyList>(),
    apply: Shape {
        atomic: &[
            "spec.matchConstraints.namespaceSelector",
            "spec.matchConstraints.objectSelector",
        ],
        ..Shape::NONE
    },
};

/// ValidatingAdmissionPolicyBinding.
pub const BINDING: Kind = Kind {
    ty: Type::of::<openapi::ValidatingAdmissionPolicyBinding>(),
    names: Names {
        singular: "validatingadmissionpolicybinding",
        short: &[],
        categories: &["api-extensions"],
    },
    rest: Rest {
        generation: true,
        ..Rest::PLAIN
    },
    lifecycle: Lifecycle::Object,
    name_rule: NameRule::Subdomain,
    field_selectors: &[],
    patch_lists: &[],
    admission: Admission {
        defaults: Some(default_binding),
        validate: Some(validation::binding),
        ..Admission::NONE
    },
    printer: Printer {
        columns: &[
            Column::text("Name"),
            Column::text("PolicyName"),
            Column::text("ParamRef"),
            Column::text("Age"),
        ],
        cells: binding_cells,
    },
    protobuf: Protobuf::of::<
        pb::ValidatingAdmissionPolicyBinding,
        pb::ValidatingAdmissionPolicyBindingList,
    >(),
    apply: Shape {
        atomic: &[
            "spec.matchResources.namespaceSelector",
            "spec.matchResources.objectSelector",
            "spec.paramRef.selector",
        ],
        ..Shape::NONE
    },
};

fn spec_mut(obj: &mut Value) -> Option<&mut Map<String, Value>> {
    obj.get_mut("spec").and_then(Value::as_object_mut)
}

fn unset(m: &Map<String, Value>, key: &str) -> bool {
    m.get(key).is_none_or(Value::is_null)
}

fn default_policy(obj: &mut Value) {
    let Some(spec) = spec_mut(obj) else {
        return;
    };
    if unset(spec, "failurePolicy") {
        spec.insert("failurePolicy".into(), "Fail".into());
    }
    if let Some(m) = spec
        .get_mut("matchConstraints")
        .and_then(Value::as_object_mut)
    {
        default_match_resources(m);
    }
}

fn default_binding(obj: &mut Value) {
    let Some(spec) = spec_mut(obj) else {
        return;
    };
    if let Some(m) = spec
        .get_mut("matchResources")
        .and_then(Value::as_object_mut)
    {
        default_match_resources(m);
    }
    if let Some(r) = spec.get_mut("paramRef").and_then(Value::as_object_mut)
        && unset(r, "parameterNotFoundAction")
    {
        r.insert("parameterNotFoundAction".into(), "Deny".into());
    }
}

/// Upstream's `SetDefaults_MatchResources` and, on each rule, `SetDefaults_Rule`.
fn default_match_resources(m: &mut Map<String, Value>) {
    for (key, default) in [
        ("matchPolicy", json!("Equivalent")),
        ("namespaceSelector", json!({})),
        ("objectSelector", json!({})),
    ] {
        if unset(m, key) {
            m.insert(key.into(), default);
        }
    }
    for list in ["resourceRules", "excludeResourceRules"] {
        let rules = m.get_mut(list).and_then(Value::as_array_mut);
        for rule in rules.into_iter().flatten().filter_map(Value::as_object_mut) {
            if unset(rule, "scope") {
                rule.insert("scope".into(), "*".into());
            }
        }
    }
}

fn policy_cells(obj: &Value) -> Vec<Value> {
    let n = obj
        .pointer("/spec/validations")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let kind = match obj.pointer("/spec/paramKind") {
        Some(p) if p.is_object() => format!(
            "{}/{}",
            p.get("apiVersion").and_then(Value::as_str).unwrap_or(""),
            p.get("kind").and_then(Value::as_str).unwrap_or("")
        ),
        _ => "<unset>".into(),
    };
    row(obj, vec![n.into(), kind.into(), age(obj).into()])
}

fn binding_cells(obj: &Value) -> Vec<Value> {
    let text = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or("");
    let param = match (
        text("/spec/paramRef/namespace"),
        text("/spec/paramRef/name"),
    ) {
        (_, "") if obj.pointer("/spec/paramRef/selector").is_some() => "*/*".to_string(),
        (_, "") => "<unset>".to_string(),
        ("", name) => name.to_string(),
        (ns, name) => format!("{ns}/{name}"),
    };
    row(
        obj,
        vec![
            text("/spec/policyName").into(),
            param.into(),
            age(obj).into(),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_servers() {
        let mut p =
            json!({"spec": {"matchConstraints": {"resourceRules": [{"operations": ["CREATE"]}]}}});
        default_policy(&mut p);
        assert_eq!(
            p["spec"],
            json!({"failurePolicy": "Fail", "matchConstraints": {"matchPolicy": "Equivalent",
                "namespaceSelector": {}, "objectSelector": {},
                "resourceRules": [{"operations": ["CREATE"], "scope": "*"}]}})
        );
        let mut b = json!({"spec": {"policyName": "p", "paramRef": {"name": "x"}}});
        default_binding(&mut b);
        assert_eq!(b["spec"]["paramRef"]["parameterNotFoundAction"], "Deny");
        assert!(b["spec"].get("matchResources").is_none());
    }
}
