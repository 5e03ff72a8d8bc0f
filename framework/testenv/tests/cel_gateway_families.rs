//! Every rule family of Gateway API's standard-channel CRDs (tests/fixtures/gateway-api,
//! unmodified) proven on real objects through a real `kube::Client`: one object the rule admits
//! and one it refuses with its own message on its own field, written at v1 and again at v1beta1
//! (server-side applied) where the kind has it. A family is one message (or, without one, one
//! rule text) repeated wherever the schemas carry it; the families are read from the YAML, and a
//! family without a case, or a case for no family, fails the test. One family can never fail on
//! a cluster (a schema error stops the rules first): its case asks for the cluster's refusal.
//! Each filter case is also tried at every other place its rule sits (the rule's filters or its
//! backend's, HTTPRoute or GRPCRoute), and the test fails unless every one of the 245 rules (each
//! kind, version and field it sits at, read from the YAML) is reached by some case.

use std::collections::{BTreeMap, BTreeSet};

use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube_testenv::TestEnv;
use serde_json::{Value, json};

mod support;

const CRDS: &[&str] = &[
    include_str!("fixtures/gateway-api/gateway.networking.k8s.io_gatewayclasses.yaml"),
    include_str!("fixtures/gateway-api/gateway.networking.k8s.io_gateways.yaml"),
    include_str!("fixtures/gateway-api/gateway.networking.k8s.io_grpcroutes.yaml"),
    include_str!("fixtures/gateway-api/gateway.networking.k8s.io_httproutes.yaml"),
    include_str!("fixtures/gateway-api/gateway.networking.k8s.io_referencegrants.yaml"),
];

/// How a case's two objects are written.
enum Write {
    /// Created with `ok` and `bad` as their spec.
    Create,
    /// Created with this spec, then `ok` and `bad` merge-patched into the spec.
    Update(Value),
    /// A valid Gateway, then `ok` and `bad` written as its status.
    Status,
}

/// One family: the kind it is tried on, the field its cause names, the rule's message, an
/// object it admits and one it refuses (with `blocked`, refused before the rules run).
struct Case {
    kind: &'static str,
    field: String,
    message: &'static str,
    write: Write,
    ok: Value,
    bad: Value,
    blocked: bool,
}

/// The cause a cluster gives when a type, required, enum, length or count error keeps the rules
/// from running (upstream's `hasBlockingErr`).
const NOT_CHECKED: &str = "<nil>: Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation";

fn case(
    kind: &'static str,
    field: &'static str,
    message: &'static str,
    ok: Value,
    bad: Value,
) -> Case {
    Case {
        kind,
        field: field.to_owned(),
        message,
        write: Write::Create,
        ok,
        bad,
        blocked: false,
    }
}

/// Each rule's message, or its text when it has none, wherever it appears.
fn families(v: &Value, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            for rule in m
                .get("x-kubernetes-validations")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let text = rule.get("message").or_else(|| rule.get("rule"));
                out.insert(text.and_then(Value::as_str).unwrap().to_owned());
            }
            m.values().for_each(|v| families(v, out));
        }
        Value::Array(a) => a.iter().for_each(|v| families(v, out)),
        _ => {}
    }
}

fn gateway(listeners: Value) -> Value {
    json!({"gatewayClassName": "c", "listeners": listeners})
}

fn http_listener() -> Value {
    json!({"name": "http", "protocol": "HTTP", "port": 80})
}

/// A Gateway spec with one HTTP listener and `extra` merged in.
fn gateway_with(extra: Value) -> Value {
    let mut spec = gateway(json!([http_listener()]));
    spec.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    spec
}

fn route(rules: Value) -> Value {
    json!({"parentRefs": [{"name": "gw"}], "rules": rules})
}

fn route_rule(rule: Value) -> Value {
    route(json!([rule]))
}

fn filters(filters: Value) -> Value {
    route_rule(json!({"filters": filters}))
}

fn backend_filters(filters: Value) -> Value {
    route_rule(json!({"backendRefs": [{"name": "s", "port": 80, "filters": filters}]}))
}

fn path(kind: &str, value: &str) -> Value {
    route_rule(json!({"matches": [{"path": {"type": kind, "value": value}}]}))
}

fn header_mod() -> Value {
    json!({"set": [{"name": "x", "value": "y"}]})
}

fn mirror() -> Value {
    json!({"backendRef": {"name": "m", "port": 80}})
}

fn ext_ref() -> Value {
    json!({"group": "example.com", "kind": "Ext", "name": "e"})
}

fn cors(field: &str, values: Value) -> Value {
    filters(json!([{"type": "CORS", "cors": {field: values}}]))
}

fn rewrite(filter: &str, path: Value) -> Value {
    let ty = if filter == "requestRedirect" {
        "RequestRedirect"
    } else {
        "URLRewrite"
    };
    filters(json!([{"type": ty, filter: {"path": path}}]))
}

/// A rule with `n` matches for each of `rules` route rules.
fn many_matches(rules: usize, n: usize) -> Value {
    let m = json!({"path": {"type": "PathPrefix", "value": "/"}});
    route(Value::Array(vec![json!({"matches": vec![m; n]}); rules]))
}

fn grpc_method(method: Value) -> Value {
    route_rule(json!({"matches": [{"method": method}]}))
}

/// A route rule whose `match_type` match sits beside a `filter` (at the rule or, with
/// `in_backend`, in its backend) replacing the prefix.
fn prefix_rewrite(filter: &str, in_backend: bool, match_type: &str) -> Value {
    let ty = if filter == "requestRedirect" {
        "RequestRedirect"
    } else {
        "URLRewrite"
    };
    let f = json!([{"type": ty, filter: {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/new"}}}]);
    let matches = json!([{"path": {"type": match_type, "value": "/old"}}]);
    if in_backend {
        route_rule(
            json!({"matches": matches, "backendRefs": [{"name": "s", "port": 80, "filters": f}]}),
        )
    } else {
        route_rule(json!({"matches": matches, "filters": f}))
    }
}

fn long_prefix_key() -> String {
    format!("{}/k", "a".repeat(253))
}

fn parent_refs(refs: Value) -> Value {
    json!({"parentRefs": refs, "rules": [{}]})
}

#[rustfmt::skip]
fn cases() -> Vec<Case> {
    let hostname_chars = "Hostname value must be empty or contain only valid characters (matching ^(\\*\\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$)";
    let status_hostname = "Hostname value must only contain valid characters (matching ^(\\*\\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$)";
    let https = |tls: Value| gateway(json!([{"name": "s", "protocol": "HTTPS", "port": 443, "tls": tls}]));
    let cert = json!([{"name": "cert"}]);
    let addr = |ty: &str, v: &str| json!({"type": ty, "value": v});
    let lst = |name: &str, protocol: &str, port: u16| json!({"name": name, "protocol": protocol, "port": port});
    let per_port = |a: u16, b: u16| gateway_with(json!({"tls": {"frontend": {"default": {}, "perPort": [{"port": a, "tls": {}}, {"port": b, "tls": {}}]}}}));
    let gw = |f: &'static str, m: &'static str, ok: Value, bad: Value| case("Gateway", f, m, ok, bad);
    let http = |f: &'static str, m: &'static str, ok: Value, bad: Value| case("HTTPRoute", f, m, ok, bad);
    let grpc = |f: &'static str, m: &'static str, ok: Value, bad: Value| case("GRPCRoute", f, m, ok, bad);
    let path_case = |m: &'static str, ok: &str, bad: &str| http("spec.rules[0].matches[0].path", m, path("PathPrefix", ok), path("Exact", bad));
    let f0 = "spec.rules[0].filters[0]";
    let bf0 = "spec.rules[0].backendRefs[0].filters[0]";
    vec![
        Case { kind: "GatewayClass", field: "spec.controllerName".into(), message: "field is immutable",
            write: Write::Update(json!({"controllerName": "example.com/a"})),
            ok: json!({"description": "same controller"}), bad: json!({"controllerName": "example.com/b"}), blocked: false },
        gw("spec.addresses", "IPAddress values must be unique",
            gateway_with(json!({"addresses": [addr("IPAddress", "10.0.0.1"), addr("IPAddress", "10.0.0.2")]})),
            gateway_with(json!({"addresses": [addr("IPAddress", "10.0.0.1"), addr("IPAddress", "10.0.0.1")]}))),
        gw("spec.addresses", "Hostname values must be unique",
            gateway_with(json!({"addresses": [addr("Hostname", "a.example.com"), addr("Hostname", "b.example.com")]})),
            gateway_with(json!({"addresses": [addr("Hostname", "a.example.com"), addr("Hostname", "a.example.com")]}))),
        gw("spec.addresses[0]", hostname_chars,
            gateway_with(json!({"addresses": [addr("Hostname", "*.example.com")]})),
            gateway_with(json!({"addresses": [addr("Hostname", "Not_A.Host")]}))),
        gw("spec.addresses[0]", hostname_chars,
            gateway_with(json!({"addresses": [{"type": "Hostname"}]})),
            gateway_with(json!({"addresses": [addr("Hostname", "a..example.com")]}))),
        gw("spec.infrastructure.annotations", "Annotation keys must be in the form of an optional DNS subdomain prefix followed by a required name segment of up to 63 characters.",
            gateway_with(json!({"infrastructure": {"annotations": {"example.com/a-b.c_d": "v"}}})),
            gateway_with(json!({"infrastructure": {"annotations": {"-bad": "v"}}}))),
        gw("spec.infrastructure.annotations", "If specified, the annotation key's prefix must be a DNS subdomain not longer than 253 characters in total.",
            gateway_with(json!({"infrastructure": {"annotations": {format!("{}/k", "a".repeat(252)): "v"}}})),
            gateway_with(json!({"infrastructure": {"annotations": {long_prefix_key(): "v"}}}))),
        gw("spec.infrastructure.labels", "Label keys must be in the form of an optional DNS subdomain prefix followed by a required name segment of up to 63 characters.",
            gateway_with(json!({"infrastructure": {"labels": {"app": "v"}}})),
            gateway_with(json!({"infrastructure": {"labels": {"example.com/": "v"}}}))),
        gw("spec.infrastructure.labels", "If specified, the label key's prefix must be a DNS subdomain not longer than 253 characters in total.",
            gateway_with(json!({"infrastructure": {"labels": {"example.com/app": "v"}}})),
            gateway_with(json!({"infrastructure": {"labels": {long_prefix_key(): "v"}}}))),
        gw("spec.listeners", "tls must not be specified for protocols ['HTTP', 'TCP', 'UDP']",
            https(json!({"certificateRefs": cert})),
            gateway(json!([{"name": "h", "protocol": "HTTP", "port": 80, "tls": {"certificateRefs": cert}}]))),
        gw("spec.listeners", "tls mode must be Terminate for protocol HTTPS",
            https(json!({"mode": "Terminate", "certificateRefs": cert})),
            https(json!({"mode": "Passthrough"}))),
        gw("spec.listeners", "tls mode must be set for protocol TLS",
            gateway(json!([{"name": "t", "protocol": "TLS", "port": 443, "tls": {"mode": "Passthrough"}}])),
            gateway(json!([lst("t", "TLS", 443)]))),
        gw("spec.listeners", "hostname must not be specified for protocols ['TCP', 'UDP']",
            gateway(json!([{"name": "h", "protocol": "HTTP", "port": 80, "hostname": "a.example.com"}])),
            gateway(json!([{"name": "u", "protocol": "UDP", "port": 53, "hostname": "a.example.com"}]))),
        gw("spec.listeners", "Listener name must be unique within the Gateway",
            gateway(json!([lst("a", "HTTP", 80), lst("b", "HTTP", 81)])),
            gateway(json!([lst("a", "HTTP", 80), lst("a", "HTTP", 81)]))),
        gw("spec.listeners", "Combination of port, protocol and hostname must be unique for each listener",
            gateway(json!([lst("a", "HTTP", 80), {"name": "b", "protocol": "HTTP", "port": 80, "hostname": "b.example.com"}])),
            gateway(json!([lst("a", "HTTP", 80), lst("b", "HTTP", 80)]))),
        gw("spec.listeners[0].tls", "certificateRefs or options must be specified when mode is Terminate",
            https(json!({"options": {"example.com/o": "v"}, "certificateRefs": []})),
            https(json!({"certificateRefs": [], "options": {}}))),
        gw("spec.tls.frontend.perPort", "Port for TLS configuration must be unique within the Gateway",
            per_port(443, 8443), per_port(443, 443)),
        Case { kind: "Gateway", field: "status.addresses[0]".into(), message: status_hostname, write: Write::Status,
            ok: json!({"addresses": [addr("Hostname", "lb.example.com")]}),
            bad: json!({"addresses": [addr("Hostname", "LB!")]}), blocked: false },
        http("spec.parentRefs", "sectionName must be specified when parentRefs includes 2 or more references to the same parent",
            parent_refs(json!([{"name": "gw", "sectionName": "a"}, {"name": "gw", "sectionName": "b"}])),
            parent_refs(json!([{"name": "gw", "sectionName": "a"}, {"name": "gw"}]))),
        // `namespace` is a CEL reserved word: the rule reads it as `__namespace__`, and an empty
        // namespace is the same parent as none.
        grpc("spec.parentRefs", "sectionName must be specified when parentRefs includes 2 or more references to the same parent",
            parent_refs(json!([{"name": "gw", "namespace": "a", "sectionName": "s"}, {"name": "gw", "namespace": "b"}])),
            parent_refs(json!([{"name": "gw", "namespace": "a", "sectionName": "s"}, {"name": "gw", "namespace": "a"}]))),
        http("spec.parentRefs", "sectionName must be unique when parentRefs includes 2 or more references to the same parent",
            parent_refs(json!([{"name": "gw", "namespace": "a", "sectionName": "s"}, {"name": "gw", "sectionName": "s"}])),
            parent_refs(json!([{"name": "gw", "namespace": "", "sectionName": "s"}, {"name": "gw", "sectionName": "s"}]))),
        grpc("spec.parentRefs", "sectionName must be unique when parentRefs includes 2 or more references to the same parent",
            parent_refs(json!([{"name": "gw", "sectionName": "a"}, {"name": "other", "sectionName": "a"}])),
            parent_refs(json!([{"name": "gw", "sectionName": "a"}, {"name": "gw", "sectionName": "a"}]))),
        http("spec.rules", "While 16 rules and 64 matches per rule are allowed, the total number of matches across all rules in a route must be less than 128",
            many_matches(2, 64), many_matches(3, 43)),
        // GRPCRoute's own text of the rule: its matches have no default, so it asks `has()`.
        grpc("spec.rules", "While 16 rules and 64 matches per rule are allowed, the total number of matches across all rules in a route must be less than 128",
            route(json!([{"matches": vec![json!({"method": {"service": "a.B"}}); 64]}, {}, {"matches": vec![json!({"method": {"service": "a.B"}}); 64]}])),
            route(json!([{"matches": vec![json!({"method": {"service": "a.B"}}); 64]}, {"matches": [{}]}, {"matches": vec![json!({"method": {"service": "a.B"}}); 64]}]))),
        grpc("spec.rules[0].backendRefs[0]", "Must have port for Service reference",
            route_rule(json!({"backendRefs": [{"name": "s", "port": 9000}, {"name": "x", "kind": "Ext", "group": "example.com"}]})),
            route_rule(json!({"backendRefs": [{"name": "s"}]}))),
        http("spec.rules[0].backendRefs[0]", "Must have port for Service reference",
            route_rule(json!({"backendRefs": [{"name": "s", "port": 80}]})),
            route_rule(json!({"backendRefs": [{"name": "s", "kind": "Service"}]}))),
        http("spec.rules[0].filters[0].requestMirror.backendRef", "Must have port for Service reference",
            filters(json!([{"type": "RequestMirror", "requestMirror": mirror()}])),
            filters(json!([{"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "m"}}}]))),
        http("spec.rules[0].filters", "RequestHeaderModifier filter cannot be repeated",
            filters(json!([{"type": "RequestHeaderModifier", "requestHeaderModifier": header_mod()}])),
            filters(json!([{"type": "RequestHeaderModifier", "requestHeaderModifier": header_mod()}, {"type": "RequestHeaderModifier", "requestHeaderModifier": header_mod()}]))),
        grpc("spec.rules[0].backendRefs[0].filters", "ResponseHeaderModifier filter cannot be repeated",
            backend_filters(json!([{"type": "ResponseHeaderModifier", "responseHeaderModifier": header_mod()}])),
            backend_filters(json!([{"type": "ResponseHeaderModifier", "responseHeaderModifier": header_mod()}, {"type": "ResponseHeaderModifier", "responseHeaderModifier": header_mod()}]))),
        http(f0, "filter.requestHeaderModifier must be nil if the filter.type is not RequestHeaderModifier",
            filters(json!([{"type": "RequestHeaderModifier", "requestHeaderModifier": header_mod()}])),
            filters(json!([{"type": "ResponseHeaderModifier", "responseHeaderModifier": header_mod(), "requestHeaderModifier": header_mod()}]))),
        grpc(f0, "filter.requestHeaderModifier must be specified for RequestHeaderModifier filter.type",
            filters(json!([{"type": "RequestHeaderModifier", "requestHeaderModifier": header_mod()}])),
            filters(json!([{"type": "RequestHeaderModifier"}]))),
        http(bf0, "filter.responseHeaderModifier must be nil if the filter.type is not ResponseHeaderModifier",
            backend_filters(json!([{"type": "ResponseHeaderModifier", "responseHeaderModifier": header_mod()}])),
            backend_filters(json!([{"type": "RequestHeaderModifier", "requestHeaderModifier": header_mod(), "responseHeaderModifier": header_mod()}]))),
        http(f0, "filter.responseHeaderModifier must be specified for ResponseHeaderModifier filter.type",
            filters(json!([{"type": "ResponseHeaderModifier", "responseHeaderModifier": header_mod()}])),
            filters(json!([{"type": "ResponseHeaderModifier"}]))),
        grpc(f0, "filter.requestMirror must be nil if the filter.type is not RequestMirror",
            filters(json!([{"type": "RequestMirror", "requestMirror": mirror()}])),
            filters(json!([{"type": "RequestHeaderModifier", "requestHeaderModifier": header_mod(), "requestMirror": mirror()}]))),
        http(f0, "filter.requestMirror must be specified for RequestMirror filter.type",
            filters(json!([{"type": "RequestMirror", "requestMirror": mirror()}])),
            filters(json!([{"type": "RequestMirror"}]))),
        http(f0, "filter.extensionRef must be nil if the filter.type is not ExtensionRef",
            filters(json!([{"type": "ExtensionRef", "extensionRef": ext_ref()}])),
            filters(json!([{"type": "RequestMirror", "requestMirror": mirror(), "extensionRef": ext_ref()}]))),
        grpc(bf0, "filter.extensionRef must be specified for ExtensionRef filter.type",
            backend_filters(json!([{"type": "ExtensionRef", "extensionRef": ext_ref()}])),
            backend_filters(json!([{"type": "ExtensionRef"}]))),
        http("spec.rules[0].filters[0].requestMirror", "Only one of percent or fraction may be specified in HTTPRequestMirrorFilter",
            filters(json!([{"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "m", "port": 80}, "percent": 50}}])),
            filters(json!([{"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "m", "port": 80}, "percent": 50, "fraction": {"numerator": 1}}}]))),
        grpc("spec.rules[0].filters[0].requestMirror.fraction", "numerator must be less than or equal to denominator",
            filters(json!([{"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "m", "port": 80}, "fraction": {"numerator": 2, "denominator": 2}}}])),
            filters(json!([{"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "m", "port": 80}, "fraction": {"numerator": 3, "denominator": 2}}}]))),
        // The denominator the rule reads is the schema's default.
        http("spec.rules[0].filters[0].requestMirror.fraction", "numerator must be less than or equal to denominator",
            filters(json!([{"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "m", "port": 80}, "fraction": {"numerator": 100}}}])),
            filters(json!([{"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "m", "port": 80}, "fraction": {"numerator": 101}}}]))),
        grpc("spec.rules[0].matches[0].method", "One or both of 'service' or 'method' must be specified",
            grpc_method(json!({"method": "Get"})), grpc_method(json!({"type": "Exact"}))),
        grpc("spec.rules[0].matches[0].method", "service must only contain valid characters (matching ^(?i)\\.?[a-z_][a-z_0-9]*(\\.[a-z_][a-z_0-9]*)*$)",
            grpc_method(json!({"service": "Foo.v1.Bar_Baz"})), grpc_method(json!({"service": "foo/bar"}))),
        grpc("spec.rules[0].matches[0].method", "method must only contain valid characters (matching ^[A-Za-z_][A-Za-z_0-9]*$)",
            grpc_method(json!({"method": "Get_2"})), grpc_method(json!({"method": "2Get"}))),
        http("spec.rules[0]", "RequestRedirect filter must not be used together with backendRefs",
            route_rule(json!({"backendRefs": [{"name": "s", "port": 80}], "filters": [{"type": "RequestHeaderModifier", "requestHeaderModifier": header_mod()}]})),
            route_rule(json!({"backendRefs": [{"name": "s", "port": 80}], "filters": [{"type": "RequestRedirect", "requestRedirect": {"scheme": "https"}}]}))),
        http("spec.rules[0]", "When using RequestRedirect filter with path.replacePrefixMatch, exactly one PathPrefix match must be specified",
            prefix_rewrite("requestRedirect", false, "PathPrefix"), prefix_rewrite("requestRedirect", false, "Exact")),
        // Without matches, the schema's default (one PathPrefix match) is what the rule sees.
        http("spec.rules[0]", "When using RequestRedirect filter with path.replacePrefixMatch, exactly one PathPrefix match must be specified",
            rewrite("requestRedirect", json!({"type": "ReplacePrefixMatch", "replacePrefixMatch": "/new"})),
            route_rule(json!({"matches": [], "filters": [{"type": "RequestRedirect", "requestRedirect": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/new"}}}]}))),
        http("spec.rules[0]", "When using URLRewrite filter with path.replacePrefixMatch, exactly one PathPrefix match must be specified",
            prefix_rewrite("urlRewrite", false, "PathPrefix"), prefix_rewrite("urlRewrite", false, "Exact")),
        http("spec.rules[0]", "Within backendRefs, when using RequestRedirect filter with path.replacePrefixMatch, exactly one PathPrefix match must be specified",
            prefix_rewrite("requestRedirect", true, "PathPrefix"), prefix_rewrite("requestRedirect", true, "Exact")),
        http("spec.rules[0]", "Within backendRefs, When using URLRewrite filter with path.replacePrefixMatch, exactly one PathPrefix match must be specified",
            prefix_rewrite("urlRewrite", true, "PathPrefix"), prefix_rewrite("urlRewrite", true, "Exact")),
        http("spec.rules[0].filters", "May specify either httpRouteFilterRequestRedirect or httpRouteFilterRequestRewrite, but not both",
            filters(json!([{"type": "URLRewrite", "urlRewrite": {"hostname": "a.example.com"}}])),
            filters(json!([{"type": "URLRewrite", "urlRewrite": {"hostname": "a.example.com"}}, {"type": "RequestRedirect", "requestRedirect": {"scheme": "https"}}]))),
        http("spec.rules[0].backendRefs[0].filters", "CORS filter cannot be repeated",
            backend_filters(json!([{"type": "CORS", "cors": {"allowOrigins": ["*"]}}])),
            backend_filters(json!([{"type": "CORS", "cors": {"allowOrigins": ["*"]}}, {"type": "CORS", "cors": {"allowMethods": ["GET"]}}]))),
        http("spec.rules[0].filters", "RequestRedirect filter cannot be repeated",
            filters(json!([{"type": "RequestRedirect", "requestRedirect": {"scheme": "https"}}])),
            filters(json!([{"type": "RequestRedirect", "requestRedirect": {"scheme": "https"}}, {"type": "RequestRedirect", "requestRedirect": {"port": 8443}}]))),
        http("spec.rules[0].filters", "URLRewrite filter cannot be repeated",
            filters(json!([{"type": "URLRewrite", "urlRewrite": {"hostname": "a.example.com"}}])),
            filters(json!([{"type": "URLRewrite", "urlRewrite": {"hostname": "a.example.com"}}, {"type": "URLRewrite", "urlRewrite": {"hostname": "b.example.com"}}]))),
        http(f0, "filter.cors must be nil if the filter.type is not CORS",
            filters(json!([{"type": "CORS", "cors": {"allowCredentials": true}}])),
            filters(json!([{"type": "URLRewrite", "urlRewrite": {"hostname": "a.example.com"}, "cors": {"allowCredentials": true}}]))),
        http(bf0, "filter.cors must be specified for CORS filter.type",
            backend_filters(json!([{"type": "CORS", "cors": {"allowCredentials": true}}])),
            backend_filters(json!([{"type": "CORS"}]))),
        http(f0, "filter.requestRedirect must be nil if the filter.type is not RequestRedirect",
            filters(json!([{"type": "RequestRedirect", "requestRedirect": {"scheme": "https"}}])),
            filters(json!([{"type": "URLRewrite", "urlRewrite": {"hostname": "a.example.com"}, "requestRedirect": {"scheme": "https"}}]))),
        http(f0, "filter.requestRedirect must be specified for RequestRedirect filter.type",
            filters(json!([{"type": "RequestRedirect", "requestRedirect": {"statusCode": 301}}])),
            filters(json!([{"type": "RequestRedirect"}]))),
        http(bf0, "filter.urlRewrite must be nil if the filter.type is not URLRewrite",
            backend_filters(json!([{"type": "URLRewrite", "urlRewrite": {"hostname": "a.example.com"}}])),
            backend_filters(json!([{"type": "CORS", "cors": {"allowCredentials": true}, "urlRewrite": {"hostname": "a.example.com"}}]))),
        http(f0, "filter.urlRewrite must be specified for URLRewrite filter.type",
            filters(json!([{"type": "URLRewrite", "urlRewrite": {"hostname": "a.example.com"}}])),
            filters(json!([{"type": "URLRewrite"}]))),
        http("spec.rules[0].filters[0].cors.allowHeaders", "AllowHeaders cannot contain '*' alongside other methods",
            cors("allowHeaders", json!(["*"])), cors("allowHeaders", json!(["*", "x-a"]))),
        http("spec.rules[0].filters[0].cors.allowMethods", "AllowMethods cannot contain '*' alongside other methods",
            cors("allowMethods", json!(["GET", "POST"])), cors("allowMethods", json!(["GET", "*"]))),
        http("spec.rules[0].filters[0].cors.allowOrigins", "AllowOrigins cannot contain '*' alongside other origins",
            cors("allowOrigins", json!(["https://a.example.com", "http://*.example.com:8080"])),
            cors("allowOrigins", json!(["*", "https://a.example.com"]))),
        http("spec.rules[0].filters[0].requestRedirect.path", "replaceFullPath must be specified when type is set to 'ReplaceFullPath'",
            rewrite("requestRedirect", json!({"type": "ReplaceFullPath", "replaceFullPath": "/x"})),
            rewrite("requestRedirect", json!({"type": "ReplaceFullPath"}))),
        http("spec.rules[0].filters[0].urlRewrite.path", "type must be 'ReplaceFullPath' when replaceFullPath is set",
            rewrite("urlRewrite", json!({"type": "ReplaceFullPath", "replaceFullPath": "/x"})),
            rewrite("urlRewrite", json!({"type": "ReplacePrefixMatch", "replacePrefixMatch": "/y", "replaceFullPath": "/x"}))),
        http("spec.rules[0].filters[0].urlRewrite.path", "replacePrefixMatch must be specified when type is set to 'ReplacePrefixMatch'",
            rewrite("urlRewrite", json!({"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"})),
            rewrite("urlRewrite", json!({"type": "ReplacePrefixMatch"}))),
        http("spec.rules[0].filters[0].requestRedirect.path", "type must be 'ReplacePrefixMatch' when replacePrefixMatch is set",
            rewrite("requestRedirect", json!({"type": "ReplacePrefixMatch", "replacePrefixMatch": "/y"})),
            rewrite("requestRedirect", json!({"type": "ReplaceFullPath", "replaceFullPath": "/x", "replacePrefixMatch": "/y"}))),
        // The same four rules on the other filter's path.
        http("spec.rules[0].filters[0].urlRewrite.path", "replaceFullPath must be specified when type is set to 'ReplaceFullPath'",
            rewrite("urlRewrite", json!({"type": "ReplaceFullPath", "replaceFullPath": "/x"})),
            rewrite("urlRewrite", json!({"type": "ReplaceFullPath"}))),
        http("spec.rules[0].filters[0].requestRedirect.path", "type must be 'ReplaceFullPath' when replaceFullPath is set",
            rewrite("requestRedirect", json!({"type": "ReplaceFullPath", "replaceFullPath": "/x"})),
            rewrite("requestRedirect", json!({"type": "ReplacePrefixMatch", "replacePrefixMatch": "/y", "replaceFullPath": "/x"}))),
        http("spec.rules[0].filters[0].requestRedirect.path", "replacePrefixMatch must be specified when type is set to 'ReplacePrefixMatch'",
            rewrite("requestRedirect", json!({"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"})),
            rewrite("requestRedirect", json!({"type": "ReplacePrefixMatch"}))),
        http("spec.rules[0].filters[0].urlRewrite.path", "type must be 'ReplacePrefixMatch' when replacePrefixMatch is set",
            rewrite("urlRewrite", json!({"type": "ReplacePrefixMatch", "replacePrefixMatch": "/y"})),
            rewrite("urlRewrite", json!({"type": "ReplaceFullPath", "replaceFullPath": "/x", "replacePrefixMatch": "/y"}))),
        path_case("value must be an absolute path and start with '/' when type one of ['Exact', 'PathPrefix']", "/a", "a"),
        path_case("must not contain '//' when type one of ['Exact', 'PathPrefix']", "/a/b", "/a//b"),
        path_case("must not contain '/./' when type one of ['Exact', 'PathPrefix']", "/a/.b", "/a/./b"),
        path_case("must not contain '/../' when type one of ['Exact', 'PathPrefix']", "/a/..b/", "/a/../b"),
        path_case("must not contain '%2f' when type one of ['Exact', 'PathPrefix']", "/a%20b", "/a%2fb"),
        path_case("must not contain '%2F' when type one of ['Exact', 'PathPrefix']", "/a%3Fb", "/a%2Fb"),
        path_case("must not contain '#' when type one of ['Exact', 'PathPrefix']", "/a", "/a#b"),
        path_case("must not end with '/..' when type one of ['Exact', 'PathPrefix']", "/a/..b", "/a/.."),
        path_case("must not end with '/.' when type one of ['Exact', 'PathPrefix']", "/a/.b", "/a/."),
        // No object fails this rule on a cluster: `type`'s enum refuses any other value first,
        // and an enum error keeps every rule from running.
        Case { blocked: true, ..http("spec.rules[0].matches[0].path", "type must be one of ['Exact', 'PathPrefix', 'RegularExpression']",
            path("RegularExpression", "/a.*"), path("Glob", "/a")) },
        path_case("must only contain valid characters (matching ^(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|[%][0-9a-fA-F]{2})+$) for types ['Exact', 'PathPrefix']", "/a-b_c~d%41@", "/a b"),
        http("spec.rules[0].timeouts", "backendRequest timeout cannot be longer than request timeout",
            route_rule(json!({"timeouts": {"request": "2m", "backendRequest": "1m"}})),
            route_rule(json!({"timeouts": {"request": "1m", "backendRequest": "61s"}}))),
        // Durations compare by length, whatever their units.
        http("spec.rules[0].timeouts", "backendRequest timeout cannot be longer than request timeout",
            route_rule(json!({"timeouts": {"request": "1h", "backendRequest": "59m60s"}})),
            route_rule(json!({"timeouts": {"request": "1h", "backendRequest": "59m59s1001ms"}}))),
        // A zero request timeout means none: any backend timeout fits.
        http("spec.rules[0].timeouts", "backendRequest timeout cannot be longer than request timeout",
            route_rule(json!({"timeouts": {"request": "0s", "backendRequest": "1h"}})),
            route_rule(json!({"timeouts": {"request": "1ms", "backendRequest": "2ms"}}))),
    ]
}

/// One place a rule sits: kind, version, field path (no indices), message.
type Place = (String, String, String, String);

/// Every rule's place in one version's schema (`path`: the field path of `schema`).
fn places(schema: &Value, kind: &str, version: &str, path: &str, out: &mut BTreeSet<Place>) {
    let rules = schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array);
    for rule in rules.into_iter().flatten() {
        let text = rule.get("message").or_else(|| rule.get("rule"));
        let text = text.and_then(Value::as_str).unwrap().to_owned();
        out.insert((kind.into(), version.into(), path.into(), text));
    }
    for (name, child) in schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let path = if path.is_empty() {
            name.clone()
        } else {
            format!("{path}.{name}")
        };
        places(child, kind, version, &path, out);
    }
    if let Some(items) = schema.get("items") {
        places(items, kind, version, path, out);
    }
}

/// A field path without its list indices.
fn without_indices(field: &str) -> String {
    let mut out = String::new();
    let mut in_index = false;
    for ch in field.chars() {
        match ch {
            '[' => in_index = true,
            ']' => in_index = false,
            _ if !in_index => out.push(ch),
            _ => {}
        }
    }
    out
}

/// Where a route's filters sit: at its first rule, or at that rule's first backend.
const FILTER_PLACES: [&str; 2] = [
    "spec.rules[0].filters",
    "spec.rules[0].backendRefs[0].filters",
];

/// A filter case again at every other place its family's rule sits: the other filter list, and
/// the other route kind when that kind carries the family too.
fn elsewhere(c: &Case, by_kind: &BTreeMap<String, BTreeSet<String>>) -> Vec<Case> {
    let Some(from) = FILTER_PLACES.iter().find(|p| c.field.starts_with(*p)) else {
        return Vec::new();
    };
    let filters_of = |spec: &Value| {
        let at = spec.pointer("/rules/0/filters");
        at.or_else(|| spec.pointer("/rules/0/backendRefs/0/filters"))
            .unwrap()
            .clone()
    };
    let place = |to: &str, filters: Value| match to {
        "spec.rules[0].filters" => route_rule(json!({"filters": filters})),
        _ => route_rule(json!({"backendRefs": [{"name": "s", "port": 80, "filters": filters}]})),
    };
    let kinds = by_kind[c.message].iter().filter(|k| k.ends_with("Route"));
    kinds
        .flat_map(|kind| FILTER_PLACES.iter().map(move |to| (kind, to)))
        .filter(|(kind, to)| (kind.as_str(), **to) != (c.kind, *from))
        .map(|(kind, to)| Case {
            kind: if kind == "GRPCRoute" {
                "GRPCRoute"
            } else {
                "HTTPRoute"
            },
            field: c.field.replacen(from, to, 1),
            message: c.message,
            write: Write::Create,
            ok: place(to, filters_of(&c.ok)),
            bad: place(to, filters_of(&c.bad)),
            blocked: c.blocked,
        })
        .collect()
}

/// The type the server names in an `Invalid value` cause for the value at `field`.
fn type_name(obj: &Value, field: &str) -> &'static str {
    let pointer: String = field
        .replace('[', ".")
        .replace(']', "")
        .split('.')
        .map(|p| format!("/{p}"))
        .collect();
    match obj.pointer(&pointer) {
        Some(Value::Object(_)) => "object",
        Some(Value::Array(_)) => "array",
        Some(Value::String(_)) => "string",
        Some(Value::Number(n)) if n.is_f64() => "number",
        Some(Value::Number(_)) => "integer",
        Some(Value::Bool(_)) => "boolean",
        v => panic!("{field}: no value in {obj}: {v:?}"),
    }
}

/// A cluster with every Gateway API CRD installed; the families their rules form, each with
/// the kinds that carry it.
async fn gateway_api() -> (TestEnv, BTreeMap<String, BTreeSet<String>>, BTreeSet<Place>) {
    let env = TestEnv::start().await.unwrap();
    let crds: Api<DynamicObject> = Api::all_with(
        env.client(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            "customresourcedefinitions",
        ),
    );
    let mut found = BTreeMap::<String, BTreeSet<String>>::new();
    let mut all_places = BTreeSet::new();
    for yaml in CRDS {
        let crd: Value = serde_saphyr::from_str(yaml).unwrap();
        let mut here = BTreeSet::new();
        families(&crd, &mut here);
        let kind = crd
            .pointer("/spec/names/kind")
            .and_then(Value::as_str)
            .unwrap();
        for message in here {
            found.entry(message).or_default().insert(kind.to_owned());
        }
        for v in crd
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .unwrap()
        {
            let schema = &v["schema"]["openAPIV3Schema"];
            places(
                schema,
                kind,
                v["name"].as_str().unwrap(),
                "",
                &mut all_places,
            );
        }
        let obj: DynamicObject = serde_json::from_value(crd).unwrap();
        crds.create(&PostParams::default(), &obj).await.unwrap();
    }
    (env, found, all_places)
}

fn api(env: &TestEnv, kind: &str, version: &str) -> Api<DynamicObject> {
    let suffix = if kind.ends_with("Class") { "es" } else { "s" };
    let plural = kind.to_lowercase() + suffix;
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("gateway.networking.k8s.io", version, kind),
        &plural,
    );
    if kind == "GatewayClass" {
        Api::all_with(env.client(), &ar)
    } else {
        Api::namespaced_with(env.client(), "default", &ar)
    }
}

fn object(kind: &str, version: &str, name: &str, spec: &Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": format!("gateway.networking.k8s.io/{version}"), "kind": kind,
        "metadata": {"name": name}, "spec": spec}))
    .unwrap()
}

/// The status code and the causes (as `field: message`) of a refused write.
fn causes(r: kube::Result<DynamicObject>) -> (u16, Vec<String>) {
    let status = support::api_err(r.expect_err("the write is refused"));
    let causes = status.details.map(|d| d.causes).unwrap_or_default();
    let causes = causes
        .iter()
        .map(|k| format!("{}: {}", k.field, k.message))
        .collect();
    (status.code, causes)
}

/// Writes `body` (a spec, or a status for [`Write::Status`]) as object `name` at `version`,
/// created at v1 and applied server-side at v1beta1; the object as written, for naming the type
/// of a refused field.
async fn write(
    env: &TestEnv,
    c: &Case,
    version: &str,
    name: &str,
    body: &Value,
) -> (Value, kube::Result<DynamicObject>) {
    let api = api(env, c.kind, version);
    let pp = PostParams::default();
    let patch = |key: &str| Patch::Merge(json!({key: body}));
    let create = |spec: &Value| {
        let obj = object(c.kind, version, name, spec);
        let api = api.clone();
        async move {
            if version == "v1" {
                api.create(&pp, &obj).await
            } else {
                let apply = PatchParams::apply("families").force();
                api.patch(name, &apply, &Patch::Apply(obj)).await
            }
        }
    };
    match &c.write {
        Write::Create => (json!({"spec": body}), create(body).await),
        Write::Update(base) => {
            create(base).await.unwrap();
            let r = api
                .patch(name, &PatchParams::default(), &patch("spec"))
                .await;
            (json!({"spec": body}), r)
        }
        Write::Status => {
            create(&gateway(json!([http_listener()]))).await.unwrap();
            let r = api
                .patch_status(name, &PatchParams::default(), &patch("status"))
                .await;
            (json!({"status": body}), r)
        }
    }
}

#[tokio::test]
async fn every_rule_family_admits_a_valid_object_and_refuses_an_invalid_one() {
    let (env, by_kind, all_places) = gateway_api().await;
    let mut cases = cases();
    let found: BTreeSet<String> = by_kind.keys().cloned().collect();
    let covered: BTreeSet<String> = cases.iter().map(|c| c.message.to_owned()).collect();
    let missing: Vec<_> = found.difference(&covered).collect();
    let stale: Vec<_> = covered.difference(&found).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "families without a case: {missing:#?}\ncases for no family: {stale:#?}"
    );

    let elsewhere: Vec<Case> = cases.iter().flat_map(|c| elsewhere(c, &by_kind)).collect();
    cases.extend(elsewhere);

    // Gateway, GatewayClass and HTTPRoute carry their rules at v1beta1 too; GRPCRoute has v1 only.
    let runs = ["v1", "v1beta1"]
        .into_iter()
        .flat_map(|v| cases.iter().enumerate().map(move |(i, c)| (v, i, c)))
        .filter(|(v, _, c)| *v == "v1" || c.kind != "GRPCRoute");
    let mut failures = Vec::new();
    let mut tried = BTreeSet::new();
    for (version, i, c) in runs {
        let field = without_indices(&c.field);
        tried.insert((c.kind.into(), version.into(), field, c.message.into()));
        let (_, r) = write(&env, c, version, &format!("{version}-ok-{i}"), &c.ok).await;
        if let Err(e) = r {
            failures.push(format!(
                "{version} {}: valid object refused: {e}",
                c.message
            ));
        }
        let (sent, r) = write(&env, c, version, &format!("{version}-bad-{i}"), &c.bad).await;
        if r.is_ok() {
            failures.push(format!("{version} {}: invalid object admitted", c.message));
            continue;
        }
        let ty = type_name(&sent, &c.field);
        let want = match c.blocked {
            true => NOT_CHECKED.to_owned(),
            false => format!("{}: Invalid value: \"{ty}\": {}", c.field, c.message),
        };
        let (code, got) = causes(r);
        if code != 422 || !got.contains(&want) {
            failures.push(format!("{version}: want `{want}`, got {code} {got:#?}"));
        }
    }
    let untried: Vec<_> = all_places.difference(&tried).collect();
    assert!(untried.is_empty(), "rules no case reaches: {untried:#?}");
    assert!(
        failures.is_empty(),
        "{} writes of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// A rule that reads a field the object leaves out is an evaluation error, worded as
/// kube-apiserver words it (as quoted from a real cluster in gateway-api users' reports); CEL's
/// `||` is true if either side is, whichever side fails.
#[tokio::test]
async fn a_rule_reading_an_absent_field_fails_as_on_a_cluster() {
    let (env, _, _) = gateway_api().await;
    let gateways = api(&env, "Gateway", "v1");
    let pp = PostParams::default();
    let https =
        |tls: Value| gateway(json!([{"name": "s", "protocol": "HTTPS", "port": 443, "tls": tls}]));
    let no_certs = https(json!({"mode": "Terminate"}));
    let r = gateways
        .create(&pp, &object("Gateway", "v1", "no-certs", &no_certs))
        .await;
    assert_eq!(
        causes(r),
        (
            422,
            vec![
                "spec.listeners[0].tls: Invalid value: \"object\": no such key: certificateRefs evaluating rule: certificateRefs or options must be specified when mode is Terminate".to_owned()
            ]
        )
    );
    let options_only = https(json!({"options": {"example.com/o": "v"}}));
    gateways
        .create(&pp, &object("Gateway", "v1", "options-only", &options_only))
        .await
        .unwrap();
}

/// The largest objects the schemas allow, all valid, fit the runtime cost budget.
#[tokio::test]
async fn the_largest_valid_objects_are_admitted() {
    let (env, _, _) = gateway_api().await;
    let pp = PostParams::default();
    let listeners: Vec<Value> = (0..64)
        .map(|i| {
            json!({"name": format!("l{i}"), "protocol": "HTTPS", "port": 1000 + i,
            "hostname": format!("h{i}.example.com"),
            "tls": {"certificateRefs": vec![json!({"name": "c"}); 64]}})
        })
        .collect();
    let addresses: Vec<Value> = (0..16)
        .map(|i| json!({"type": "Hostname", "value": format!("a{i}.example.com")}))
        .collect();
    let per_port: Vec<Value> = (0..64)
        .map(|i| json!({"port": 1000 + i, "tls": {}}))
        .collect();
    let spec = json!({"gatewayClassName": "c", "listeners": listeners, "addresses": addresses,
        "tls": {"frontend": {"default": {}, "perPort": per_port}}});
    api(&env, "Gateway", "v1")
        .create(&pp, &object("Gateway", "v1", "big", &spec))
        .await
        .unwrap();

    let parent_refs: Vec<Value> = (0..32)
        .map(|i| json!({"name": "gw", "sectionName": format!("s{i}")}))
        .collect();
    let mut filters = vec![
        json!({"type": "RequestHeaderModifier", "requestHeaderModifier": header_mod()}),
        json!({"type": "ResponseHeaderModifier", "responseHeaderModifier": header_mod()}),
    ];
    filters.extend((0..14).map(|_| json!({"type": "RequestMirror", "requestMirror": mirror()})));
    let backend = json!({"name": "s", "port": 80, "filters": filters});
    let m = json!({"path": {"type": "PathPrefix", "value": "/a"}});
    let rule = json!({"matches": vec![m; 8], "filters": filters, "backendRefs": vec![backend; 16]});
    let spec = json!({"parentRefs": parent_refs, "rules": vec![rule; 16]});
    api(&env, "HTTPRoute", "v1")
        .create(&pp, &object("HTTPRoute", "v1", "big", &spec))
        .await
        .unwrap();
}
