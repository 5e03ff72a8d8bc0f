//! `ValidatingAdmissionPolicy` over HTTP with a real `kube::Client`: policies and bindings
//! stored with their defaults, a write refused with upstream's words and code, `Warn` as a
//! `Warning` header, params read from the store (and missing ones), bad input answered as the
//! server answers it, and Gateway API's `safe-upgrades` policy (tests/fixtures/gateway-api,
//! unmodified) refusing what it should, audit annotations whose errors deny; and webhooks'
//! `matchConditions`, which share the policies' evaluator.

use http_body_util::BodyExt;
use kube_testenv::TestEnv;
use serde_json::{Value, json};

const POLICIES: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";
const BINDINGS: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings";
const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";
const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

/// Sends one request; the status code, the `Warning` headers and the JSON answer.
async fn send(
    env: &TestEnv,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Vec<String>, Value) {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json");
    let body = body.map(|b| b.to_string()).unwrap_or_default().into_bytes();
    let resp = env
        .client()
        .send(req.body(kube::client::Body::from(body)).unwrap())
        .await
        .unwrap();
    let code = resp.status().as_u16();
    let warnings = resp
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (
        code,
        warnings,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

async fn create(env: &TestEnv, path: &str, body: Value) -> (u16, Vec<String>, Value) {
    send(env, "POST", path, Some(body)).await
}

fn configmap_policy(name: &str, extra: Value) -> Value {
    let mut spec = json!({
        "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
            "operations": ["CREATE", "UPDATE"], "resources": ["configmaps"]}]},
        "validations": [{"expression": "!has(object.data) || object.data.size() <= 1",
            "message": "at most one key"}]
    });
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        s.extend(e.clone());
    }
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name}, "spec": spec})
}

fn binding(name: &str, policy: &str, extra: Value) -> Value {
    let mut spec = json!({"policyName": policy, "validationActions": ["Deny"]});
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        s.extend(e.clone());
    }
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name}, "spec": spec})
}

fn configmap(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

#[tokio::test]
async fn a_policy_denies_with_the_servers_message_and_code() {
    let env = TestEnv::start().await.unwrap();
    let (code, _, p) = create(
        &env,
        POLICIES,
        configmap_policy("keys.example.com", json!({})),
    )
    .await;
    assert_eq!(code, 201, "{p}");
    assert_eq!(p["spec"]["failurePolicy"], "Fail");
    let mc = &p["spec"]["matchConstraints"];
    assert_eq!(
        (
            &mc["matchPolicy"],
            &mc["namespaceSelector"],
            &mc["objectSelector"],
            &mc["resourceRules"][0]["scope"]
        ),
        (&json!("Equivalent"), &json!({}), &json!({}), &json!("*"))
    );
    assert_eq!(p["metadata"]["generation"], 1);
    let (code, _, _) = create(
        &env,
        BINDINGS,
        binding("keys-binding.example.com", "keys.example.com", json!({})),
    )
    .await;
    assert_eq!(code, 201);

    let (code, _, _) = create(&env, CONFIGMAPS, configmap("small", json!({"a": "1"}))).await;
    assert_eq!(code, 201);
    let (code, _, status) = create(
        &env,
        CONFIGMAPS,
        configmap("big", json!({"a": "1", "b": "2"})),
    )
    .await;
    let cause = "ValidatingAdmissionPolicy 'keys.example.com' with binding 'keys-binding.example.com' denied request: at most one key";
    let message = format!("configmaps \"big\" is forbidden: {cause}");
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": "Invalid",
            "details": {"name": "big", "kind": "configmaps", "causes": [{"message": cause}]},
            "code": 422})
    );
    // An update is refused too, and a reason other than Invalid gives its own code.
    let (code, _, _) = send(
        &env,
        "PUT",
        &format!("{CONFIGMAPS}/small"),
        Some(configmap("small", json!({"a": "1", "b": "2"}))),
    )
    .await;
    assert_eq!(code, 422);
    let forbidden = configmap_policy(
        "forbidden.example.com",
        json!({"validations": [{
        "expression": "object.metadata.name != 'secret-ish'", "reason": "Forbidden",
        "messageExpression": "'the name ' + object.metadata.name + ' is taken'"}]}),
    );
    assert_eq!(create(&env, POLICIES, forbidden).await.0, 201);
    let b = binding(
        "forbidden-binding.example.com",
        "forbidden.example.com",
        json!({}),
    );
    assert_eq!(create(&env, BINDINGS, b).await.0, 201);
    let (code, _, status) = create(&env, CONFIGMAPS, configmap("secret-ish", json!({}))).await;
    assert_eq!((code, &status["reason"]), (403, &json!("Forbidden")));
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .ends_with("denied request: the name secret-ish is taken"),
        "{status}"
    );
}

#[tokio::test]
async fn warn_mode_returns_a_warning_header() {
    let env = TestEnv::start().await.unwrap();
    create(
        &env,
        POLICIES,
        configmap_policy("keys.example.com", json!({})),
    )
    .await;
    let b = binding(
        "warn.example.com",
        "keys.example.com",
        json!({"validationActions": ["Warn", "Audit"]}),
    );
    assert_eq!(create(&env, BINDINGS, b).await.0, 201);
    let (code, warnings, _) = create(
        &env,
        CONFIGMAPS,
        configmap("big", json!({"a": "1", "b": "2"})),
    )
    .await;
    assert_eq!(code, 201);
    assert_eq!(
        warnings,
        [
            "299 - \"Validation failed for ValidatingAdmissionPolicy 'keys.example.com' with binding 'warn.example.com': at most one key\""
        ]
    );
}

#[tokio::test]
async fn params_come_from_the_store() {
    let env = TestEnv::start().await.unwrap();
    // The policy reads its limit from a ConfigMap and checks Secrets' labels.
    let policy = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "labels.example.com"},
        "spec": {"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": ["secrets"]}]},
            "variables": [{"name": "labels", "expression": "has(object.metadata.labels) ? object.metadata.labels.size() : 0"}],
            "validations": [{"expression": "variables.labels <= int(params.data.max)",
                "messageExpression": "'at most ' + params.data.max + ' labels'"}]}});
    assert_eq!(create(&env, POLICIES, policy).await.0, 201);
    let b = binding(
        "labels-binding.example.com",
        "labels.example.com",
        json!({"paramRef": {"name": "limits", "namespace": "default"}}),
    );
    let (code, _, stored) = create(&env, BINDINGS, b).await;
    assert_eq!(code, 201);
    assert_eq!(
        stored["spec"]["paramRef"]["parameterNotFoundAction"],
        "Deny"
    );
    let secret = |name: &str, labels: Value| {
        json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "labels": labels}})
    };
    let secrets = "/api/v1/namespaces/default/secrets";

    // No param yet, and the binding says Deny.
    let (code, _, status) = create(&env, secrets, secret("a", json!({}))).await;
    assert_eq!(code, 422);
    assert_eq!(
        status["message"],
        "secrets \"a\" is forbidden: ValidatingAdmissionPolicy 'labels.example.com' with binding 'labels-binding.example.com' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"
    );

    assert_eq!(
        create(&env, CONFIGMAPS, configmap("limits", json!({"max": "1"})))
            .await
            .0,
        201
    );
    assert_eq!(
        create(&env, secrets, secret("one", json!({"a": "1"})))
            .await
            .0,
        201
    );
    let (code, _, status) = create(&env, secrets, secret("two", json!({"a": "1", "b": "2"}))).await;
    assert_eq!(code, 422);
    assert_eq!(
        status["message"],
        "secrets \"two\" is forbidden: ValidatingAdmissionPolicy 'labels.example.com' with binding 'labels-binding.example.com' denied request: at most 1 labels"
    );
}

#[tokio::test]
async fn bad_input_gets_the_servers_answer() {
    let env = TestEnv::start().await.unwrap();
    let bad = configmap_policy(
        "bad.example.com",
        json!({"validations": [{"expression": "object.data +"}]}),
    );
    let (code, _, status) = create(&env, POLICIES, bad).await;
    assert_eq!(code, 422);
    let message = status["message"].as_str().unwrap();
    assert!(message.starts_with("ValidatingAdmissionPolicy.admissionregistration.k8s.io \"bad.example.com\" is invalid: spec.validations[0].expression: Invalid value: \"object.data +\": compilation failed: ERROR: <input>:1:14: Syntax error"), "{message}");
    let (code, _, status) = create(
        &env,
        BINDINGS,
        binding(
            "b.example.com",
            "",
            json!({"validationActions": ["Deny", "Warn"]}),
        ),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        status["details"]["causes"].as_array().unwrap().len(),
        2,
        "{status}"
    );
    // A binding naming a policy that does not exist is stored and does nothing.
    let (code, _, _) = create(
        &env,
        BINDINGS,
        binding("orphan.example.com", "missing.example.com", json!({})),
    )
    .await;
    assert_eq!(code, 201);
    assert_eq!(
        create(
            &env,
            CONFIGMAPS,
            configmap("big", json!({"a": "1", "b": "2"}))
        )
        .await
        .0,
        201
    );
    // A runtime error under failurePolicy: Fail denies, naming the expression.
    let erroring = configmap_policy(
        "error.example.com",
        json!({"validations": [{"expression": "object.data.missing == 'x'"}]}),
    );
    assert_eq!(create(&env, POLICIES, erroring).await.0, 201);
    create(
        &env,
        BINDINGS,
        binding("error-binding.example.com", "error.example.com", json!({})),
    )
    .await;
    let (code, _, status) = create(&env, CONFIGMAPS, configmap("c", json!({"a": "1"}))).await;
    assert_eq!(code, 422);
    assert!(status["message"].as_str().unwrap().ends_with("denied request: expression 'object.data.missing == 'x'' resulted in error: no such key: missing"), "{status}");
}

fn crd(name: &str, annotations: Value) -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{name}s.gateway.networking.k8s.io"), "annotations": annotations},
        "spec": {"group": "gateway.networking.k8s.io", "scope": "Namespaced",
            "names": {"plural": format!("{name}s"), "singular": name, "kind": "Thing", "listKind": "ThingList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object"}}}]}})
}

#[tokio::test]
async fn gateway_api_safe_upgrades_refuses_what_it_should() {
    let env = TestEnv::start().await.unwrap();
    let yaml = include_str!("fixtures/gateway-api/gateway.networking.k8s.io_vap_safeupgrades.yaml");
    for (doc, path) in yaml.split("\n---\n").zip([POLICIES, BINDINGS]) {
        let obj: Value = serde_saphyr::from_str(doc).unwrap();
        let (code, _, answer) = create(&env, path, obj).await;
        assert_eq!(code, 201, "{answer}");
    }
    let standard = |v: &str| {
        json!({"gateway.networking.k8s.io/bundle-version": v,
        "gateway.networking.k8s.io/channel": "standard"})
    };
    let (code, _, answer) = create(&env, CRDS, crd("thing", standard("v1.5.0"))).await;
    assert_eq!(code, 201, "{answer}");
    let refused = "customresourcedefinitions.apiextensions.k8s.io \"%s.gateway.networking.k8s.io\" is forbidden: ValidatingAdmissionPolicy 'safe-upgrades.gateway.networking.k8s.io' with binding 'safe-upgrades.gateway.networking.k8s.io' denied request: ";
    let old = "Installing CRDs with version before v1.5.0 is prohibited by default. Uninstall ValidatingAdmissionPolicy safe-upgrades.gateway.networking.k8s.io to install older versions.";
    for (name, annotations) in [
        ("old", standard("v1.2.0")),
        ("zero", standard("v0.8.1")),
        ("bare", json!({})),
    ] {
        let (code, _, status) = create(&env, CRDS, crd(name, annotations)).await;
        assert_eq!(code, 422, "{name}: {status}");
        assert_eq!(
            status["message"],
            format!("{}{old}", refused.replace("%s", &format!("{name}s")))
        );
    }
    // Experimental on top of standard is refused; standard on top of standard is not.
    let path = format!("{CRDS}/things.gateway.networking.k8s.io");
    let (_, _, mut stored) = send(&env, "GET", &path, None).await;
    stored["metadata"]["annotations"]["gateway.networking.k8s.io/channel"] = json!("experimental");
    let (code, _, status) = send(&env, "PUT", &path, Some(stored.clone())).await;
    assert_eq!(code, 422);
    assert!(status["message"].as_str().unwrap().ends_with("denied request: Installing experimental CRDs on top of standard channel CRDs is prohibited by default. Uninstall ValidatingAdmissionPolicy safe-upgrades.gateway.networking.k8s.io to install experimental CRDs on top of standard channel CRDs."), "{status}");
    stored["metadata"]["annotations"]["gateway.networking.k8s.io/channel"] = json!("standard");
    stored["metadata"]["annotations"]["gateway.networking.k8s.io/bundle-version"] = json!("v1.6.0");
    assert_eq!(send(&env, "PUT", &path, Some(stored)).await.0, 200);
    // CRDs of other groups are not its business.
    let mut other = crd("other", json!({}));
    other["metadata"]["name"] = json!("others.example.com");
    other["spec"]["group"] = json!("example.com");
    assert_eq!(create(&env, CRDS, other).await.0, 201);
}

const WEBHOOKS: &str = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations";

/// A webhook on ConfigMap creates with label `t` = `label`, at an address nothing listens on,
/// so a call fails the write with `failurePolicy: Fail`.
fn webhook_config(label: &str, failure: &str, conditions: Value) -> Value {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": format!("{label}.example.com")},
        "webhooks": [{"name": format!("{label}.wh.example.com"),
            "clientConfig": {"url": "https://127.0.0.1:1/validate"},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
            "objectSelector": {"matchLabels": {"t": label}},
            "failurePolicy": failure, "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "matchConditions": conditions}]})
}

fn labelled(name: &str, label: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"t": label}}, "data": data})
}

#[tokio::test]
async fn webhook_match_conditions_decide_the_call() {
    let env = TestEnv::start().await.unwrap();
    let big = json!([{"name": "big", "expression": "has(object.data) && object.data.size() > 1"},
        {"name": "create", "expression": "request.operation == 'CREATE'"}]);
    assert_eq!(
        create(&env, WEBHOOKS, webhook_config("a", "Fail", big))
            .await
            .0,
        201
    );
    // A false condition skips the webhook; all true calls it (and the call fails).
    assert_eq!(
        create(&env, CONFIGMAPS, labelled("small", "a", json!({"x": "1"})))
            .await
            .0,
        201
    );
    let (code, _, status) = create(
        &env,
        CONFIGMAPS,
        labelled("big", "a", json!({"x": "1", "y": "2"})),
    )
    .await;
    assert_eq!(code, 500, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .starts_with("Internal error occurred: failed calling webhook \"a.wh.example.com\""),
        "{status}"
    );
    // An error follows failurePolicy: Fail refuses with upstream's Forbidden, Ignore skips.
    let broken = json!([{"name": "broken", "expression": "object.data.missing == 'x'"}]);
    assert_eq!(
        create(&env, WEBHOOKS, webhook_config("b", "Fail", broken.clone()))
            .await
            .0,
        201
    );
    assert_eq!(
        create(&env, WEBHOOKS, webhook_config("c", "Ignore", broken))
            .await
            .0,
        201
    );
    let (code, _, status) = create(&env, CONFIGMAPS, labelled("b", "b", json!({"x": "1"}))).await;
    assert_eq!(
        (code, &status["reason"]),
        (403, &json!("Forbidden")),
        "{status}"
    );
    assert_eq!(
        status["message"],
        "configmaps \"b\" is forbidden: expression 'object.data.missing == 'x'' resulted in error: no such key: missing"
    );
    assert_eq!(
        create(&env, CONFIGMAPS, labelled("c", "c", json!({"x": "1"})))
            .await
            .0,
        201
    );
}

#[tokio::test]
async fn webhook_match_conditions_are_validated_at_creation() {
    let env = TestEnv::start().await.unwrap();
    let bad = json!([{"name": "a", "expression": "object.data +"}, {"name": "a", "expression": "'x'"},
        {"name": "Not Qualified!", "expression": "true"}, {"name": "p", "expression": "params.x == 1"}]);
    let (code, _, status) = create(&env, WEBHOOKS, webhook_config("bad", "Fail", bad)).await;
    assert_eq!(code, 422);
    let causes: Vec<String> = status["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            format!(
                "{}: {}",
                c["field"].as_str().unwrap(),
                c["message"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(causes.len(), 5, "{causes:#?}");
    assert!(causes[0].starts_with("webhooks[0].matchConditions[0].expression: Invalid value: \"object.data +\": compilation failed: ERROR: <input>:1:14: Syntax error"), "{}", causes[0]);
    assert_eq!(
        causes[1],
        "webhooks[0].matchConditions[1].expression: Invalid value: \"'x'\": must evaluate to bool"
    );
    assert_eq!(
        causes[2],
        "webhooks[0].matchConditions[1].name: Duplicate value: \"a\""
    );
    assert!(causes[3].starts_with("webhooks[0].matchConditions[2].name: Invalid value: \"Not Qualified!\": name part must consist of"), "{}", causes[3]);
    assert!(
        causes[4].contains("undeclared reference to 'params'"),
        "{}",
        causes[4]
    );
    let many: Vec<Value> = (0..65)
        .map(|i| json!({"name": format!("c{i}"), "expression": "true"}))
        .collect();
    let (code, _, status) =
        create(&env, WEBHOOKS, webhook_config("many", "Fail", json!(many))).await;
    assert_eq!(code, 422);
    assert_eq!(
        status["details"]["causes"][0]["message"],
        "Too many: 65: must have at most 64 items"
    );
}

#[tokio::test]
async fn the_server_writes_type_checking_into_the_status() {
    let env = TestEnv::start().await.unwrap();
    let widgets = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object", "properties": {"spec": {"type": "object",
                    "properties": {"replicas": {"type": "integer"}, "name": {"type": "string"}}}}}}}]}});
    assert_eq!(create(&env, CRDS, widgets).await.0, 201);
    let policy = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": ["example.com"], "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": ["widgets"]}]},
            "validations": [
                {"expression": "object.spec.replicas > 1 && has(object.metadata.labels)"},
                {"expression": "object.spec.replica > 1", "messageExpression": "'bad ' + object.spec.nme"}]}});
    let (code, _, created) = create(&env, POLICIES, policy).await;
    assert_eq!(code, 201, "{created}");
    assert!(created.get("status").is_none(), "{created}");
    let path = format!("{POLICIES}/widgets.example.com");
    let (_, _, stored) = send(&env, "GET", &path, None).await;
    assert_eq!(stored["status"]["observedGeneration"], 1, "{stored}");
    let warnings = stored["status"]["typeChecking"]["expressionWarnings"]
        .as_array()
        .unwrap();
    let fields: Vec<&str> = warnings
        .iter()
        .map(|w| w["fieldRef"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        [
            "spec.validations[1].expression",
            "spec.validations[1].messageExpression"
        ]
    );
    for (w, field) in warnings.iter().zip(["replica", "nme"]) {
        let text = w["warning"].as_str().unwrap();
        assert!(
            text.starts_with("example.com/v1, Kind=Widget: ERROR: <input>:1:"),
            "{text}"
        );
        assert!(
            text.contains(&format!("undefined field '{field}'")) && text.ends_with('\n'),
            "{text}"
        );
    }
    // A built-in kind has no schema here: nothing to warn about, the generation observed.
    create(
        &env,
        POLICIES,
        configmap_policy("keys.example.com", json!({})),
    )
    .await;
    let (_, _, stored) = send(&env, "GET", &format!("{POLICIES}/keys.example.com"), None).await;
    assert_eq!(
        stored["status"],
        json!({"observedGeneration": 1, "typeChecking": {}})
    );
}

#[tokio::test]
async fn what_a_policy_and_its_binding_match() {
    let env = TestEnv::start().await.unwrap();
    for (name, labels) in [("team-a", json!({"team": "a"})), ("team-b", json!({}))] {
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}});
        assert_eq!(create(&env, "/api/v1/namespaces", ns).await.0, 201);
    }
    let policy = configmap_policy(
        "scoped.example.com",
        json!({
            "matchConstraints": {
                "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                    "operations": ["CREATE"], "resources": ["configmaps"]}],
                "excludeResourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                    "operations": ["CREATE"], "resources": ["configmaps"], "resourceNames": ["skip-me"]}]},
            "matchConditions": [{"name": "not-skipped",
                "expression": "!has(object.metadata.labels) || !('skip' in object.metadata.labels)"}],
            "validations": [
                {"expression": "!has(object.data) || object.data.size() <= 1", "message": "at most one key"},
                {"expression": "namespaceObject.metadata.labels.team == 'a'", "message": "team a only"}]
        }),
    );
    assert_eq!(create(&env, POLICIES, policy).await.0, 201);
    let b = binding(
        "scoped-binding.example.com",
        "scoped.example.com",
        json!({"matchResources": {"namespaceSelector": {"matchLabels": {"team": "a"}}}}),
    );
    assert_eq!(create(&env, BINDINGS, b).await.0, 201);
    let in_ns = |ns: &str| format!("/api/v1/namespaces/{ns}/configmaps");
    let big = json!({"x": "1", "y": "2"});
    let (code, _, status) = create(&env, &in_ns("team-a"), configmap("big", big.clone())).await;
    assert_eq!(code, 422);
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .ends_with("denied request: at most one key"),
        "{status}"
    );
    // Excluded by name, skipped by a false match condition, outside the binding's namespaces.
    assert_eq!(
        create(&env, &in_ns("team-a"), configmap("skip-me", big.clone()))
            .await
            .0,
        201
    );
    let mut labelled = configmap("labelled", big.clone());
    labelled["metadata"]["labels"] = json!({"skip": "yes"});
    assert_eq!(create(&env, &in_ns("team-a"), labelled).await.0, 201);
    assert_eq!(
        create(&env, &in_ns("team-b"), configmap("big", big.clone()))
            .await
            .0,
        201
    );

    // failurePolicy: Ignore lets an erroring policy through; params not found with Allow too.
    let ignore = configmap_policy(
        "ignore.example.com",
        json!({"failurePolicy": "Ignore",
        "validations": [{"expression": "object.data.missing == 'x'"}]}),
    );
    assert_eq!(create(&env, POLICIES, ignore).await.0, 201);
    let b = binding(
        "ignore-binding.example.com",
        "ignore.example.com",
        json!({}),
    );
    assert_eq!(create(&env, BINDINGS, b).await.0, 201);
    let mut allow = configmap_policy(
        "allow.example.com",
        json!({"paramKind": {"apiVersion": "v1", "kind": "Secret"},
        "validations": [{"expression": "false"}]}),
    );
    allow["spec"]["matchConstraints"]["resourceRules"][0]["resources"] = json!(["configmaps"]);
    assert_eq!(create(&env, POLICIES, allow).await.0, 201);
    let b = binding(
        "allow-binding.example.com",
        "allow.example.com",
        json!({"paramRef": {
        "selector": {"matchLabels": {"role": "limit"}}, "parameterNotFoundAction": "Allow"}}),
    );
    assert_eq!(create(&env, BINDINGS, b).await.0, 201);
    assert_eq!(
        create(
            &env,
            &in_ns("team-b"),
            configmap("small", json!({"x": "1"}))
        )
        .await
        .0,
        201
    );
    // Once a Secret the selector picks exists, the policy runs with it as params, and refuses.
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "limit", "labels": {"role": "limit"}}});
    assert_eq!(
        create(&env, "/api/v1/namespaces/team-b/secrets", secret)
            .await
            .0,
        201
    );
    let (code, _, status) = create(
        &env,
        &in_ns("team-b"),
        configmap("later", json!({"x": "1"})),
    )
    .await;
    assert_eq!(code, 422);
    assert!(status["message"].as_str().unwrap().contains("'allow.example.com' with binding 'allow-binding.example.com' denied request: failed expression: false"), "{status}");
}

#[tokio::test]
async fn policies_run_before_the_validating_webhooks() {
    // kube-apiserver's plugin order puts ValidatingAdmissionPolicy before
    // ValidatingAdmissionWebhook: a policy's denial is the answer, the webhook (here one that
    // cannot be reached, under failurePolicy: Fail) is never called.
    let env = TestEnv::start().await.unwrap();
    let always = json!([{"name": "always", "expression": "true"}]);
    assert_eq!(
        create(&env, WEBHOOKS, webhook_config("a", "Fail", always))
            .await
            .0,
        201
    );
    create(
        &env,
        POLICIES,
        configmap_policy("keys.example.com", json!({})),
    )
    .await;
    let b = binding("keys-binding.example.com", "keys.example.com", json!({}));
    assert_eq!(create(&env, BINDINGS, b).await.0, 201);
    let (code, _, status) = create(
        &env,
        CONFIGMAPS,
        labelled("big", "a", json!({"x": "1", "y": "2"})),
    )
    .await;
    assert_eq!(code, 422, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .ends_with("denied request: at most one key"),
        "{status}"
    );
    let (code, _, _) = create(&env, CONFIGMAPS, labelled("small", "a", json!({"x": "1"}))).await;
    assert_eq!(code, 500);
}

#[tokio::test]
async fn audit_annotations_are_evaluated_and_their_errors_follow_the_failure_policy() {
    let env = TestEnv::start().await.unwrap();
    let annotations = json!({"auditAnnotations": [
        {"key": "first-key", "valueExpression": "'a=' + object.data.a"}]});
    let mut ignored = annotations.clone();
    ignored["failurePolicy"] = json!("Ignore");
    for (policy, extra) in [
        ("audit.example.com", annotations),
        ("lenient.example.com", ignored),
    ] {
        let (code, _, p) = create(&env, POLICIES, configmap_policy(policy, extra)).await;
        assert_eq!(code, 201, "{p}");
        // `Audit` only: a failed validation would do nothing, an annotation's error still denies.
        let bound = binding(
            &format!("{policy}-binding"),
            policy,
            json!({"validationActions": ["Audit"]}),
        );
        assert_eq!(create(&env, BINDINGS, bound).await.0, 201);
    }
    let (code, _, v) = create(&env, CONFIGMAPS, configmap("with-a", json!({"a": "1"}))).await;
    assert_eq!(code, 201, "{v}");
    let (code, _, status) =
        create(&env, CONFIGMAPS, configmap("without-a", json!({"b": "2"}))).await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["message"],
        "configmaps \"without-a\" is forbidden: ValidatingAdmissionPolicy 'audit.example.com' with binding 'audit.example.com-binding' denied request: expression ''a=' + object.data.a' resulted in error: no such key: a"
    );
    // Under `failurePolicy: Ignore` the same error admits.
    let path = format!("{BINDINGS}/audit.example.com-binding");
    assert_eq!(send(&env, "DELETE", &path, None).await.0, 200);
    let (code, _, v) = create(&env, CONFIGMAPS, configmap("without-a", json!({"b": "2"}))).await;
    assert_eq!(code, 201, "{v}");
}

#[tokio::test]
async fn no_estimated_cost_is_checked_at_creation_the_runtime_limit_stops() {
    let env = TestEnv::start().await.unwrap();
    // Over unbounded maps its estimate is far past any budget; upstream's policy validation
    // only compiles, so it is stored, and a write costs what the write's data makes it cost.
    let cubic = "object.data.all(a, object.data.all(b, object.data.all(c, a != '' || b != c)))";
    let extra = json!({"validations": [{"expression": cubic}]});
    let (code, _, p) = create(&env, POLICIES, configmap_policy("cubic.example.com", extra)).await;
    assert_eq!(code, 201, "{p}");
    let bound = binding("cubic-binding.example.com", "cubic.example.com", json!({}));
    assert_eq!(create(&env, BINDINGS, bound).await.0, 201);
    let (code, _, v) = create(
        &env,
        CONFIGMAPS,
        configmap("few", json!({"a": "1", "b": "2"})),
    )
    .await;
    assert_eq!(code, 201, "{v}");
    let many: serde_json::Map<String, Value> =
        (0..120).map(|i| (format!("k{i}"), json!("v"))).collect();
    let (code, _, status) = create(&env, CONFIGMAPS, configmap("many", Value::Object(many))).await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["message"],
        format!(
            "configmaps \"many\" is forbidden: ValidatingAdmissionPolicy 'cubic.example.com' with binding 'cubic-binding.example.com' denied request: expression '{cubic}' resulted in error: operation cancelled: actual cost limit exceeded"
        )
    );
}

/// Policies are compiled once per stored version: a changed policy is what the next write sees.
#[tokio::test]
async fn a_changed_policy_is_enforced_from_the_next_write() {
    let env = TestEnv::start().await.unwrap();
    let (code, _, created) = create(
        &env,
        POLICIES,
        configmap_policy("keys.example.com", json!({})),
    )
    .await;
    assert_eq!(code, 201, "{created}");
    let binding = binding("keys-binding.example.com", "keys.example.com", json!({}));
    assert_eq!(create(&env, BINDINGS, binding).await.0, 201);
    let two = |name: &str| configmap(name, json!({"a": "1", "b": "2"}));
    assert_eq!(create(&env, CONFIGMAPS, two("first")).await.0, 422);
    // Read back: the server's status write (typeChecking) moved its resourceVersion on.
    let (_, _, mut policy) = send(&env, "GET", &format!("{POLICIES}/keys.example.com"), None).await;
    policy["spec"]["validations"][0]["expression"] =
        json!("!has(object.data) || object.data.size() <= 2");
    let (code, _, replaced) = send(
        &env,
        "PUT",
        &format!("{POLICIES}/keys.example.com"),
        Some(policy),
    )
    .await;
    assert_eq!(code, 200, "{replaced}");
    assert_eq!(create(&env, CONFIGMAPS, two("second")).await.0, 201);
}
