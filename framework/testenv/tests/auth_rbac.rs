//! RBAC enforcement end to end over HTTP (`Builder::authorization(true)`): roles and bindings
//! created through the API grant exactly their rules (verbs, subresources, resourceNames,
//! nonResourceURLs, namespaces), refusals carry upstream's 403 wording, access reviews answer by
//! the same evaluator with upstream's reasons, and the bootstrap policy is in place.

mod auth_support;

use auth_support::send;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchParams};
use kube_testenv::TestEnv;
use serde_json::{Value, json};

async fn enforcing() -> TestEnv {
    TestEnv::builder()
        .authorization(true)
        .start()
        .await
        .unwrap()
}

async fn create<K>(api: &Api<K>, v: Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(v).unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap();
}

/// Creates the RoleBinding `ns/name` of `role` (its kind and name) to the one `subject`.
async fn bind(admin: &kube::Client, ns: &str, name: &str, role: (&str, &str), subject: Value) {
    create(
        &Api::<RoleBinding>::namespaced(admin.clone(), ns),
        json!({"metadata": {"name": name},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role.0, "name": role.1},
               "subjects": [subject]}),
    )
    .await;
}

fn forbidden(err: kube::Error) -> String {
    match err {
        kube::Error::Api(s) if s.code == 403 && s.reason == "Forbidden" => s.message,
        other => panic!("want 403 Forbidden, got {other:?}"),
    }
}

/// A SubjectAccessReview for `user` (a ServiceAccount's name and groups) and its status.
async fn sar(env: &TestEnv, sa: (&str, &str), attrs: Value) -> Value {
    let (ns, name) = sa;
    let mut spec = json!({
        "user": format!("system:serviceaccount:{ns}:{name}"),
        "groups": ["system:serviceaccounts", format!("system:serviceaccounts:{ns}"), "system:authenticated"],
    });
    let key = if attrs.get("path").is_some() {
        "nonResourceAttributes"
    } else {
        "resourceAttributes"
    };
    spec[key] = attrs;
    let body = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec});
    let (code, v) = send(
        env,
        Some(env.admin_token()),
        "POST",
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        Some(body),
    )
    .await;
    assert_eq!(code, 201, "{v}");
    v["status"].clone()
}

#[tokio::test]
async fn cluster_roles_grant_their_verbs_and_subresources() {
    let env = enforcing().await;
    let token = env.token_for_service_account("default", "reader").unwrap();
    let as_sa = env.client_with_token(&token);
    let nodes: Api<Node> = Api::all(as_sa.clone());
    let msg = forbidden(nodes.list(&Default::default()).await.unwrap_err());
    assert_eq!(
        msg,
        "nodes is forbidden: User \"system:serviceaccount:default:reader\" cannot list resource \"nodes\" in API group \"\" at the cluster scope"
    );
    let admin = env.client();
    create(
        &Api::<Node>::all(admin.clone()),
        json!({"metadata": {"name": "n1"}}),
    )
    .await;
    create(
        &Api::<ClusterRole>::all(admin.clone()),
        json!({"metadata": {"name": "node-reader"}, "rules": [
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]}
        ]}),
    )
    .await;
    create(
        &Api::<ClusterRoleBinding>::all(admin.clone()),
        json!({"metadata": {"name": "read-nodes"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "node-reader"},
               "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": "default"}]}),
    )
    .await;
    assert_eq!(
        nodes.list(&Default::default()).await.unwrap().items.len(),
        1
    );
    nodes.get("n1").await.unwrap();
    // A watch is authorized before its stream starts: the response head is the answer.
    let _stream = nodes.watch(&WatchParams::default(), "0").await.unwrap();
    let patch =
        Patch::Merge(json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}));
    nodes
        .patch_status("n1", &PatchParams::default(), &patch)
        .await
        .unwrap();
    let msg = forbidden(
        nodes
            .patch(
                "n1",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(
        msg,
        "nodes \"n1\" is forbidden: User \"system:serviceaccount:default:reader\" cannot patch resource \"nodes\" in API group \"\" at the cluster scope"
    );
    let status = sar(
        &env,
        ("default", "reader"),
        json!({"verb": "list", "resource": "nodes"}),
    )
    .await;
    assert_eq!(
        status,
        json!({"allowed": true, "reason": "RBAC: allowed by ClusterRoleBinding \"read-nodes\" of ClusterRole \"node-reader\" to ServiceAccount \"reader/default\""})
    );
    let status = sar(
        &env,
        ("default", "reader"),
        json!({"verb": "delete", "resource": "nodes"}),
    )
    .await;
    assert_eq!(status, json!({"allowed": false}));
}

#[tokio::test]
async fn roles_grant_in_their_namespace_and_by_resource_name() {
    let env = enforcing().await;
    let token = env.token_for_service_account("default", "app").unwrap();
    let admin = env.client();
    let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), "default");
    for name in ["a", "b"] {
        create(&cms, json!({"metadata": {"name": name}})).await;
    }
    create(
        &Api::<Role>::namespaced(admin.clone(), "default"),
        json!({"metadata": {"name": "cm-a"}, "rules": [
            {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"], "verbs": ["get", "list", "watch"]}
        ]}),
    )
    .await;
    // A subject ServiceAccount without a namespace is the binding's namespace's.
    bind(
        &admin,
        "default",
        "app-cm-a",
        ("Role", "cm-a"),
        json!({"kind": "ServiceAccount", "name": "app"}),
    )
    .await;
    let mine: Api<ConfigMap> = Api::namespaced(env.client_with_token(&token), "default");
    mine.get("a").await.unwrap();
    let msg = forbidden(mine.get("b").await.unwrap_err());
    assert_eq!(
        msg,
        "configmaps \"b\" is forbidden: User \"system:serviceaccount:default:app\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"default\""
    );
    forbidden(mine.list(&Default::default()).await.unwrap_err());
    // A list or watch pinned to one name by a field selector is authorized for that name, as a
    // single-object informer (e.g. on extension-apiserver-authentication) needs.
    let pinned = ListParams::default().fields("metadata.name=a");
    assert_eq!(mine.list(&pinned).await.unwrap().items.len(), 1);
    let _stream = mine
        .watch(&WatchParams::default().fields("metadata.name=a"), "0")
        .await
        .unwrap();
    forbidden(
        mine.list(&ListParams::default().fields("metadata.name=b"))
            .await
            .unwrap_err(),
    );
    let status = sar(
        &env,
        ("default", "app"),
        json!({"verb": "get", "resource": "configmaps", "namespace": "default", "name": "a"}),
    )
    .await;
    assert_eq!(
        status["reason"],
        "RBAC: allowed by RoleBinding \"app-cm-a/default\" of Role \"cm-a\" to ServiceAccount \"app/default\""
    );
    // A RoleBinding of a ClusterRole grants it in the binding's namespace only.
    create(
        &Api::<ClusterRole>::all(admin.clone()),
        json!({"metadata": {"name": "lease-editor"}, "rules": [
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["*"]}
        ]}),
    )
    .await;
    bind(
        &admin,
        "kube-system",
        "app-leases",
        ("ClusterRole", "lease-editor"),
        json!({"kind": "ServiceAccount", "name": "app", "namespace": "default"}),
    )
    .await;
    let leases = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases";
    let (code, _) = send(&env, Some(&token), "GET", leases, None).await;
    assert_eq!(code, 200);
    let (code, v) = send(
        &env,
        Some(&token),
        "GET",
        "/apis/coordination.k8s.io/v1/namespaces/default/leases",
        None,
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(
        v["details"],
        json!({"group": "coordination.k8s.io", "kind": "leases"})
    );
    // A binding to a missing role says so in the refusal, as upstream's RBAC reason does.
    bind(
        &admin,
        "default",
        "dangling",
        ("Role", "ghost"),
        json!({"kind": "ServiceAccount", "name": "app"}),
    )
    .await;
    let msg = forbidden(mine.get("b").await.unwrap_err());
    assert!(
        msg.ends_with(
            "in the namespace \"default\": RBAC: role.rbac.authorization.k8s.io \"ghost\" not found"
        ),
        "{msg}"
    );
}

#[tokio::test]
async fn non_resource_urls_and_the_bootstrap_policy() {
    let env = enforcing().await;
    let token = env
        .token_for_service_account("kube-system", "cloud-controller-manager")
        .unwrap();
    let sa = ("kube-system", "cloud-controller-manager");
    let metrics = json!({"path": "/metrics", "verb": "get"});
    assert_eq!(
        sar(&env, sa, metrics.clone()).await,
        json!({"allowed": false})
    );
    // Anonymous callers see the public info paths and nothing else.
    let (code, _) = send(&env, None, "GET", "/healthz", None).await;
    assert_eq!(code, 200);
    let (code, v) = send(&env, None, "GET", "/api", None).await;
    assert_eq!(code, 403);
    assert_eq!(
        v["message"],
        "forbidden: User \"system:anonymous\" cannot get path \"/api\""
    );
    // Authenticated callers may discover the API and ask what they may do.
    let (code, _) = send(&env, Some(&token), "GET", "/apis", None).await;
    assert_eq!(code, 200);
    let ssar = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": "create", "resource": "tokenreviews", "group": "authentication.k8s.io"}}});
    let path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
    let (code, v) = send(&env, Some(&token), "POST", path, Some(ssar.clone())).await;
    assert_eq!((code, &v["status"]), (201, &json!({"allowed": false})));
    let tokenreview = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": "x"}});
    let reviews = "/apis/authentication.k8s.io/v1/tokenreviews";
    let (code, _) = send(
        &env,
        Some(&token),
        "POST",
        reviews,
        Some(tokenreview.clone()),
    )
    .await;
    assert_eq!(code, 403);

    // system:auth-delegator lets a delegating server review tokens and access.
    let admin = env.client();
    create(
        &Api::<ClusterRoleBinding>::all(admin.clone()),
        json!({"metadata": {"name": "ccm:auth-delegator"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:auth-delegator"},
               "subjects": [{"kind": "ServiceAccount", "name": "cloud-controller-manager", "namespace": "kube-system"}]}),
    )
    .await;
    let (code, v) = send(&env, Some(&token), "POST", path, Some(ssar)).await;
    assert_eq!(
        v["status"]["reason"],
        "RBAC: allowed by ClusterRoleBinding \"ccm:auth-delegator\" of ClusterRole \"system:auth-delegator\" to ServiceAccount \"cloud-controller-manager/kube-system\""
    );
    assert_eq!(code, 201);
    let (code, _) = send(&env, Some(&token), "POST", reviews, Some(tokenreview)).await;
    assert_eq!(code, 201);
    // ... and the extension-apiserver-authentication-reader Role lets it read that ConfigMap only.
    bind(
        &admin,
        "kube-system",
        "ccm:auth-reader",
        ("Role", "extension-apiserver-authentication-reader"),
        json!({"kind": "ServiceAccount", "name": "cloud-controller-manager", "namespace": "kube-system"}),
    )
    .await;
    let cm = "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication";
    let (code, _) = send(&env, Some(&token), "GET", cm, None).await;
    assert_eq!(code, 404, "allowed, and absent without a client CA");
    let (code, _) = send(
        &env,
        Some(&token),
        "GET",
        "/api/v1/namespaces/kube-system/configmaps/other",
        None,
    )
    .await;
    assert_eq!(code, 403);

    create(
        &Api::<ClusterRole>::all(admin.clone()),
        json!({"metadata": {"name": "metrics-reader"}, "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]}),
    )
    .await;
    create(
        &Api::<ClusterRoleBinding>::all(admin.clone()),
        json!({"metadata": {"name": "ccm:metrics"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "metrics-reader"},
               "subjects": [{"kind": "Group", "name": "system:serviceaccounts:kube-system"}]}),
    )
    .await;
    assert_eq!(
        sar(&env, sa, metrics).await,
        json!({"allowed": true, "reason": "RBAC: allowed by ClusterRoleBinding \"ccm:metrics\" of ClusterRole \"metrics-reader\" to Group \"system:serviceaccounts:kube-system\""})
    );
}

#[tokio::test]
async fn masters_are_always_allowed_and_local_reviews_stay_in_their_namespace() {
    let env = TestEnv::builder()
        .authorization(true)
        .static_token("root", "root", "", &["system:masters"])
        .static_token("bob", "bob", "", &[])
        .start()
        .await
        .unwrap();
    let (code, _) = send(
        &env,
        Some("root"),
        "DELETE",
        "/api/v1/namespaces/default/configmaps",
        None,
    )
    .await;
    assert_eq!(code, 200);
    let (code, v) = send(&env, Some("bob"), "GET", "/api/v1/namespaces/default", None).await;
    assert_eq!(code, 403);
    assert_eq!(
        v["message"],
        "namespaces \"default\" is forbidden: User \"bob\" cannot get resource \"namespaces\" in API group \"\" in the namespace \"default\""
    );
    let lsar = |ns: &str| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "LocalSubjectAccessReview",
               "metadata": {"namespace": "default"},
               "spec": {"user": "root", "groups": ["system:masters"], "resourceAttributes": {"verb": "get", "resource": "pods", "namespace": ns}}})
    };
    let path = "/apis/authorization.k8s.io/v1/namespaces/default/localsubjectaccessreviews";
    let (code, v) = send(&env, Some("root"), "POST", path, Some(lsar("default"))).await;
    assert_eq!((code, &v["status"]), (201, &json!({"allowed": true})));
    assert_eq!(v["metadata"]["namespace"], "default");
    let (code, v) = send(&env, Some("root"), "POST", path, Some(lsar("other"))).await;
    assert_eq!(code, 422);
    assert_eq!(
        v["message"],
        "LocalSubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.resourceAttributes.namespace: Invalid value: \"other\": must match metadata.namespace"
    );
}

#[tokio::test]
async fn aggregated_cluster_roles_collect_the_rules_of_the_roles_they_select() {
    let env = enforcing().await;
    let roles: Api<ClusterRole> = Api::all(env.client());
    create(
        &roles,
        json!({"metadata": {"name": "monitoring"},
               "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"rbac.example.com/aggregate-to-monitoring": "true"}}]}}),
    )
    .await;
    create(
        &roles,
        json!({"metadata": {"name": "monitoring-endpoints", "labels": {"rbac.example.com/aggregate-to-monitoring": "true"}},
               "rules": [{"apiGroups": [""], "resources": ["endpoints"], "verbs": ["get"]}]}),
    )
    .await;
    let rules = |r: ClusterRole| serde_json::to_value(r.rules.unwrap_or_default()).unwrap();
    assert_eq!(
        rules(roles.get("monitoring").await.unwrap()),
        json!([{"apiGroups": [""], "resources": ["endpoints"], "verbs": ["get"]}])
    );
    create(
        &Api::<ClusterRoleBinding>::all(env.client()),
        json!({"metadata": {"name": "prom"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "monitoring"},
               "subjects": [{"kind": "User", "name": "prometheus"}]}),
    )
    .await;
    let prometheus = |verb: &str| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
               "spec": {"user": "prometheus", "resourceAttributes": {"verb": verb, "resource": "endpoints", "namespace": "default"}}})
    };
    let path = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
    let (_, v) = send(
        &env,
        Some(env.admin_token()),
        "POST",
        path,
        Some(prometheus("get")),
    )
    .await;
    assert_eq!(v["status"]["allowed"], true);
    // Relabelling the selected role out of the selector takes its rules away again.
    roles
        .patch(
            "monitoring-endpoints",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"labels": {"rbac.example.com/aggregate-to-monitoring": null}}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(rules(roles.get("monitoring").await.unwrap()), json!([]));
    let (_, v) = send(
        &env,
        Some(env.admin_token()),
        "POST",
        path,
        Some(prometheus("get")),
    )
    .await;
    assert_eq!(v["status"], json!({"allowed": false}));
}

#[tokio::test]
async fn impersonation_needs_the_impersonate_verb() {
    let env = TestEnv::builder()
        .authorization(true)
        .static_token("bob", "bob", "", &[])
        .start()
        .await
        .unwrap();
    let acting_as = |token: &str, user: &str| {
        let mut config = env.config_with_token(token);
        config.auth_info.impersonate = Some(user.to_string());
        Api::<Node>::all(kube::Client::try_from(config).unwrap())
    };
    // An admin may impersonate anyone; the request then runs as that user, groups included.
    let as_sa = acting_as(env.admin_token(), "system:serviceaccount:kube-system:ccm");
    let msg = forbidden(as_sa.list(&Default::default()).await.unwrap_err());
    assert!(
        msg.contains("User \"system:serviceaccount:kube-system:ccm\" cannot list"),
        "{msg}"
    );
    assert_eq!(
        env.requests().last().unwrap().user,
        "system:serviceaccount:kube-system:ccm"
    );
    // Others need `impersonate` on the user.
    let as_carol = acting_as("bob", "carol");
    let msg = forbidden(as_carol.list(&Default::default()).await.unwrap_err());
    assert_eq!(
        msg,
        "users \"carol\" is forbidden: User \"bob\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
    );
    let admin = env.client();
    create(
        &Api::<ClusterRole>::all(admin.clone()),
        json!({"metadata": {"name": "impersonate-carol"}, "rules": [
            {"apiGroups": [""], "resources": ["users"], "resourceNames": ["carol"], "verbs": ["impersonate"]}
        ]}),
    )
    .await;
    create(
        &Api::<ClusterRoleBinding>::all(admin.clone()),
        json!({"metadata": {"name": "bob-as-carol"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "impersonate-carol"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "bob"}]}),
    )
    .await;
    let msg = forbidden(as_carol.list(&Default::default()).await.unwrap_err());
    assert!(msg.contains("User \"carol\" cannot list"), "{msg}");
}

#[tokio::test]
async fn self_subject_rules_reviews_list_what_a_caller_may_do() {
    let env = enforcing().await;
    let token = env.token_for_service_account("default", "lister").unwrap();
    let admin = env.client();
    create(
        &Api::<Role>::namespaced(admin.clone(), "default"),
        json!({"metadata": {"name": "cm-reader"}, "rules": [
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}
        ]}),
    )
    .await;
    bind(
        &admin,
        "default",
        "lister",
        ("Role", "cm-reader"),
        json!({"kind": "ServiceAccount", "name": "lister"}),
    )
    .await;
    let review = |ns: &str| json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": {"namespace": ns}});
    let path = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews";
    let (code, v) = send(&env, Some(&token), "POST", path, Some(review("default"))).await;
    assert_eq!(code, 201, "{v}");
    let resources = v["status"]["resourceRules"].as_array().unwrap();
    assert!(
        resources.contains(
            &json!({"verbs": ["get", "list"], "apiGroups": [""], "resources": ["configmaps"]})
        ),
        "{v:#}"
    );
    assert!(
        resources.contains(&json!({"verbs": ["create"], "apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]})),
        "system:basic-user applies to every authenticated caller: {v:#}"
    );
    assert_eq!(v["status"]["incomplete"], false);
    let (_, other) = send(
        &env,
        Some(&token),
        "POST",
        path,
        Some(review("kube-system")),
    )
    .await;
    assert!(
        !other["status"]["resourceRules"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["resources"] == json!(["configmaps"])),
        "a Role grants nothing outside its namespace: {other:#}"
    );
    let (code, v) = send(&env, Some(&token), "POST", path, Some(review(""))).await;
    assert_eq!(
        (code, v["message"].as_str()),
        (400, Some("no namespace on request"))
    );
}
