//! Validation of a CustomResourceDefinition, worded and ordered as apiextensions-apiserver's:
//! name, group, scope, versions (DNS-1035 names, a structural schema each, printer columns,
//! selectable fields, valid pruned defaults; unique; exactly one storage version), names, and on
//! update the immutable
//! fields (group and plural; scope and kind once established) and `storedVersions`.

use std::collections::BTreeSet;

use serde_json::Value;

use super::prepare::storage_version;
use crate::api::status::{Cause, go_quote};
use crate::api::structural::{Schema, go_value};
use crate::api::validation::{DNS1035_MSG, SUBDOMAIN_MSG, is_label};

fn text<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

fn dns1035(s: &str) -> Option<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !is_label(s, true) || s.len() > 63 && !is_label(&s[..63], true) {
        errs.push(DNS1035_MSG.to_string());
    }
    (!errs.is_empty()).then(|| errs.join(","))
}

fn names_causes(names: &Value, out: &mut Vec<Cause>) {
    let p = "spec.names";
    for (k, mixed) in [
        ("plural", false),
        ("singular", false),
        ("kind", true),
        ("listKind", true),
    ] {
        let v = text(names, &format!("/{k}"));
        if v.is_empty() {
            out.push(Cause::required(format!("{p}.{k}"), ""));
            continue;
        }
        let checked = if mixed {
            v.to_lowercase()
        } else {
            v.to_string()
        };
        if let Some(e) = dns1035(&checked) {
            let detail = if mixed {
                format!("may have mixed case, but should otherwise match: {e}")
            } else {
                e
            };
            out.push(Cause::invalid(format!("{p}.{k}"), &go_quote(v), &detail));
        }
    }
    let kind = text(names, "/kind");
    if !kind.is_empty() && kind == text(names, "/listKind") {
        out.push(Cause::invalid(
            format!("{p}.listKind"),
            &go_quote(kind),
            "kind and listKind may not be the same",
        ));
    }
    for list in ["shortNames", "categories"] {
        let items = names
            .get(list)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for (i, s) in items.iter().enumerate() {
            let s = s.as_str().unwrap_or("");
            if let Some(e) = dns1035(s) {
                out.push(Cause::invalid(format!("{p}.{list}[{i}]"), &go_quote(s), &e));
            }
        }
    }
}

const COLUMN_TYPES: &str = "boolean,date,integer,number,string";
const COLUMN_FORMATS: &str = "byte,date,date-time,double,float,int32,int64,password";

fn version_causes(v: &Value, i: usize, out: &mut Vec<Cause>) {
    let p = format!("spec.versions[{i}]");
    let name = text(v, "/name");
    if let Some(e) = dns1035(name) {
        out.push(Cause::invalid(format!("{p}.name"), &go_quote(name), &e));
    }
    match v.pointer("/schema/openAPIV3Schema") {
        None => out.push(Cause::required(
            format!("{p}.schema.openAPIV3Schema"),
            "schemas are required",
        )),
        Some(s) => structural(s, &format!("{p}.schema.openAPIV3Schema"), true, out),
    }
    let columns = v
        .get("additionalPrinterColumns")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for (j, c) in columns.iter().enumerate() {
        let cp = format!("{p}.additionalPrinterColumns[{j}]");
        if text(c, "/name").is_empty() {
            out.push(Cause::required(format!("{cp}.name"), ""));
        }
        let one_of = |list: &str| format!("must be one of {list}");
        let ty = text(c, "/type");
        if ty.is_empty() {
            out.push(Cause::required(format!("{cp}.type"), &one_of(COLUMN_TYPES)));
        } else if !COLUMN_TYPES.split(',').any(|t| t == ty) {
            out.push(Cause::invalid(
                format!("{cp}.type"),
                &go_quote(ty),
                &one_of(COLUMN_TYPES),
            ));
        }
        let format = text(c, "/format");
        if !format.is_empty() && !COLUMN_FORMATS.split(',').any(|f| f == format) {
            out.push(Cause::invalid(
                format!("{cp}.format"),
                &go_quote(format),
                &one_of(COLUMN_FORMATS),
            ));
        }
        if text(c, "/jsonPath").is_empty() {
            out.push(Cause::required(format!("{cp}.jsonPath"), ""));
        }
    }
    let fields = v
        .get("selectableFields")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if fields.len() > 8 {
        out.push(Cause {
            reason: "FieldValueTooMany",
            message: format!("Too many: {}: must have at most 8 items", fields.len()),
            field: format!("{p}.selectableFields"),
        });
    }
    for (j, f) in fields.iter().enumerate() {
        let fp = format!("{p}.selectableFields[{j}].jsonPath");
        let path = text(f, "/jsonPath");
        if path.is_empty() {
            out.push(Cause::required(fp, ""));
            continue;
        }
        let ty = schema_at(v.pointer("/schema/openAPIV3Schema"), path);
        match ty {
            None => out.push(Cause::invalid(&fp, &go_quote(path), "is an invalid path")),
            Some(t) if !matches!(t.as_str(), "string" | "integer" | "boolean") => {
                out.push(Cause::invalid(
                    &fp,
                    &go_quote(path),
                    "selectable field must have type string, integer or boolean",
                ))
            }
            Some(_) => {}
        }
    }
}

/// The type of the schema node a simple `.a.b` path names.
fn schema_at(schema: Option<&Value>, path: &str) -> Option<String> {
    let mut cur = schema?;
    for seg in path.trim_start_matches('.').split('.') {
        cur = cur.get("properties")?.get(seg)?;
    }
    cur.get("type").and_then(Value::as_str).map(String::from)
}

/// Structural-schema rules: every node typed (unless int-or-string or preserving unknown
/// fields), object root, metadata only with name/generateName, items for arrays, properties and
/// additionalProperties exclusive, map keys for `map` lists, valid patterns.
fn structural(s: &Value, p: &str, root: bool, out: &mut Vec<Cause>) {
    if !root && let Some(default) = s.get("default") {
        default_causes(s, default, p, out);
    }
    let ty = text(s, "/type");
    let preserve = s.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    let int_or_string = s.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
    if root {
        if ty.is_empty() {
            out.push(Cause::required(
                format!("{p}.type"),
                "must not be empty at the root",
            ));
        } else if ty != "object" {
            out.push(Cause::invalid(
                format!("{p}.type"),
                &go_quote(ty),
                "must be object at the root",
            ));
        }
    } else if ty.is_empty() && !preserve && !int_or_string {
        out.push(Cause::required(
            format!("{p}.type"),
            "must not be empty for specified object fields",
        ));
    }
    if s.get("properties").is_some() && s.get("additionalProperties").is_some_and(Value::is_object)
    {
        out.push(Cause::forbidden(
            format!("{p}.additionalProperties"),
            "additionalProperties and properties are mutual exclusive",
        ));
    }
    if s.get("uniqueItems") == Some(&Value::Bool(true)) {
        out.push(Cause::forbidden(
            format!("{p}.uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
    if ty == "array" && !s.get("items").is_some_and(Value::is_object) {
        out.push(Cause::required(format!("{p}.items"), "must be specified"));
    }
    if let Some(pat) = s.get("pattern").and_then(Value::as_str)
        && let Err(e) = regex::Regex::new(pat)
    {
        out.push(Cause::invalid(
            format!("{p}.pattern"),
            &go_quote(pat),
            &format!("must be a valid regular expression, but isn't: {e}"),
        ));
    }
    let list_type = text(s, "/x-kubernetes-list-type");
    let keys = s
        .get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array);
    match list_type {
        "" | "atomic" | "set" => {}
        "map" if keys.is_none_or(Vec::is_empty) => out.push(Cause::required(
            format!("{p}.x-kubernetes-list-map-keys"),
            "must not be empty if x-kubernetes-list-type is map",
        )),
        "map" => map_list_keys(s, p, out),
        other => out.push(Cause::not_supported(
            format!("{p}.x-kubernetes-list-type"),
            &go_quote(other),
            &["atomic", "set", "map"],
        )),
    }
    if keys.is_some() && list_type != "map" {
        out.push(Cause::forbidden(
            format!("{p}.x-kubernetes-list-map-keys"),
            "must not be set if x-kubernetes-list-type is not map",
        ));
    }
    if let Some(props) = s.get("properties").and_then(Value::as_object) {
        for (k, child) in props {
            let cp = format!("{p}.properties[{k}]");
            if root && k == "metadata" {
                let extra: BTreeSet<&String> = child
                    .get("properties")
                    .and_then(Value::as_object)
                    .map(|m| {
                        m.keys()
                            .filter(|k| *k != "name" && *k != "generateName")
                            .collect()
                    })
                    .unwrap_or_default();
                if !extra.is_empty() {
                    out.push(Cause::forbidden(
                        &cp,
                        "must not specify anything other than name and generateName, but metadata is implicitly specified",
                    ));
                }
            }
            structural(child, &cp, false, out);
        }
    }
    if let Some(items) = s.get("items").filter(|i| i.is_object()) {
        structural(items, &format!("{p}.items"), false, out);
    }
    if let Some(add) = s.get("additionalProperties").filter(|i| i.is_object()) {
        structural(add, &format!("{p}.additionalProperties"), false, out);
    }
}

/// A `default` must be pruned already (no fields the schema drops) and valid against its own
/// node, as apiextensions checks it when the CRD is written.
fn default_causes(s: &Value, default: &Value, p: &str, out: &mut Vec<Cause>) {
    let node = Schema::parse(s);
    let dp = format!("{p}.default");
    let mut pruned = default.clone();
    node.prune_value(&mut pruned);
    if pruned != *default {
        out.push(Cause::invalid(
            &dp,
            &go_value(default),
            "must not have unknown fields",
        ));
    }
    for c in node.validate_value(default) {
        let field = match c.field.as_str() {
            "" => dp.clone(),
            f if f.starts_with('[') => format!("{dp}{f}"),
            f => format!("{dp}.{f}"),
        };
        out.push(Cause { field, ..c });
    }
}

/// A `map` list's items are objects whose key properties are scalars, each required or
/// defaulted (a key must never be missing).
fn map_list_keys(s: &Value, p: &str, out: &mut Vec<Cause>) {
    let keys: Vec<&str> = s["x-kubernetes-list-map-keys"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let items = &s["items"];
    let item_type = text(items, "/type");
    if item_type != "object" {
        out.push(Cause::invalid(
            format!("{p}.items.type"),
            &go_quote(item_type),
            "must be object if parent array's x-kubernetes-list-type is map",
        ));
        return;
    }
    let required: Vec<&str> = items["required"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for k in &keys {
        let Some(prop) = items.pointer(&format!("/properties/{k}")) else {
            let list: Vec<String> = keys.iter().map(|k| go_quote(k)).collect();
            out.push(Cause::invalid(
                format!("{p}.x-kubernetes-list-map-keys"),
                &format!("[]string{{{}}}", list.join(", ")),
                "entries must all be names of item properties",
            ));
            continue;
        };
        let kp = format!("{p}.items.properties[{k}]");
        if matches!(text(prop, "/type"), "array" | "object") {
            out.push(Cause::invalid(
                format!("{kp}.type"),
                &go_quote(text(prop, "/type")),
                "must be a scalar type if parent array's x-kubernetes-list-type is map",
            ));
        }
        if !required.contains(k) && prop.get("default").is_none() {
            out.push(Cause::required(
                kp,
                "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
            ));
        }
    }
}

/// The causes of a CRD create (`old` = None) or update.
pub(super) fn validate(crd: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut out = Vec::new();
    let group = text(crd, "/spec/group");
    let plural = text(crd, "/spec/names/plural");
    let name = text(crd, "/metadata/name");
    if name != format!("{plural}.{group}") {
        out.push(Cause::invalid(
            "metadata.name",
            &go_quote(name),
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }
    if group.is_empty() {
        out.push(Cause::required("spec.group", ""));
    } else if !group.split('.').all(|p| is_label(p, false)) {
        out.push(Cause::invalid(
            "spec.group",
            &go_quote(group),
            SUBDOMAIN_MSG,
        ));
    } else if !group.contains('.') {
        out.push(Cause::invalid(
            "spec.group",
            &go_quote(group),
            "should be a domain with at least one dot",
        ));
    }
    match text(crd, "/spec/scope") {
        "" => out.push(Cause::required("spec.scope", "")),
        "Cluster" | "Namespaced" => {}
        other => out.push(Cause::not_supported(
            "spec.scope",
            &go_quote(other),
            &["Cluster", "Namespaced"],
        )),
    }
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if versions.is_empty() {
        out.push(Cause::required(
            "spec.versions",
            "must have exactly one version marked as storage version",
        ));
    }
    let mut seen = BTreeSet::new();
    let mut unique = true;
    let before = out.len();
    for (i, v) in versions.iter().enumerate() {
        unique &= seen.insert(text(v, "/name").to_string());
        version_causes(v, i, &mut out);
    }
    // Rules are compiled only against schemas that are otherwise valid (structural).
    if out.len() == before {
        out.extend(super::rules::causes(crd));
    }
    let summary = "[]apiextensions.CustomResourceDefinitionVersion{...}";
    if !unique {
        out.push(Cause::invalid(
            "spec.versions",
            summary,
            "must contain unique version names",
        ));
    }
    if !versions.is_empty() && storage_version(crd).is_none() {
        out.push(Cause::invalid(
            "spec.versions",
            summary,
            "must have exactly one version marked as storage version",
        ));
    }
    names_causes(&crd["spec"]["names"], &mut out);
    conversion_causes(&crd["spec"]["conversion"], &mut out);
    if let Some(old) = old {
        let established = old["status"]["conditions"].as_array().is_some_and(|l| {
            l.iter()
                .any(|c| c["type"] == "Established" && c["status"] == "True")
        });
        let mut immutable = vec![
            ("spec.group", "/spec/group"),
            ("spec.names.plural", "/spec/names/plural"),
        ];
        if established {
            immutable.insert(0, ("spec.scope", "/spec/scope"));
            immutable.insert(1, ("spec.names.kind", "/spec/names/kind"));
        }
        for (field, ptr) in immutable {
            if text(old, ptr) != text(crd, ptr) {
                out.push(Cause::invalid(
                    field,
                    &go_quote(text(crd, ptr)),
                    "field is immutable",
                ));
            }
        }
        let stored: Vec<&str> = crd
            .pointer("/status/storedVersions")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        for (i, s) in stored.iter().enumerate() {
            if !versions.iter().any(|v| v["name"] == *s) {
                out.push(Cause::invalid(
                    format!("status.storedVersions[{i}]"),
                    &go_quote(s),
                    "must appear in spec.versions",
                ));
            }
        }
    }
    out
}

/// Upstream's `validateCustomResourceConversion`: a webhook's client config and review versions
/// only with `strategy: Webhook`, and both then (conv-crd-none-with-webhook.txt,
/// conv-crd-webhook-missing-config.txt).
fn conversion_causes(conversion: &Value, out: &mut Vec<Cause>) {
    let config = conversion
        .pointer("/webhook/clientConfig")
        .filter(|c| !c.is_null());
    let versions = conversion
        .pointer("/webhook/conversionReviewVersions")
        .and_then(Value::as_array)
        .is_some_and(|v| !v.is_empty());
    let (config_field, versions_field) = (
        "spec.conversion.webhookClientConfig",
        "spec.conversion.conversionReviewVersions",
    );
    if text(conversion, "/strategy") == "Webhook" {
        if config.is_none() {
            out.push(Cause::required(
                config_field,
                "required when strategy is set to Webhook",
            ));
        }
        if !versions {
            out.push(Cause::required(versions_field, ""));
        }
        return;
    }
    let not_webhook = "should not be set when strategy is not set to Webhook";
    if config.is_some() {
        out.push(Cause::forbidden(config_field, not_webhook));
    }
    if versions {
        out.push(Cause::forbidden(versions_field, not_webhook));
    }
}
