//! Hostile and careless input, over HTTP with a real client: each answer is kube-apiserver's and
//! loses nothing (docs/reliability.md, "Hostile input"). The binary's allocator counts what it
//! holds and refuses past 1 GiB, so a regression in a memory bound fails here instead of taking
//! the machine down; `peak_during` measures one request's high-water mark.

mod support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube_testenv::TestEnv;
use serde_json::{Value, json};

const LIMIT: usize = 1 << 30;
static HELD: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, refusing (so the process aborts) once the binary holds `LIMIT`.
struct Bounded;

unsafe impl GlobalAlloc for Bounded {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let now = HELD.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        if now > LIMIT {
            HELD.fetch_sub(layout.size(), Ordering::Relaxed);
            return std::ptr::null_mut();
        }
        PEAK.fetch_max(now, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        HELD.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Bounded = Bounded;

/// How far above its starting point the binary's memory went while `f` ran (other tests run
/// alongside, so compare with a slack of tens of MiB, not bytes).
async fn peak_during<T>(f: impl std::future::Future<Output = T>) -> (T, usize) {
    let start = HELD.load(Ordering::Relaxed);
    PEAK.store(start, Ordering::Relaxed);
    let out = f.await;
    (out, PEAK.load(Ordering::Relaxed).saturating_sub(start))
}

const MIB: usize = 1 << 20;

/// Sends a raw request; the status and the body as JSON (`null` when it is not JSON).
async fn send(env: &TestEnv, method: &str, path: &str, ct: &str, body: Vec<u8>) -> (u16, Value) {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", ct)
        .body(kube::client::Body::from(body))
        .unwrap();
    let resp = env.client().send(req).await.unwrap();
    let code = resp.status().as_u16();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (code, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

fn message(v: &Value) -> &str {
    v["message"].as_str().unwrap_or("")
}

async fn configmap(env: &TestEnv, name: &str, labels: Value, data: Value) {
    let cm = json!({"metadata": {"name": name, "labels": labels}, "data": data});
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    api.create(&PostParams::default(), &serde_json::from_value(cm).unwrap())
        .await
        .unwrap();
}

const CM: &str = "/api/v1/namespaces/default/configmaps";

/// Item 1: a 1.2 KB JSON patch of 30 `copy` operations, each doubling the object, would need
/// 23 GB; it is a 422 after 3 MiB of copies, and the object is unchanged. 10,001 operations are
/// a 413.
#[tokio::test]
async fn json_patch_copies_are_bounded_by_the_bytes_they_add() {
    let env = TestEnv::start().await.unwrap();
    configmap(&env, "c", json!({}), json!({"k": "x".repeat(1000)})).await;
    // Each copy copies the whole object into it: from the root.
    let ops: Vec<Value> = std::iter::once(json!({"op": "add", "path": "/spare", "value": {}}))
        .chain((0..30).map(|i| json!({"op": "copy", "from": "", "path": format!("/spare/c{i}")})))
        .collect();
    let body = serde_json::to_vec(&ops).unwrap();
    assert!(body.len() < 2000, "{}", body.len());
    let path = format!("{CM}/c");
    let ct = "application/json-patch+json";
    let ((code, status), peak) = peak_during(send(&env, "PATCH", &path, ct, body)).await;
    assert_eq!(code, 422, "{status}");
    assert!(
        message(&status)
            .starts_with("Unable to complete the copy, the accumulated size increase of copy is "),
        "{status}"
    );
    assert!(message(&status).ends_with(", exceeding the limit 3145728"));
    assert!(
        peak < 256 * MIB,
        "a bounded patch peaked at {} MiB",
        peak / MIB
    );
    let many: Vec<Value> = (0..10_001)
        .map(|_| json!({"op": "test", "path": "/data/k", "value": "x"}))
        .collect();
    let (code, status) = send(&env, "PATCH", &path, ct, serde_json::to_vec(&many).unwrap()).await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (413, Some("RequestEntityTooLarge"))
    );
    assert_eq!(
        message(&status),
        "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001"
    );
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    let kept = api.get("c").await.unwrap();
    assert_eq!(kept.data.unwrap()["k"].len(), 1000);
    assert!(kept.metadata.annotations.is_none());
}

/// Item 2: a label selector that does not parse is a 400 and selects nothing: before, `!!!`
/// deleted every ConfigMap.
#[tokio::test]
async fn malformed_label_selectors_are_400_and_delete_nothing() {
    let env = TestEnv::start().await.unwrap();
    configmap(&env, "keep", json!({"keep": "yes"}), json!({})).await;
    configmap(&env, "other", json!({}), json!({})).await;
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    let cases = [
        (
            "!!!",
            "unable to parse requirement: found '!', expected: identifier",
        ),
        (
            "!",
            "unable to parse requirement: found '', expected: identifier",
        ),
        (
            "!!",
            "unable to parse requirement: found '!', expected: identifier",
        ),
        (
            "!=",
            "found '!=', expected: !, identifier, or 'end of string'",
        ),
        (
            ",",
            "found ',', expected: !, identifier, or 'end of string'",
        ),
        (
            "keep!==yes",
            "unable to parse requirement: found '=', expected: identifier",
        ),
    ];
    for (sel, want) in cases {
        let lp = ListParams::default().labels(sel);
        let err = api
            .delete_collection(&DeleteParams::default(), &lp)
            .await
            .unwrap_err();
        let status = support::api_err(err);
        assert_eq!(
            (status.code, status.reason.as_str()),
            (400, "BadRequest"),
            "{sel}"
        );
        assert_eq!(status.message, want, "{sel}");
        let err = api.list(&lp).await.unwrap_err();
        assert_eq!(support::api_err(err).message, want, "{sel}");
    }
    assert_eq!(
        api.list(&ListParams::default()).await.unwrap().items.len(),
        2
    );
}

/// Item 6: `timeoutSeconds` that is not an int64 is upstream's 400 (it used to panic the watch
/// on `18446744073709551615` and ignore `abc`); a huge int64 is a watch with no practical end, a
/// negative one ends at once.
#[tokio::test]
async fn watch_timeouts_are_parsed_as_upstream_parses_them() {
    let env = TestEnv::start().await.unwrap();
    let watch = |t: &str| format!("{CM}?watch=1&timeoutSeconds={t}");
    for (t, why) in [
        ("18446744073709551615", "value out of range"),
        ("abc", "invalid syntax"),
        ("1.5", "invalid syntax"),
    ] {
        let (code, status) = send(&env, "GET", &watch(t), "", vec![]).await;
        assert_eq!(code, 400, "{t}: {status}");
        assert_eq!(
            message(&status),
            format!("strconv.ParseInt: parsing \"{t}\": {why}")
        );
    }
    let req = http::Request::get(watch("9223372036854775807"))
        .body(kube::client::Body::empty())
        .unwrap();
    let resp = env.client().send(req).await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    drop(resp);
    // Ends at once: the whole body arrives (the test would hang otherwise).
    let (code, _) = send(&env, "GET", &watch("-5"), "", vec![]).await;
    assert_eq!(code, 200);
    configmap(&env, "after", json!({}), json!({})).await;
}

/// Item 4: a 50 MB body is refused with 413 after 3 MiB, streamed over a raw connection so the
/// client holds none of it: the server never buffers more than the limit. An object over etcd's
/// 1.5 MiB is etcd's own 500, and nothing is stored.
#[tokio::test]
async fn request_bodies_and_objects_are_bounded() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let env = TestEnv::start().await.unwrap();
    let total = 50 * MIB;
    let (head, peak) = peak_during(async {
        let stream = tokio::net::TcpStream::connect(env.addr()).await.unwrap();
        let (mut rd, mut wr) = stream.into_split();
        let writer = tokio::spawn(async move {
            let head = format!(
                "POST {CM} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {total}\r\n\r\n"
            );
            wr.write_all(head.as_bytes()).await?;
            let chunk = vec![b' '; 64 * 1024];
            for _ in 0..total / chunk.len() {
                wr.write_all(&chunk).await?;
            }
            Ok::<_, std::io::Error>(())
        });
        let mut got = vec![0u8; 4096];
        let n = rd.read(&mut got).await.unwrap();
        writer.abort();
        String::from_utf8_lossy(&got[..n]).into_owned()
    })
    .await;
    assert!(head.starts_with("HTTP/1.1 413"), "{head}");
    assert!(
        head.contains("Request entity too large: limit is 3145728"),
        "{head}"
    );
    assert!(
        peak < 32 * MIB,
        "a refused body peaked at {} MiB",
        peak / MIB
    );
    let big = json!({"metadata": {"name": "big"}, "data": {"k": "x".repeat(2 * MIB)}});
    let (code, status) = send(
        &env,
        "POST",
        CM,
        "application/json",
        serde_json::to_vec(&big).unwrap(),
    )
    .await;
    assert_eq!(
        (code, message(&status)),
        (500, "etcdserver: request is too large")
    );
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    assert!(api.get_opt("big").await.unwrap().is_none());
}

/// Item 3: with RBAC on, a user allowed only to create roles and bindings can neither grant
/// itself cluster-admin nor write a `*` Role; with the `bind` verb on cluster-admin it can bind.
#[tokio::test]
async fn rbac_writes_cannot_escalate() {
    let env = TestEnv::builder()
        .authorization(true)
        .static_token("bob-token", "bob", "", &[])
        .start()
        .await
        .unwrap();
    let admin = env.client();
    let post = |client: kube::Client, path: &str, body: Value| {
        let req = http::Request::post(path)
            .header("content-type", "application/json")
            .body(kube::client::Body::from(serde_json::to_vec(&body).unwrap()))
            .unwrap();
        async move {
            let resp = client.send(req).await.unwrap();
            let code = resp.status().as_u16();
            let body = resp.into_body().collect().await.unwrap().to_bytes();
            (
                code,
                serde_json::from_slice::<Value>(&body).unwrap_or(Value::Null),
            )
        }
    };
    let rbac = "/apis/rbac.authorization.k8s.io/v1";
    let writer = json!({"metadata": {"name": "rbac-writer"}, "rules": [{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": ["create", "get", "list"]}]});
    assert_eq!(
        post(admin.clone(), &format!("{rbac}/clusterroles"), writer)
            .await
            .0,
        201
    );
    let bind = |name: &str, role: &str| json!({"metadata": {"name": name}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}, "subjects": [{"kind": "User", "name": "bob"}]});
    let crb = format!("{rbac}/clusterrolebindings");
    assert_eq!(
        post(admin.clone(), &crb, bind("bob-writer", "rbac-writer"))
            .await
            .0,
        201
    );
    let bob = env.client_with_token("bob-token");
    let rbs = format!("{rbac}/namespaces/default/rolebindings");
    let (code, status) = post(bob.clone(), &rbs, bind("mine", "cluster-admin")).await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (403, Some("Forbidden")),
        "{status}"
    );
    let held = " is attempting to grant RBAC permissions not currently held:\n";
    assert_eq!(
        message(&status),
        format!(
            "rolebindings.rbac.authorization.k8s.io \"mine\" is forbidden: user \"bob\" (groups=[\"system:authenticated\"]){held}{{APIGroups:[\"*\"], Resources:[\"*\"], Verbs:[\"*\"]}}\n{{NonResourceURLs:[\"*\"], Verbs:[\"*\"]}}"
        )
    );
    let all = json!({"metadata": {"name": "all"}, "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]});
    let roles = format!("{rbac}/namespaces/default/roles");
    let (code, status) = post(bob.clone(), &roles, all).await;
    assert_eq!(code, 403, "{status}");
    assert!(message(&status).ends_with(&format!(
        "{held}{{APIGroups:[\"*\"], Resources:[\"*\"], Verbs:[\"*\"]}}"
    )));
    // What bob holds it may grant; with `bind` on cluster-admin it may bind it.
    let own = json!({"metadata": {"name": "own"}, "rules": [{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"], "verbs": ["get"]}]});
    assert_eq!(post(bob.clone(), &roles, own).await.0, 201);
    let binder = json!({"metadata": {"name": "binder"}, "rules": [{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "resourceNames": ["cluster-admin"], "verbs": ["bind"]}]});
    assert_eq!(
        post(admin.clone(), &format!("{rbac}/clusterroles"), binder)
            .await
            .0,
        201
    );
    assert_eq!(post(admin, &crb, bind("bob-binder", "binder")).await.0, 201);
    assert_eq!(post(bob, &rbs, bind("mine", "cluster-admin")).await.0, 201);
}

/// Item 5: a body whose fields have the wrong JSON type, or that is another kind or version,
/// is upstream's 400 decode error, and Node informers keep working.
#[tokio::test]
async fn bodies_are_decoded_against_their_types() {
    let env = TestEnv::start().await.unwrap();
    let nodes = "/api/v1/nodes";
    let ct = "application/json";
    let cases = [
        (
            nodes,
            json!({"kind": "Node", "apiVersion": "v1", "metadata": {"name": "n", "labels": {"a": 1}}}),
            "Node in version \"v1\" cannot be handled as a Node: json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type string",
        ),
        (
            nodes,
            json!({"kind": "Node", "apiVersion": "v1", "metadata": {"name": "n"}, "spec": {"providerID": 123}}),
            "Node in version \"v1\" cannot be handled as a Node: json: cannot unmarshal number into Go struct field NodeSpec.spec.providerID of type string",
        ),
        (
            CM,
            json!({"kind": "Secret", "apiVersion": "v1", "metadata": {"name": "s"}}),
            "Secret in version \"v1\" cannot be handled as a ConfigMap: converting (v1.Secret) to (core.ConfigMap): unknown conversion",
        ),
        (
            CM,
            json!({"kind": "ConfigMap", "apiVersion": "v9", "metadata": {"name": "c"}}),
            "ConfigMap in version \"v9\" cannot be handled as a ConfigMap: no kind \"ConfigMap\" is registered for version \"v9\" in scheme \"k8s.io/kubernetes/pkg/api/legacyscheme/scheme.go:30\"",
        ),
    ];
    for (path, body, want) in cases {
        let (code, status) = send(&env, "POST", path, ct, serde_json::to_vec(&body).unwrap()).await;
        assert_eq!((code, message(&status)), (400, want));
    }
    let node = json!({"metadata": {"name": "n"}});
    assert_eq!(
        send(&env, "POST", nodes, ct, serde_json::to_vec(&node).unwrap())
            .await
            .0,
        201
    );
    let merge = "application/merge-patch+json";
    let bad = json!({"spec": {"providerID": 123}});
    let (code, status) = send(
        &env,
        "PATCH",
        "/api/v1/nodes/n",
        merge,
        serde_json::to_vec(&bad).unwrap(),
    )
    .await;
    assert_eq!(
        (code, message(&status)),
        (
            400,
            "json: cannot unmarshal number into Go struct field NodeSpec.spec.providerID of type string"
        )
    );
    let api: Api<k8s_openapi::api::core::v1::Node> = Api::all(env.client());
    assert_eq!(
        api.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );
}

/// Item 7: the smaller ones, each as upstream answers it.
#[tokio::test]
async fn smaller_hostile_inputs_get_upstreams_answers() {
    let env = TestEnv::start().await.unwrap();
    let ct = "application/json";
    let post = |path: &'static str, body: Value| {
        let env = &env;
        async move { send(env, "POST", path, ct, serde_json::to_vec(&body).unwrap()).await }
    };
    let big = json!({"metadata": {"name": "big", "annotations": {"a": "x".repeat(300 * 1024)}}});
    let (code, status) = post(CM, big).await;
    assert_eq!(
        (code, message(&status)),
        (
            422,
            "ConfigMap \"big\" is invalid: metadata.annotations: Too long: must have at most 262144 bytes"
        )
    );
    let svc = json!({"metadata": {"name": "s"}, "spec": {"ports": [{"name": "a", "port": 80}, {"name": "b", "port": 80, "protocol": "TCP"}]}});
    let (code, status) = post("/api/v1/namespaces/default/services", svc).await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        message(&status),
        "Service \"s\" is invalid: spec.ports[1]: Duplicate value: core.ServicePort{Name:\"\", Protocol:\"TCP\", AppProtocol:(*string)(nil), Port:80, TargetPort:intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}, NodePort:0}"
    );
    let (code, status) = send(&env, "GET", &format!("{CM}?limit=abc"), "", vec![]).await;
    assert_eq!(
        (code, message(&status)),
        (400, "strconv.ParseInt: parsing \"abc\": invalid syntax")
    );
    let bogus = format!("{CM}?resourceVersion=0&resourceVersionMatch=Bogus");
    let (code, status) = send(&env, "GET", &bogus, "", vec![]).await;
    assert_eq!(
        (code, message(&status)),
        (
            422,
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Unsupported value: \"Bogus\": supported values: \"Exact\", \"NotOlderThan\", \"\""
        )
    );
    // YAML bodies are accepted for writes.
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-yaml\ndata:\n  k: v\n";
    let (code, created) = send(&env, "POST", CM, "application/yaml", yaml.into()).await;
    assert_eq!((code, created["data"]["k"].as_str()), (201, Some("v")));
    // A patch may change neither the name nor the uid.
    let merge = "application/merge-patch+json";
    let path = format!("{CM}/from-yaml");
    let rename = json!({"metadata": {"name": "other"}});
    let (code, status) = send(
        &env,
        "PATCH",
        &path,
        merge,
        serde_json::to_vec(&rename).unwrap(),
    )
    .await;
    assert_eq!(
        (code, message(&status)),
        (
            400,
            "the name of the object (other) does not match the name on the URL (from-yaml)"
        )
    );
    let uid = created["metadata"]["uid"].as_str().unwrap();
    let reuid = json!({"metadata": {"uid": "00000000-0000-0000-0000-000000000000"}});
    let (code, status) = send(
        &env,
        "PATCH",
        &path,
        merge,
        serde_json::to_vec(&reuid).unwrap(),
    )
    .await;
    assert_eq!(code, 409, "{status}");
    assert_eq!(
        message(&status),
        format!(
            "Operation cannot be fulfilled on configmaps \"from-yaml\": Precondition failed: UID in precondition: 00000000-0000-0000-0000-000000000000, UID in object meta: {uid}"
        )
    );
}

/// A history bounded only by count would keep 10,000 events of 1.5 MiB objects (15 GiB); it is
/// bounded in bytes too, and a watch from before the dropped events gets 410 Gone, as after a
/// real server's compaction.
#[tokio::test]
async fn watch_history_is_bounded_in_bytes() {
    use futures::{StreamExt, TryStreamExt};
    use kube::api::{WatchEvent, WatchParams};
    let env = TestEnv::builder().history_bytes(MIB).start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    let start = env.resource_version();
    // 20 objects of 100 KiB: 2 MiB of history, twice the bound, far from the 10,000 events.
    for i in 0..20 {
        configmap(
            &env,
            &format!("big{i}"),
            json!({}),
            json!({"k": "x".repeat(100 << 10)}),
        )
        .await;
    }
    let mut old = api
        .watch(&WatchParams::default(), &start.to_string())
        .await
        .unwrap()
        .boxed();
    assert!(matches!(old.try_next().await.unwrap(), Some(WatchEvent::Error(e)) if e.code == 410));
    // The newest events (well under the bound) are still there to resume across.
    let recent = (env.resource_version() - 5).to_string();
    let mut ok = api
        .watch(&WatchParams::default(), &recent)
        .await
        .unwrap()
        .boxed();
    for i in 15..20 {
        match ok.try_next().await.unwrap() {
            Some(WatchEvent::Added(cm)) => assert_eq!(cm.metadata.name.unwrap(), format!("big{i}")),
            other => panic!("{other:?}"),
        }
    }
}
