//! Pods: the v1 defaults (restart and DNS policy, scheduler, grace period, container pull
//! policy by image tag, termination message, port protocol), the create-time admission plugins
//! (ServiceAccount: the `default` account and its projected `kube-api-access-*` volume;
//! DefaultTolerationSeconds; Priority, with `preemptionPolicy`) and the initial status (`Pending`, QoS class).

use serde_json::{Map, Value, json};

use crate::api::meta::random_suffix;

const TOKEN_MOUNT: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

fn obj_mut<'a>(v: &'a mut Value, key: &str) -> Option<&'a mut Map<String, Value>> {
    let m = v.as_object_mut()?;
    let entry = m.entry(key).or_insert_with(|| json!({}));
    entry.as_object_mut()
}

fn or_insert(m: &mut Map<String, Value>, key: &str, v: Value) {
    m.entry(key).or_insert(v);
}

/// `Always` for `:latest` or an untagged image, else `IfNotPresent` (upstream's defaulting).
fn pull_policy(image: &str) -> &'static str {
    let name = image.rsplit('/').next().unwrap_or(image);
    if image.contains('@') {
        return "IfNotPresent";
    }
    match name.split_once(':') {
        Some((_, "latest")) | None => "Always",
        Some(_) => "IfNotPresent",
    }
}

fn default_containers(spec: &mut Map<String, Value>, key: &str) {
    let Some(Value::Array(cs)) = spec.get_mut(key) else {
        return;
    };
    for c in cs.iter_mut().filter_map(Value::as_object_mut) {
        let image = c
            .get("image")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        or_insert(c, "imagePullPolicy", pull_policy(&image).into());
        or_insert(c, "terminationMessagePath", "/dev/termination-log".into());
        or_insert(c, "terminationMessagePolicy", "File".into());
        or_insert(c, "resources", json!({}));
        if let Some(Value::Array(ports)) = c.get_mut("ports") {
            for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                or_insert(p, "protocol", "TCP".into());
            }
        }
    }
}

/// The v1 defaults, on every write.
pub(super) fn default(obj: &mut Value) {
    let Some(spec) = obj_mut(obj, "spec") else {
        return;
    };
    default_containers(spec, "containers");
    default_containers(spec, "initContainers");
    or_insert(spec, "restartPolicy", "Always".into());
    or_insert(spec, "terminationGracePeriodSeconds", 30.into());
    or_insert(spec, "dnsPolicy", "ClusterFirst".into());
    or_insert(spec, "securityContext", json!({}));
    or_insert(spec, "schedulerName", "default-scheduler".into());
    or_insert(spec, "enableServiceLinks", true.into());
}

/// The admission plugins and initial status of a create.
pub(super) fn admit_create(obj: &mut Value) {
    let qos = qos_class(obj);
    if let Some(spec) = obj_mut(obj, "spec") {
        service_account(spec);
        default_tolerations(spec);
        or_insert(spec, "priority", 0.into());
        or_insert(spec, "preemptionPolicy", "PreemptLowerPriority".into());
    }
    obj["status"] = json!({"phase": "Pending", "qosClass": qos});
}

fn service_account(spec: &mut Map<String, Value>) {
    let sa = spec
        .get("serviceAccountName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or("default")
        .to_string();
    spec.insert("serviceAccountName".into(), sa.clone().into());
    spec.insert("serviceAccount".into(), sa.into());
    if spec.get("automountServiceAccountToken") == Some(&Value::Bool(false)) {
        return;
    }
    let name = format!("kube-api-access-{}", random_suffix());
    let volume = json!({"name": name, "projected": {"sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
    ], "defaultMode": 420}});
    if let Value::Array(v) = spec.entry("volumes").or_insert_with(|| json!([])) {
        v.push(volume);
    }
    if let Some(Value::Array(cs)) = spec.get_mut("containers") {
        for c in cs.iter_mut().filter_map(Value::as_object_mut) {
            let mounts = c.entry("volumeMounts").or_insert_with(|| json!([]));
            let taken = mounts
                .as_array()
                .is_some_and(|m| m.iter().any(|x| x["mountPath"] == TOKEN_MOUNT));
            if let (Value::Array(m), false) = (mounts, taken) {
                m.push(json!({"name": name, "readOnly": true, "mountPath": TOKEN_MOUNT}));
            }
        }
    }
}

fn default_tolerations(spec: &mut Map<String, Value>) {
    let Value::Array(ts) = spec.entry("tolerations").or_insert_with(|| json!([])) else {
        return;
    };
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        let tolerated = ts.iter().any(|t| {
            (t["key"] == key || t.get("key").is_none() && t["operator"] == "Exists")
                && t.get("effect").is_none_or(|e| e == "NoExecute")
        });
        if !tolerated {
            ts.push(json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}));
        }
    }
}

/// upstream's `GetPodQOS`, for cpu and memory: no requests or limits anywhere is BestEffort,
/// limits equal to requests (both set) in every container is Guaranteed, else Burstable.
fn qos_class(obj: &Value) -> &'static str {
    let containers = obj.pointer("/spec/containers").and_then(Value::as_array);
    let mut any = false;
    let mut guaranteed = true;
    for c in containers.into_iter().flatten() {
        let req = c.pointer("/resources/requests");
        let lim = c.pointer("/resources/limits");
        for r in ["cpu", "memory"] {
            let (q, l) = (req.and_then(|v| v.get(r)), lim.and_then(|v| v.get(r)));
            any |= q.is_some() || l.is_some();
            guaranteed &= l.is_some() && q.is_none_or(|q| Some(q) == l);
        }
    }
    match (any, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
}

/// Removes from a create's ownership view what the admission plugins added.
pub(super) fn untrack(sent: &Value, view: &mut Value) {
    let Some(spec) = view.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    for k in [
        "serviceAccountName",
        "serviceAccount",
        "tolerations",
        "priority",
        "preemptionPolicy",
        "volumes",
    ] {
        if sent.pointer(&format!("/spec/{k}")).is_none() {
            spec.remove(k);
        }
    }
    if let Some(Value::Array(cs)) = spec.get_mut("containers") {
        for (i, c) in cs.iter_mut().enumerate() {
            if sent
                .pointer(&format!("/spec/containers/{i}/volumeMounts"))
                .is_none()
                && let Some(m) = c.as_object_mut()
            {
                m.remove("volumeMounts");
            }
        }
    }
}
