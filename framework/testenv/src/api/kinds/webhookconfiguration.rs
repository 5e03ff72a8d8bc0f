//! ValidatingWebhookConfiguration and MutatingWebhookConfiguration
//! (`admissionregistration.k8s.io/v1`, cluster-scoped): the webhooks `admission::webhooks`
//! calls. Upstream's v1 defaults (wh-config-defaults*.txt: `failurePolicy: Fail`,
//! `matchPolicy: Equivalent`, empty selectors, `timeoutSeconds: 10`, a rule's `scope: *`, a
//! mutating webhook's `reinvocationPolicy: Never`) and its `ValidateValidatingWebhookConfiguration`
//! (wh-config-*.txt: qualified unique names, rules, `sideEffects` and `admissionReviewVersions`
//! required, a timeout of 1 to 30 seconds, exactly one of `url` or `service`, an `https` URL,
//! at most 64 named `matchConditions` whose expressions compile to a bool).
//! `webhooks` is a list merged by `name`, and `generation` is kept.

use k8s_openapi::api::admissionregistration::v1 as openapi;
use k8s_pb::api::admissionregistration::v1 as pb;
use serde_json::{Value, json};

use crate::api::kind::{
    Admission, Column, Kind, Lifecycle, ListStrategy, NameRule, Names, Printer, Protobuf, Rest,
    Shape, Type,
};
use crate::api::printing::{age, row};
use crate::api::status::{Cause, go_quote};
use crate::api::validation::SUBDOMAIN_MSG;

/// ValidatingWebhookConfiguration.
pub const VALIDATING: Kind = configuration(
    Type::of::<openapi::ValidatingWebhookConfiguration>(),
    "validatingwebhookconfiguration",
    Protobuf::of::<pb::ValidatingWebhookConfiguration, pb::ValidatingWebhookConfigurationList>(),
    default_validating,
);

/// MutatingWebhookConfiguration.
pub const MUTATING: Kind = configuration(
    Type::of::<openapi::MutatingWebhookConfiguration>(),
    "mutatingwebhookconfiguration",
    Protobuf::of::<pb::MutatingWebhookConfiguration, pb::MutatingWebhookConfigurationList>(),
    default_mutating,
);

/// Both kinds: only their type, names, messages and defaults differ.
const fn configuration(
    ty: Type,
    singular: &'static str,
    protobuf: Protobuf,
    defaults: fn(&mut Value),
) -> Kind {
    Kind {
        ty,
        names: Names {
            singular,
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
        patch_lists: &[("webhooks", ListStrategy::MergeByKey("name"))],
        admission: Admission {
            defaults: Some(defaults),
            validate: Some(validate),
            ..Admission::NONE
        },
        printer: Printer {
            columns: COLUMNS,
            cells,
        },
        protobuf,
        apply: Shape {
            atomic: &["webhooks.namespaceSelector", "webhooks.objectSelector"],
            ..Shape::NONE
        },
    }
}

const COLUMNS: &[Column] = &[
    Column::text("Name"),
    Column::new("Webhooks", "integer", 0),
    Column::text("Age"),
];

fn cells(obj: &Value) -> Vec<Value> {
    let n = obj
        .get("webhooks")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    row(obj, vec![n.into(), age(obj).into()])
}

fn default_validating(obj: &mut Value) {
    for hook in webhooks_mut(obj) {
        default_webhook(hook);
    }
}

fn default_mutating(obj: &mut Value) {
    for hook in webhooks_mut(obj) {
        default_webhook(hook);
        hook.entry("reinvocationPolicy").or_insert("Never".into());
    }
}

fn webhooks_mut(obj: &mut Value) -> impl Iterator<Item = &mut serde_json::Map<String, Value>> {
    obj.get_mut("webhooks")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

/// Upstream's v1 `SetDefaults_ValidatingWebhook` / `SetDefaults_MutatingWebhook` and
/// `SetDefaults_Rule`.
fn default_webhook(hook: &mut serde_json::Map<String, Value>) {
    let unset = |v: &Value| v.is_null();
    for (key, default) in [
        ("failurePolicy", json!("Fail")),
        ("matchPolicy", json!("Equivalent")),
        ("namespaceSelector", json!({})),
        ("objectSelector", json!({})),
        ("timeoutSeconds", json!(10)),
    ] {
        if hook.get(key).is_none_or(unset) {
            hook.insert(key.into(), default);
        }
    }
    let rules = hook.get_mut("rules").and_then(Value::as_array_mut);
    for rule in rules.into_iter().flatten().filter_map(Value::as_object_mut) {
        if rule.get("scope").is_none_or(unset) {
            rule.insert("scope".into(), "*".into());
        }
    }
}

fn text<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// Upstream's `validateValidatingWebhookConfiguration` (the mutating one is the same but for
/// `reinvocationPolicy`).
fn validate(obj: &Value, _old: Option<&Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    let mut names = std::collections::HashSet::new();
    let hooks = obj.get("webhooks").and_then(Value::as_array);
    for (i, hook) in hooks.into_iter().flatten().enumerate() {
        let at = format!("webhooks[{i}]");
        causes.extend(webhook(hook, &at));
        let name = text(hook, "name").unwrap_or("");
        if !name.is_empty() && !names.insert(name) {
            causes.push(Cause {
                reason: "FieldValueDuplicate",
                message: format!("Duplicate value: {}", go_quote(name)),
                field: format!("{at}.name"),
            });
        }
    }
    causes
}

/// One webhook's causes, in upstream's order.
fn webhook(hook: &Value, at: &str) -> Vec<Cause> {
    let mut causes = qualified_name(text(hook, "name").unwrap_or(""), &format!("{at}.name"));
    let rules = hook.get("rules").and_then(Value::as_array);
    for (j, r) in rules.into_iter().flatten().enumerate() {
        causes.extend(super::registration::rule(r, &format!("{at}.rules[{j}]")));
    }
    let one_of = |key: &str, allowed: &[&str], causes: &mut Vec<Cause>| {
        if let Some(v) = text(hook, key).filter(|v| !allowed.contains(v)) {
            causes.push(Cause::not_supported(
                format!("{at}.{key}"),
                &go_quote(v),
                allowed,
            ));
        }
    };
    one_of("failurePolicy", &["Fail", "Ignore"], &mut causes);
    one_of("matchPolicy", &["Equivalent", "Exact"], &mut causes);
    one_of("reinvocationPolicy", &["IfNeeded", "Never"], &mut causes);
    match text(hook, "sideEffects") {
        None => causes.push(Cause::required(
            format!("{at}.sideEffects"),
            "must specify one of None, NoneOnDryRun",
        )),
        Some(_) => one_of("sideEffects", &["None", "NoneOnDryRun"], &mut causes),
    }
    if let Some(t) = hook.get("timeoutSeconds").and_then(Value::as_i64)
        && !(1..=30).contains(&t)
    {
        causes.push(Cause::invalid(
            format!("{at}.timeoutSeconds"),
            &t.to_string(),
            "the timeout value must be between 1 and 30 seconds",
        ));
    }
    let versions = crate::api::validation::string_list(hook.get("admissionReviewVersions"));
    if versions.is_empty() {
        causes.push(Cause::required(
            format!("{at}.admissionReviewVersions"),
            "must specify one of v1, v1beta1",
        ));
    } else if !versions.iter().any(|v| v == "v1" || v == "v1beta1") {
        causes.push(Cause::invalid(
            format!("{at}.admissionReviewVersions"),
            &format!(
                "[]string{{{}}}",
                versions
                    .iter()
                    .map(|v| go_quote(v))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            "must include at least one of v1, v1beta1",
        ));
    }
    causes.extend(client_config(
        hook.get("clientConfig"),
        &format!("{at}.clientConfig"),
    ));
    let conditions = hook.get("matchConditions").and_then(Value::as_array);
    causes.extend(super::registration::match_conditions(
        conditions.map_or(&[], Vec::as_slice),
        &Default::default(),
        &format!("{at}.matchConditions"),
    ));
    causes
}

/// Upstream's `IsFullyQualifiedName`.
fn qualified_name(name: &str, field: &str) -> Vec<Cause> {
    if name.is_empty() {
        return vec![Cause::required(field, "")];
    }
    let subdomain = name.len() <= 253
        && name
            .split('.')
            .all(|p| crate::api::validation::is_label(p, false));
    if !subdomain {
        return vec![Cause::invalid(field, &go_quote(name), SUBDOMAIN_MSG)];
    }
    if name.split('.').count() < 3 {
        return vec![Cause::invalid(
            field,
            &go_quote(name),
            "should be a domain with at least three segments separated by dots",
        )];
    }
    Vec::new()
}

/// Upstream's `ValidateWebhookClientConfig`: exactly one of `url` and `service`; an `https`
/// URL with a host and no user, query or fragment; a service with a name, a namespace and a
/// port in range.
fn client_config(cc: Option<&Value>, at: &str) -> Vec<Cause> {
    let empty = json!({});
    let cc = cc.unwrap_or(&empty);
    let (url, service) = (text(cc, "url"), cc.get("service").filter(|s| s.is_object()));
    match (url, service) {
        (Some(_), Some(_)) | (None, None) => {
            vec![Cause::required(
                at,
                "exactly one of url or service is required",
            )]
        }
        (Some(url), None) => webhook_url(url, &format!("{at}.url")),
        (None, Some(s)) => {
            let at = format!("{at}.service");
            let mut causes = Vec::new();
            for key in ["name", "namespace"] {
                if text(s, key).is_none_or(str::is_empty) {
                    causes.push(Cause::required(
                        format!("{at}.{key}"),
                        &format!("service {key} is required"),
                    ));
                }
            }
            if let Some(p) = s.get("port").and_then(Value::as_i64)
                && !(1..=65535).contains(&p)
            {
                causes.push(Cause::invalid(
                    format!("{at}.port"),
                    &p.to_string(),
                    "port is not valid: must be between 1 and 65535, inclusive",
                ));
            }
            causes
        }
    }
}

fn webhook_url(url: &str, field: &str) -> Vec<Cause> {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    if scheme != "https" {
        return vec![Cause::invalid(
            field,
            &go_quote(scheme),
            "'https' is the only allowed URL scheme; desired format: https://host[/path]",
        )];
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let mut causes = Vec::new();
    if authority.is_empty() {
        causes.push(Cause::invalid(
            field,
            &go_quote(authority),
            "host must be specified",
        ));
    }
    if authority.contains('@') {
        causes.push(Cause::invalid(
            field,
            &go_quote(url),
            "user information is not permitted in the URL",
        ));
    }
    if url.contains('#') {
        causes.push(Cause::invalid(
            field,
            &go_quote(url),
            "fragments are not permitted in the URL",
        ));
    }
    if url.contains('?') {
        causes.push(Cause::invalid(
            field,
            &go_quote(url),
            "query parameters are not permitted in the URL",
        ));
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(extra: Value) -> Value {
        let mut h = json!({"name": "a.wh.example.com", "clientConfig": {"url": "https://127.0.0.1:1/x"},
            "sideEffects": "None", "admissionReviewVersions": ["v1"]});
        if let (Some(h), Some(e)) = (h.as_object_mut(), extra.as_object()) {
            h.extend(e.clone());
        }
        h
    }

    fn messages(obj: Value) -> Vec<String> {
        validate(&obj, None)
            .into_iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    }

    #[test]
    fn a_configuration_round_trips_through_protobuf() {
        // A rule's fields sit inline in JSON (Go embeds `Rule` in `RuleWithOperations`).
        let mut m = json!({"metadata": {"name": "m"}, "webhooks": [hook(json!({
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
            "clientConfig": {"url": "https://127.0.0.1:1/x", "caBundle": "QUJD"}}))]});
        default_mutating(&mut m);
        let (encode, decode) = MUTATING.protobuf.kind;
        let back = encode(&m).and_then(|raw| decode(&raw)).unwrap();
        assert_eq!(back["webhooks"], m["webhooks"]);
    }

    #[test]
    fn defaults_are_the_servers() {
        // wh-config-defaults-mutating.txt
        let mut m = json!({"webhooks": [hook(json!({"rules": [{"operations": ["CREATE"]}]}))]});
        default_mutating(&mut m);
        let w = &m["webhooks"][0];
        assert_eq!(
            (
                &w["failurePolicy"],
                &w["matchPolicy"],
                &w["timeoutSeconds"],
                &w["reinvocationPolicy"]
            ),
            (
                &json!("Fail"),
                &json!("Equivalent"),
                &json!(10),
                &json!("Never")
            )
        );
        assert_eq!(
            (&w["namespaceSelector"], &w["objectSelector"]),
            (&json!({}), &json!({}))
        );
        assert_eq!(w["rules"][0]["scope"], "*");
        let mut v = json!({"webhooks": [hook(json!({}))]});
        default_validating(&mut v);
        assert!(v["webhooks"][0].get("reinvocationPolicy").is_none());
    }

    #[test]
    fn validation_reads_as_the_captures_show() {
        // wh-config-bad-names.txt
        let bad = messages(
            json!({"webhooks": [hook(json!({"name": "noDots"})), hook(json!({"name": "noDots"}))]}),
        );
        assert_eq!(bad.len(), 3);
        assert!(
            bad[0].starts_with("webhooks[0].name: Invalid value: \"noDots\": a lowercase RFC 1123")
        );
        assert_eq!(bad[2], "webhooks[1].name: Duplicate value: \"noDots\"");
        let two = messages(json!({"webhooks": [hook(json!({"name": "a.b"}))]}));
        assert_eq!(
            two,
            [
                "webhooks[0].name: Invalid value: \"a.b\": should be a domain with at least three segments separated by dots"
            ]
        );
        // wh-config-http-url.txt
        let http = messages(
            json!({"webhooks": [hook(json!({"clientConfig": {"url": "http://127.0.0.1:1/x"}}))]}),
        );
        assert_eq!(
            http,
            [
                "webhooks[0].clientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]"
            ]
        );
        // wh-config-url-and-service.txt
        let both = json!({"url": "https://h/x", "service": {"namespace": "default", "name": "s"}});
        let both = messages(json!({"webhooks": [hook(json!({"clientConfig": both}))]}));
        assert_eq!(
            both,
            ["webhooks[0].clientConfig: Required value: exactly one of url or service is required"]
        );
        // wh-config-timeout-31.txt
        let slow = messages(json!({"webhooks": [hook(json!({"timeoutSeconds": 31}))]}));
        assert_eq!(
            slow,
            [
                "webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds"
            ]
        );
        // wh-config-missing-sideeffects.txt, wh-config-missing-reviewversions.txt
        let mut h = hook(json!({}));
        h.as_object_mut()
            .map(|m| (m.remove("sideEffects"), m.remove("admissionReviewVersions")));
        assert_eq!(
            messages(json!({"webhooks": [h]})),
            [
                "webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun",
                "webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1"
            ]
        );
    }
}
