//! Field validation kube-apiserver applies to every write that controllers can trip over: label
//! keys and values, annotation keys and object names (subdomain, label, DNS-1035), with
//! upstream's field paths and messages; the rules of one kind are in its `kinds` file.

use serde_json::Value;

use crate::api::status::{Cause, go_quote};

const NAME_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
pub(crate) const VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const PREFIX_MSG: &str = "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

pub(crate) fn is_name_part(s: &str) -> bool {
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
}
