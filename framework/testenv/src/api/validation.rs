//! Field validation kube-apiserver applies to every write that controllers can trip over: label
//! keys and values, annotation keys, Node taints (effect, key, uniqueness by key and effect) and
//! object names (subdomain, label, DNS-1035), with upstream's field paths and messages.

use serde_json::Value;

use crate::api::status::{Cause, go_quote};

const NAME_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const PREFIX_MSG: &str = "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

fn is_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

fn is_subdomain(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|p| {
            let b = p.as_bytes();
            !b.is_empty()
                && b.len() <= 63
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        })
}

/// Causes for a qualified name (`[prefix/]name`) used as a label or annotation key.
pub(crate) fn qualified_name(field: &str, key: &str) -> Vec<Cause> {
    let quoted = go_quote(key);
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let mut causes = Vec::new();
    if name.is_empty() {
        causes.push(Cause::invalid(
            field,
            &quoted,
            "name part must be non-empty",
        ));
    } else {
        if name.len() > 63 {
            causes.push(Cause::invalid(
                field,
                &quoted,
                "name part must be no more than 63 characters",
            ));
        }
        if !is_name_part(name) {
            causes.push(Cause::invalid(field, &quoted, NAME_MSG));
        }
    }
    match prefix {
        Some("") => causes.push(Cause::invalid(
            field,
            &quoted,
            "prefix part must be non-empty",
        )),
        Some(p) if !is_subdomain(p) => causes.push(Cause::invalid(field, &quoted, PREFIX_MSG)),
        _ => {}
    }
    causes
}

/// Upstream's `TotalAnnotationSizeLimitB`: the keys and values of all annotations together.
const TOTAL_ANNOTATION_SIZE: usize = 256 * 1024;

/// Causes for a label value.
pub(crate) fn label_value(field: &str, v: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    if v.len() > 63 {
        causes.push(Cause::invalid(
            field,
            &go_quote(v),
            "must be no more than 63 characters",
        ));
    }
    if !v.is_empty() && !is_name_part(v) {
        causes.push(Cause::invalid(field, &go_quote(v), VALUE_MSG));
    }
    causes
}

/// `metadata.labels` and `metadata.annotations` keys, and label values.
pub fn object_meta(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    if let Some(labels) = obj.pointer("/metadata/labels").and_then(Value::as_object) {
        for (k, v) in labels {
            causes.extend(qualified_name("metadata.labels", k));
            causes.extend(label_value("metadata.labels", v.as_str().unwrap_or("")));
        }
    }
    if let Some(annotations) = obj
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
    {
        for k in annotations.keys() {
            causes.extend(qualified_name("metadata.annotations", &k.to_lowercase()));
        }
        let size: usize = annotations
            .iter()
            .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
            .sum();
        if size > TOTAL_ANNOTATION_SIZE {
            causes.push(Cause {
                reason: "FieldValueTooLong",
                message: format!("Too long: must have at most {TOTAL_ANNOTATION_SIZE} bytes"),
                field: "metadata.annotations".into(),
            });
        }
    }
    causes
}

const EFFECTS: &[&str] = &["NoExecute", "NoSchedule", "PreferNoSchedule"];

/// Node `spec.taints`.
pub fn taints(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let Some(taints) = obj.pointer("/spec/taints").and_then(Value::as_array) else {
        return causes;
    };
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for (i, t) in taints.iter().enumerate() {
        let key = t.get("key").and_then(Value::as_str).unwrap_or("");
        let value = t.get("value").and_then(Value::as_str).unwrap_or("");
        let effect = t.get("effect").and_then(Value::as_str).unwrap_or("");
        causes.extend(qualified_name(&format!("spec.taints[{i}].key"), key));
        if !value.is_empty() && (!is_name_part(value) || value.len() > 63) {
            causes.push(Cause::invalid(
                format!("spec.taints[{i}].value"),
                &go_quote(value),
                VALUE_MSG,
            ));
        }
        if effect.is_empty() {
            causes.push(Cause::required(format!("spec.taints[{i}].effect"), ""));
        } else if !EFFECTS.contains(&effect) {
            causes.push(Cause::not_supported(
                format!("spec.taints[{i}].effect"),
                &go_quote(effect),
                EFFECTS,
            ));
        }
        if seen.contains(&(key, effect)) {
            causes.push(Cause {
                reason: "FieldValueDuplicate",
                message: format!(
                    "Duplicate value: core.Taint{{Key:{}, Value:{}, Effect:{}, TimeAdded:<nil>}}: taints must be unique by key and effect pair",
                    go_quote(key),
                    go_quote(value),
                    go_quote(effect)
                ),
                field: format!("spec.taints[{i}]"),
            });
        }
        seen.push((key, effect));
    }
    causes
}

/// Event rules (upstream `ValidateEventCreate`): an event's namespace must agree with the object
/// it is about (events about cluster-scoped objects go to `default`, or `kube-system` for new-style
/// events), new-style events (with `eventTime`) name their reporter, action and reason, and
/// events.k8s.io/v1 events must be new-style with type Normal or Warning.
pub fn event(group: &str, obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let text = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or("");
    let v1 = group == "events.k8s.io";
    let ns = text("/metadata/namespace");
    let involved_ns = if v1 {
        text("/regarding/namespace")
    } else {
        text("/involvedObject/namespace")
    };
    let new_style = obj.get("eventTime").is_some_and(|t| !t.is_null());
    let mismatch = || {
        Cause::invalid(
            "involvedObject.namespace",
            &go_quote(involved_ns),
            "does not match event.namespace",
        )
    };
    if v1 {
        if !new_style {
            causes.push(Cause::required("eventTime", ""));
        }
        let ty = text("/type");
        if ty != "Normal" && ty != "Warning" {
            causes.push(Cause::invalid(
                "type",
                "\"\"",
                &format!("has invalid value: {ty}"),
            ));
        }
    }
    if !new_style {
        if involved_ns.is_empty() {
            if !ns.is_empty() && ns != "default" {
                causes.push(mismatch());
            }
        } else if ns != involved_ns {
            causes.push(mismatch());
        }
    } else {
        if involved_ns.is_empty() && ns != "default" && ns != "kube-system" {
            causes.push(mismatch());
        }
        let (controller_field, controller) = if v1 {
            ("reportingController", text("/reportingController"))
        } else {
            ("reportingComponent", text("/reportingComponent"))
        };
        if controller.is_empty() {
            causes.push(Cause::required(controller_field, ""));
        }
        for (field, value) in [
            ("reportingInstance", text("/reportingInstance")),
            ("action", text("/action")),
            ("reason", text("/reason")),
        ] {
            if value.is_empty() {
                causes.push(Cause::required(field, ""));
            }
        }
    }
    causes
}

/// Lease spec rules (upstream `ValidateLeaseSpec`): positive duration, non-negative transitions.
pub fn lease(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    if let Some(d) = obj
        .pointer("/spec/leaseDurationSeconds")
        .and_then(Value::as_i64)
        && d <= 0
    {
        causes.push(Cause::invalid(
            "spec.leaseDurationSeconds",
            &d.to_string(),
            "must be greater than 0",
        ));
    }
    if let Some(t) = obj
        .pointer("/spec/leaseTransitions")
        .and_then(Value::as_i64)
        && t < 0
    {
        causes.push(Cause::invalid(
            "spec.leaseTransitions",
            &t.to_string(),
            "must be greater than or equal to 0",
        ));
    }
    causes
}

pub(crate) const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
pub(crate) const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
pub(crate) const DNS1035_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

pub(crate) fn is_label(s: &str, first_alpha: bool) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && (b[0].is_ascii_lowercase() || (!first_alpha && b[0].is_ascii_digit()))
        && b[b.len() - 1] != b'-'
}

/// A JSON list of strings as a Vec (missing = empty).
pub fn string_list(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn labels_and_annotations() {
        let ok = json!({"metadata": {"labels": {"node.kubernetes.io/instance-type": "m5.large", "a": ""}, "annotations": {"Foo/Bar": "x"}}});
        assert!(object_meta(&ok).is_empty(), "{:?}", object_meta(&ok));
        let bad = json!({"metadata": {"labels": {"bad key": "v", "k": "bad value!", "UPPER.example.com/x": "y"}}});
        let fields: Vec<String> = object_meta(&bad).into_iter().map(|c| c.message).collect();
        assert_eq!(fields.len(), 3, "{fields:?}");
        assert!(
            fields
                .iter()
                .any(|m| m.starts_with("Invalid value: \"bad key\": name part must consist"))
        );
        assert!(
            fields
                .iter()
                .any(|m| m.starts_with("Invalid value: \"bad value!\": a valid label must be"))
        );
    }

    #[test]
    fn event_namespace_and_reporter_rules() {
        let old_style_node_event = json!({"metadata": {"namespace": "kube-system"}, "involvedObject": {"kind": "Node", "name": "n"}});
        let causes = event("", &old_style_node_event);
        assert_eq!(causes.len(), 1);
        assert_eq!(
            causes[0].message,
            "Invalid value: \"\": does not match event.namespace"
        );
        let ok = json!({"metadata": {"namespace": "default"}, "involvedObject": {"kind": "Node", "name": "n"}});
        assert!(event("", &ok).is_empty());
        let v1 = json!({"metadata": {"namespace": "default"}, "eventTime": "2026-01-01T00:00:00.000000Z", "type": "Normal", "regarding": {"kind": "Node"}, "reportingController": "c", "reportingInstance": "i", "action": "A", "reason": "R"});
        assert!(event("events.k8s.io", &v1).is_empty());
        let fields: Vec<String> = event(
            "events.k8s.io",
            &json!({"metadata": {"namespace": "default"}, "type": "Bad"}),
        )
        .into_iter()
        .map(|c| c.field)
        .collect();
        assert_eq!(fields, ["eventTime", "type"]);
    }

    #[test]
    fn lease_rules() {
        assert!(
            lease(&json!({"spec": {"leaseDurationSeconds": 15, "leaseTransitions": 0}})).is_empty()
        );
        let fields: Vec<String> =
            lease(&json!({"spec": {"leaseDurationSeconds": 0, "leaseTransitions": -1}}))
                .into_iter()
                .map(|c| c.field)
                .collect();
        assert_eq!(
            fields,
            ["spec.leaseDurationSeconds", "spec.leaseTransitions"]
        );
    }

    #[test]
    fn taint_rules() {
        let node = json!({"spec": {"taints": [
            {"key": "a", "effect": "NoSchedule"},
            {"key": "a", "effect": "NoSchedule"},
            {"key": "b", "effect": "Sometimes"},
            {"key": "c"}
        ]}});
        let got: Vec<(String, &str)> = taints(&node)
            .into_iter()
            .map(|c| (c.field, c.reason))
            .collect();
        assert_eq!(
            got,
            [
                ("spec.taints[1]".to_string(), "FieldValueDuplicate"),
                ("spec.taints[2].effect".into(), "FieldValueNotSupported"),
                ("spec.taints[3].effect".into(), "FieldValueRequired"),
            ]
        );
    }
}
