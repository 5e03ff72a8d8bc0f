//! A CRD's life, done at once under the store lock where upstream runs controllers: the naming
//! controller (`NamesAccepted`, `status.acceptedNames`, conflicts with other CRDs of the group),
//! the establishing controller (`Established`) and the types each served version registers; on
//! delete the finalizer controller (`customresourcecleanup.apiextensions.k8s.io`: every custom
//! resource deleted, finalizers honoured, then the CRD goes and its types with it).

use base64::Engine;
use serde_json::{Value, json};

use crate::api::kind::Lifecycle;
use crate::api::kinds::{ResId, lookup, storage_version};
use crate::api::meta::now;
use crate::api::status::ApiError;
use crate::api::structural::Schema;
use crate::api::types::{CustomType, ScaleSpec, Served};
use crate::api::validation::string_list;
use crate::crd::columns;
use crate::storage::store::{EventType, State, key_of};

/// The finalizer a deleted CRD carries until its objects are gone.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

fn crd_id() -> Option<ResId> {
    lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions")
}

fn text<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

fn strings(v: &Value, ptr: &str) -> Vec<String> {
    string_list(v.pointer(ptr))
}

fn condition(ty: &str, status: &str, reason: &str, message: &str, since: &str) -> Value {
    json!({"type": ty, "status": status, "lastTransitionTime": since, "reason": reason, "message": message})
}

/// Sets a condition, keeping `lastTransitionTime` when the status does not change.
fn set_condition(crd: &mut Value, cond: Value) {
    if !crd["status"]["conditions"].is_array() {
        crd["status"]["conditions"] = json!([]);
    }
    let Some(list) = crd["status"]["conditions"].as_array_mut() else {
        return;
    };
    match list.iter_mut().find(|c| c["type"] == cond["type"]) {
        Some(c) => {
            let since = if c["status"] == cond["status"] {
                c["lastTransitionTime"].clone()
            } else {
                cond["lastTransitionTime"].clone()
            };
            *c = cond;
            c["lastTransitionTime"] = since;
        }
        None => list.push(cond),
    }
}

/// Which requested name, if any, another CRD of the group already accepted (upstream's naming
/// controller checks plural, singular, short names, kind and list kind in this order).
fn name_conflict(state: &State, crd: &Value) -> Option<(&'static str, String)> {
    let id = crd_id()?;
    let group = text(crd, "/spec/group");
    let me = text(crd, "/metadata/name");
    let others: Vec<&Value> = state
        .iter(id, None, None)
        .map(|(_, o)| o.as_ref())
        .filter(|o| text(o, "/spec/group") == group && text(o, "/metadata/name") != me)
        .collect();
    let taken = |field: &str| -> Vec<String> {
        others
            .iter()
            .flat_map(|o| {
                let names = &o["status"]["acceptedNames"];
                match names.get(field) {
                    Some(Value::Array(a)) => a
                        .iter()
                        .filter_map(Value::as_str)
                        .map(String::from)
                        .collect(),
                    Some(Value::String(s)) if !s.is_empty() => vec![s.clone()],
                    _ => Vec::new(),
                }
            })
            .collect()
    };
    let plurals_and_singulars: Vec<String> = taken("plural")
        .into_iter()
        .chain(taken("singular"))
        .collect();
    let plural = text(crd, "/spec/names/plural").to_string();
    if plurals_and_singulars.contains(&plural) {
        return Some(("PluralConflict", plural));
    }
    let singular = text(crd, "/spec/names/singular").to_string();
    if plurals_and_singulars.contains(&singular) {
        return Some(("SingularConflict", singular));
    }
    let shorts = taken("shortNames");
    if let Some(s) = strings(crd, "/spec/names/shortNames")
        .into_iter()
        .find(|s| shorts.contains(s))
    {
        return Some(("ShortNamesConflict", s));
    }
    let kinds: Vec<String> = taken("kind").into_iter().chain(taken("listKind")).collect();
    let kind = text(crd, "/spec/names/kind").to_string();
    if kinds.contains(&kind) {
        return Some(("KindConflict", kind));
    }
    let list_kind = text(crd, "/spec/names/listKind").to_string();
    if kinds.contains(&list_kind) {
        return Some(("ListKindConflict", list_kind));
    }
    None
}

/// Runs the naming and establishing controllers on a stored CRD and stores the result.
fn reconcile(state: &mut State, stored: &Value) -> Value {
    let mut crd = stored.clone();
    let since = now();
    let terminating = crd.pointer("/metadata/deletionTimestamp").is_some();
    match name_conflict(state, &crd) {
        Some((reason, name)) => {
            let msg = format!("{} is already in use", crate::api::status::go_quote(&name));
            set_condition(
                &mut crd,
                condition("NamesAccepted", "False", reason, &msg, &since),
            );
            let was_established = crd["status"]["conditions"].as_array().is_some_and(|l| {
                l.iter()
                    .any(|c| c["type"] == "Established" && c["status"] == "True")
            });
            if !was_established {
                set_condition(
                    &mut crd,
                    condition(
                        "Established",
                        "False",
                        "NotAccepted",
                        "not all names are accepted",
                        &since,
                    ),
                );
            }
        }
        None => {
            crd["status"]["acceptedNames"] = crd["spec"]["names"].clone();
            set_condition(
                &mut crd,
                condition(
                    "NamesAccepted",
                    "True",
                    "NoConflicts",
                    "no conflicts found",
                    &since,
                ),
            );
            set_condition(
                &mut crd,
                condition(
                    "Established",
                    "True",
                    "InitialNamesAccepted",
                    "the initial names have been accepted",
                    &since,
                ),
            );
        }
    }
    if !terminating && established(&crd) {
        register(state, &crd);
    }
    if crd == *stored {
        return crd;
    }
    let Some(id) = crd_id() else {
        return crd;
    };
    if let Some(rt) = state.served(id) {
        crate::fields::record_server_write(&rt, stored, &mut crd, "kube-apiserver", Some("status"));
    }
    (*state.put(id, crd, EventType::Modified)).clone()
}

fn established(crd: &Value) -> bool {
    crd["status"]["conditions"].as_array().is_some_and(|l| {
        l.iter()
            .any(|c| c["type"] == "Established" && c["status"] == "True")
    })
}

/// A CRD was just created: accept its names, establish it, serve its types.
pub fn created(state: &mut State, stored: &Value) {
    reconcile(state, stored);
}

/// A CRD was changed: names, conditions and served types follow.
pub fn updated(state: &mut State, stored: &Value) {
    reconcile(state, stored);
}

fn storage_hash(group: &str, version: &str, kind: &str) -> String {
    let digest = ring::digest::digest(
        &ring::digest::SHA256,
        format!("{group}/{version}/{kind}").as_bytes(),
    );
    base64::engine::general_purpose::STANDARD.encode(&digest.as_ref()[..8])
}

/// Serves every `served` version of an established CRD (ids kept across updates).
fn register(state: &mut State, crd: &Value) {
    let name = text(crd, "/metadata/name").to_string();
    let existing = state.types().of_crd(&name);
    let objects = existing
        .first()
        .map(|(_, c)| c.objects)
        .unwrap_or_else(|| state.types().next_id());
    let group = text(crd, "/spec/group").to_string();
    let names = &crd["status"]["acceptedNames"];
    let kind = text(names, "/kind").to_string();
    let storage = storage_version(crd).unwrap_or_default();
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut kept = Vec::new();
    for v in versions.iter().filter(|v| v["served"] == true) {
        let version = text(v, "/name").to_string();
        let id = existing
            .iter()
            .find(|(_, c)| c.version == version)
            .map(|(id, _)| *id)
            .unwrap_or_else(|| state.types().next_id().max(objects));
        let scale = v.pointer("/subresources/scale").map(|s| ScaleSpec {
            spec_replicas: text(s, "/specReplicasPath").into(),
            status_replicas: text(s, "/statusReplicasPath").into(),
            label_selector: s
                .get("labelSelectorPath")
                .and_then(Value::as_str)
                .map(String::from),
        });
        let selectable = v
            .get("selectableFields")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|f| text(f, "/jsonPath").trim_start_matches('.').to_string())
                    .collect()
            })
            .unwrap_or_default();
        let schema = v.pointer("/schema/openAPIV3Schema").map(Schema::parse);
        let rules = schema
            .as_ref()
            .and_then(|s| crate::api::cel::compile::compile_root(s).tree);
        state.types_mut().set(
            id,
            CustomType {
                crd: name.clone(),
                group: group.clone(),
                version: version.clone(),
                kind: kind.clone(),
                list_kind: text(names, "/listKind").into(),
                plural: text(names, "/plural").into(),
                singular: text(names, "/singular").into(),
                short_names: strings(names, "/shortNames"),
                categories: strings(names, "/categories"),
                namespaced: text(crd, "/spec/scope") == "Namespaced",
                status: v.pointer("/subresources/status").is_some(),
                scale,
                schema,
                rules,
                openapi: v.pointer("/schema/openAPIV3Schema").cloned(),
                columns: columns::of_version(v),
                selectable,
                objects,
                storage_version: storage.clone(),
                storage_hash: storage_hash(&group, &storage, &kind),
            },
        );
        kept.push(id);
    }
    for (id, _) in existing {
        if !kept.contains(&id) {
            state.types_mut().unset(id);
        }
    }
}

/// Stops serving every type of a CRD and forgets its objects; CRDs of the group whose names
/// conflicted with it get another chance (upstream's naming controller requeues the group).
fn retire(state: &mut State, crd_name: &str) {
    let ids = state.types().of_crd(crd_name);
    let Some((objects, group)) = ids.first().map(|(_, c)| (c.objects, c.group.clone())) else {
        return;
    };
    let list: Vec<ResId> = ids.iter().map(|(id, _)| *id).collect();
    for id in &list {
        state.types_mut().unset(*id);
    }
    state.retire(&list, objects);
    let Some(id) = crd_id() else { return };
    let waiting: Vec<Value> = state
        .iter(id, None, None)
        .map(|(_, o)| (**o).clone())
        .filter(|o| text(o, "/spec/group") == group && !established(o))
        .collect();
    for crd in waiting {
        reconcile(state, &crd);
    }
}

/// 405 for a create while the type's CRD is being deleted, as upstream.
pub fn check_creatable(state: &State, rt: &Served) -> Result<(), ApiError> {
    let Some(c) = rt.custom() else {
        return Ok(());
    };
    let terminating = crd_id()
        .and_then(|id| state.get(id, "", &c.crd))
        .is_some_and(|o| o.pointer("/metadata/deletionTimestamp").is_some());
    if terminating {
        return Err(ApiError {
            code: 405,
            reason: "MethodNotAllowed".into(),
            message: "create not allowed while custom resource definition is terminating".into(),
            details: None,
            retry_after: None,
        });
    }
    Ok(())
}

/// DELETE of a CRD, first step: marks it terminating with the cleanup finalizer and returns
/// what was stored (the response); `None` when it already is terminating. The caller then
/// deletes its objects and calls [`finish_if_empty`].
pub fn mark_terminating(state: &mut State, res: ResId, old: &Value) -> Option<Value> {
    if old.pointer("/metadata/deletionTimestamp").is_some() {
        return None;
    }
    let mut crd = old.clone();
    let since = now();
    crd["metadata"]["deletionTimestamp"] = since.clone().into();
    let fins = &mut crd["metadata"]["finalizers"];
    if !fins.is_array() {
        *fins = json!([]);
    }
    if let Some(list) = fins.as_array_mut()
        && !list.iter().any(|f| f == CLEANUP_FINALIZER)
    {
        list.push(CLEANUP_FINALIZER.into());
    }
    if !crd["status"].is_object() {
        crd["status"] = json!({});
    }
    set_condition(
        &mut crd,
        condition(
            "Terminating",
            "True",
            "InstanceDeletionPending",
            "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
            &since,
        ),
    );
    Some((*state.put(res, crd, EventType::Modified)).clone())
}

/// After a custom resource left the store: finishes its CRD's deletion when it was the last.
/// After a CRD left the store (its last finalizer removed): retires its types.
pub fn instance_removed(state: &mut State, rt: &Served) {
    match rt {
        Served::Custom(c) => {
            let crd = c.crd.clone();
            finish_if_empty(state, &crd);
        }
        Served::Builtin(_) if rt.lifecycle() == Lifecycle::CustomResourceDefinition => {
            let live: Vec<String> = crd_id()
                .map(|id| {
                    state
                        .iter(id, None, None)
                        .map(|(k, _)| k.1.clone())
                        .collect()
                })
                .unwrap_or_default();
            let gone: Vec<String> = state
                .types()
                .all()
                .into_iter()
                .filter_map(|(_, s)| s.custom().map(|c| c.crd.clone()))
                .filter(|n| !live.contains(n))
                .collect();
            for name in gone {
                retire(state, &name);
            }
        }
        Served::Builtin(_) => {}
    }
}

/// Once a terminating CRD has no objects left: drops its cleanup finalizer and, with no other
/// finalizer, the CRD and its types too.
pub fn finish_if_empty(state: &mut State, crd_name: &str) {
    let Some(id) = crd_id() else { return };
    let Some(crd) = state.get(id, "", crd_name).cloned() else {
        return;
    };
    let has_cleanup = crd["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|l| l.iter().any(|f| f == CLEANUP_FINALIZER));
    if crd.pointer("/metadata/deletionTimestamp").is_none() || !has_cleanup {
        return;
    }
    let remaining = state
        .types()
        .of_crd(crd_name)
        .first()
        .map(|(res, _)| state.iter(*res, None, None).count())
        .unwrap_or(0);
    if remaining > 0 {
        return;
    }
    let mut done = (*crd).clone();
    if let Some(list) = done["metadata"]["finalizers"].as_array_mut() {
        list.retain(|f| f != CLEANUP_FINALIZER);
    }
    let others = done["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|l| !l.is_empty());
    if others {
        state.put(id, done, EventType::Modified);
        return;
    }
    let (ns, name) = key_of(&done);
    state.remove(id, &ns, &name);
    retire(state, crd_name);
}
