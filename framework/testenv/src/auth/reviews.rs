//! The create-only, never-stored auth APIs: `authentication.k8s.io/v1` TokenReview, the
//! `serviceaccounts/<name>/token` TokenRequest subresource, and `authorization.k8s.io/v1`
//! SubjectAccessReview, SelfSubjectAccessReview and LocalSubjectAccessReview, answered as
//! kube-apiserver's registries answer them.

use serde_json::{Value, json};

use super::attributes::Attributes;
use super::config::Auth;
use super::rbac;
use super::tokens::{API_AUDIENCE, UserInfo};
use crate::api::kinds::lookup;
use crate::api::status::{ApiError, Cause};
use crate::storage::store::Store;

/// Which auth API a request addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Api {
    TokenReview,
    TokenRequest,
    SubjectAccessReview,
    SelfSubjectAccessReview,
    LocalSubjectAccessReview,
    SelfSubjectRulesReview,
}

fn api_of(a: &Attributes) -> Option<Api> {
    if !a.resource_request || a.api_version != "v1" {
        return None;
    }
    let cluster = a.namespace.is_empty();
    let plain = a.subresource.is_empty() && a.name.is_empty();
    match (a.api_group.as_str(), a.resource.as_str()) {
        ("authentication.k8s.io", "tokenreviews") if cluster && plain => Some(Api::TokenReview),
        ("", "serviceaccounts") if !cluster && !a.name.is_empty() && a.subresource == "token" => {
            Some(Api::TokenRequest)
        }
        ("authorization.k8s.io", "subjectaccessreviews") if cluster && plain => {
            Some(Api::SubjectAccessReview)
        }
        ("authorization.k8s.io", "selfsubjectaccessreviews") if cluster && plain => {
            Some(Api::SelfSubjectAccessReview)
        }
        ("authorization.k8s.io", "localsubjectaccessreviews") if !cluster && plain => {
            Some(Api::LocalSubjectAccessReview)
        }
        ("authorization.k8s.io", "selfsubjectrulesreviews") if cluster && plain => {
            Some(Api::SelfSubjectRulesReview)
        }
        _ => None,
    }
}

/// Answers `a` if it addresses one of these APIs (`None`: not ours, route it on).
pub fn serve(
    store: &Store,
    auth: &Auth,
    user: &UserInfo,
    a: &Attributes,
    content_type: &str,
    body: &[u8],
) -> Option<Result<(u16, Value), ApiError>> {
    let api = api_of(a)?;
    if a.verb != "create" {
        return Some(Err(ApiError::method_not_allowed()));
    }
    // A protobuf body arrives here already decoded into JSON by the router.
    let decoded = crate::api::body::decode(content_type, body);
    let obj = match decoded {
        Ok(v @ Value::Object(_)) => v,
        Ok(_) => {
            return Some(Err(ApiError::bad_request(
                "the object provided is unrecognized",
            )));
        }
        Err(e) => return Some(Err(e)),
    };
    Some(match api {
        Api::TokenReview => token_review(store, auth, obj),
        Api::TokenRequest => token_request(store, auth, &a.namespace, &a.name, obj),
        Api::SubjectAccessReview => access_review(store, auth, obj, None, "SubjectAccessReview"),
        Api::SelfSubjectAccessReview => {
            access_review(store, auth, obj, Some(user), "SelfSubjectAccessReview")
        }
        Api::LocalSubjectAccessReview => local_access_review(store, auth, &a.namespace, obj),
        Api::SelfSubjectRulesReview => rules_review(store, auth, user, &obj),
    })
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(String::from)
        .collect()
}

/// Sets the type meta and the empty metadata upstream returns on these objects.
fn answer(mut obj: Value, group_version: &str, kind: &str, status: Value) -> Value {
    obj["apiVersion"] = group_version.into();
    obj["kind"] = kind.into();
    obj["metadata"] = json!({"creationTimestamp": null});
    obj["status"] = status;
    obj
}

fn token_review(store: &Store, auth: &Auth, obj: Value) -> Result<(u16, Value), ApiError> {
    let token = obj
        .pointer("/spec/token")
        .and_then(Value::as_str)
        .unwrap_or("");
    if token.is_empty() {
        return Err(ApiError::bad_request(
            "token is required for TokenReview in authentication",
        ));
    }
    let mut audiences = strings(obj.pointer("/spec/audiences"));
    if audiences.is_empty() {
        audiences = vec![API_AUDIENCE.to_string()];
    }
    let found = auth.tokens.authenticate(store, token, &audiences);
    let status = match found {
        Some(ok) => {
            let mut user = json!({"username": ok.user.name, "groups": ok.user.groups});
            if !ok.user.uid.is_empty() {
                user["uid"] = ok.user.uid.into();
            }
            json!({"authenticated": true, "user": user, "audiences": ok.audiences})
        }
        None => json!({"user": {}, "error": "invalid bearer token"}),
    };
    Ok((
        201,
        answer(obj, "authentication.k8s.io/v1", "TokenReview", status),
    ))
}

/// Default and bounds of `spec.expirationSeconds` (upstream's defaulting and validation).
const DEFAULT_EXPIRATION: i64 = 3600;
const MIN_EXPIRATION: i64 = 600;
const MAX_EXPIRATION: i64 = 1 << 32;

fn token_request(
    store: &Store,
    auth: &Auth,
    namespace: &str,
    name: &str,
    mut obj: Value,
) -> Result<(u16, Value), ApiError> {
    let seconds = match obj.pointer("/spec/expirationSeconds") {
        None | Some(Value::Null) => DEFAULT_EXPIRATION,
        Some(v) => v.as_i64().ok_or_else(|| {
            ApiError::bad_request(format!(
                "the object provided is unrecognized: spec.expirationSeconds: {v} is not an integer"
            ))
        })?,
    };
    let detail = if seconds < MIN_EXPIRATION {
        Some("may not specify a duration less than 10 minutes")
    } else if seconds > MAX_EXPIRATION {
        Some("may not specify a duration larger than 2^32 seconds")
    } else {
        None
    };
    if let Some(detail) = detail {
        let cause = Cause::invalid("spec.expirationSeconds", &seconds.to_string(), detail);
        return Err(ApiError::invalid(
            "authentication.k8s.io",
            "TokenRequest",
            "",
            vec![cause],
        ));
    }
    let mut audiences = strings(obj.pointer("/spec/audiences"));
    if audiences.is_empty() {
        audiences = vec![API_AUDIENCE.to_string()];
    }
    let (token, expires) = mint(
        store,
        auth,
        namespace,
        name,
        audiences.clone(),
        seconds as u64,
    )?;
    let bound = obj
        .pointer("/spec/boundObjectRef")
        .cloned()
        .unwrap_or(Value::Null);
    obj["spec"] =
        json!({"audiences": audiences, "expirationSeconds": seconds, "boundObjectRef": bound});
    let status = json!({"token": token, "expirationTimestamp": expires});
    Ok((
        201,
        answer(obj, "authentication.k8s.io/v1", "TokenRequest", status),
    ))
}

/// Mints a token for an existing ServiceAccount: the token and its RFC 3339 expiry.
pub fn mint(
    store: &Store,
    auth: &Auth,
    namespace: &str,
    name: &str,
    audiences: Vec<String>,
    seconds: u64,
) -> Result<(String, String), ApiError> {
    let res = lookup("", "v1", "serviceaccounts")
        .ok_or_else(|| ApiError::not_found("", "serviceaccounts", name))?;
    let uid = store.with(|s| {
        s.get(res, namespace, name)
            .and_then(|sa| sa.pointer("/metadata/uid").and_then(Value::as_str))
            .map(String::from)
    });
    let uid = uid.ok_or_else(|| ApiError::not_found("", "serviceaccounts", name))?;
    let token = auth.tokens.issue(namespace, name, &uid, audiences, seconds);
    let expires = jiff::Timestamp::now()
        .checked_add(jiff::SignedDuration::from_secs(seconds as i64))
        .unwrap_or(jiff::Timestamp::MAX)
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    Ok((token, expires))
}

/// The attributes a SubjectAccessReview spec asks about, or upstream's validation causes.
fn spec_attributes(spec: &Value) -> Result<Attributes, Vec<Cause>> {
    let res = spec.get("resourceAttributes").filter(|v| !v.is_null());
    let non = spec.get("nonResourceAttributes").filter(|v| !v.is_null());
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    match (res, non) {
        (Some(_), Some(non)) => Err(vec![Cause::invalid(
            "spec.nonResourceAttributes",
            &go_struct(non),
            "cannot be specified in combination with resourceAttributes",
        )]),
        (None, None) => Err(vec![Cause::invalid(
            "spec.resourceAttributes",
            "(*authorization.NonResourceAttributes)(nil)",
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )]),
        (Some(r), None) => Ok(Attributes {
            verb: s(r, "verb"),
            resource_request: true,
            api_group: s(r, "group"),
            api_version: s(r, "version"),
            namespace: s(r, "namespace"),
            resource: s(r, "resource"),
            subresource: s(r, "subresource"),
            name: s(r, "name"),
            path: String::new(),
        }),
        (None, Some(n)) => Ok(Attributes {
            verb: s(n, "verb"),
            path: s(n, "path"),
            ..Attributes::default()
        }),
    }
}

/// Go's `%#v` of a `*NonResourceAttributes`, as validation messages print it.
fn go_struct(v: &Value) -> String {
    let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    format!(
        "&authorization.NonResourceAttributes{{Path:{}, Verb:{}}}",
        crate::api::status::go_quote(&s("path")),
        crate::api::status::go_quote(&s("verb"))
    )
}

fn decide(store: &Store, auth: &Auth, user: &UserInfo, a: &Attributes) -> Value {
    if !auth.enforce {
        // --authorization-mode=AlwaysAllow: everything is allowed, with no reason.
        return json!({"allowed": true});
    }
    let d = store.with(|s| rbac::authorize(s, user, a));
    let mut status = json!({"allowed": d.allowed});
    if !d.reason.is_empty() {
        status["reason"] = d.reason.into();
    }
    status
}

fn access_review(
    store: &Store,
    auth: &Auth,
    obj: Value,
    requester: Option<&UserInfo>,
    kind: &str,
) -> Result<(u16, Value), ApiError> {
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    let mut causes = Vec::new();
    let attrs = spec_attributes(&spec).map_err(|c| causes.extend(c)).ok();
    let user = match requester {
        Some(u) => u.clone(),
        None => {
            let user = UserInfo {
                name: spec
                    .get("user")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .into(),
                uid: spec.get("uid").and_then(Value::as_str).unwrap_or("").into(),
                groups: strings(spec.get("groups")),
            };
            if user.name.is_empty() && user.groups.is_empty() {
                causes.push(Cause::invalid(
                    "spec.user",
                    "\"\"",
                    "at least one of user or group must be specified",
                ));
            }
            user
        }
    };
    let Some(attrs) = attrs.filter(|_| causes.is_empty()) else {
        return Err(ApiError::invalid("authorization.k8s.io", kind, "", causes));
    };
    let status = decide(store, auth, &user, &attrs);
    Ok((201, answer(obj, "authorization.k8s.io/v1", kind, status)))
}

fn local_access_review(
    store: &Store,
    auth: &Auth,
    namespace: &str,
    obj: Value,
) -> Result<(u16, Value), ApiError> {
    let kind = "LocalSubjectAccessReview";
    let body_ns = obj
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or(namespace);
    if body_ns != namespace {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    if let Some(Value::Object(_)) = obj.pointer("/spec/nonResourceAttributes") {
        let cause = Cause::invalid(
            "spec.nonResourceAttributes",
            &go_struct(&obj["spec"]["nonResourceAttributes"]),
            "disallowed on this kind of request",
        );
        return Err(ApiError::invalid(
            "authorization.k8s.io",
            kind,
            "",
            vec![cause],
        ));
    }
    let attr_ns = obj
        .pointer("/spec/resourceAttributes/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    if obj.pointer("/spec/resourceAttributes").is_some() && attr_ns != namespace {
        let cause = Cause::invalid(
            "spec.resourceAttributes.namespace",
            &crate::api::status::go_quote(attr_ns),
            "must match metadata.namespace",
        );
        return Err(ApiError::invalid(
            "authorization.k8s.io",
            kind,
            "",
            vec![cause],
        ));
    }
    let (code, mut v) = access_review(store, auth, obj, None, kind)?;
    v["metadata"]["namespace"] = namespace.into();
    Ok((code, v))
}

/// SelfSubjectRulesReview: the rules the requester has in `spec.namespace`, as upstream's
/// union of the privileged-group (or AlwaysAllow) authorizer's `*` rules and RBAC's.
fn rules_review(
    store: &Store,
    auth: &Auth,
    user: &UserInfo,
    obj: &Value,
) -> Result<(u16, Value), ApiError> {
    let namespace = obj
        .pointer("/spec/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    if namespace.is_empty() {
        return Err(ApiError::bad_request("no namespace on request"));
    }
    let master = user.groups.iter().any(|g| g == "system:masters");
    let mut granted = Vec::new();
    if !auth.enforce || master {
        granted.push(json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}));
        granted.push(json!({"verbs": ["*"], "nonResourceURLs": ["*"]}));
    }
    let mut error = None;
    if auth.enforce {
        let (rules, e) = store.with(|s| rbac::rules_for(s, user, namespace));
        granted.extend(rules);
        error = e;
    }
    let field = |rule: &Value, k: &str| {
        rule.get(k)
            .filter(|v| v.as_array().is_some_and(|a| !a.is_empty()))
            .cloned()
    };
    let (mut resource_rules, mut non_resource_rules) = (Vec::new(), Vec::new());
    for rule in &granted {
        let verbs = rule.get("verbs").cloned().unwrap_or(json!([]));
        if field(rule, "resources").is_some() {
            let mut r = json!({"verbs": verbs});
            for k in ["apiGroups", "resources", "resourceNames"] {
                if let Some(v) = field(rule, k) {
                    r[k] = v;
                }
            }
            resource_rules.push(r);
        }
        if let Some(urls) = field(rule, "nonResourceURLs") {
            non_resource_rules.push(json!({"verbs": verbs, "nonResourceURLs": urls}));
        }
    }
    let mut status = json!({"resourceRules": resource_rules, "nonResourceRules": non_resource_rules, "incomplete": false});
    if let Some(e) = error {
        status["evaluationError"] = e.into();
    }
    let out = answer(
        json!({"spec": {}}),
        "authorization.k8s.io/v1",
        "SelfSubjectRulesReview",
        status,
    );
    Ok((201, out))
}
