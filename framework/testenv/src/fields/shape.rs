//! The shape server-side apply needs of a type at a path: which lists are atomic, sets or maps
//! keyed by which fields, which objects are granular maps, atomic maps or structs, and which
//! fields nobody owns. List kinds come from [`Served::list_type`] (the one per-path lookup:
//! a kind's list strategies for built-ins, `x-kubernetes-list-type` for custom resources),
//! except the few built-in lists whose OpenAPI map keys differ from the patch merge key; those,
//! and a built-in kind's maps, atomic objects and value structs, are its `Shape`.

use crate::api::types::{ListType, Served};

/// How a list merges and is owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListKind {
    /// Replaced whole; owned as one field.
    Atomic,
    /// A set of scalars; each value owned on its own (`v:`).
    Set,
    /// Items identified by these key fields (`k:`), each item's fields owned on their own.
    Map(Vec<String>),
}

/// How an object value merges and is owned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectKind {
    /// A struct: its fields are owned on their own; the struct itself never is.
    Struct,
    /// A granular map (`map[string]T`): its keys are owned on their own, and the map itself by
    /// whoever created it.
    Map,
    /// A map replaced whole (`x-kubernetes-map-type: atomic`).
    Atomic,
}

/// Key fields that default when an item leaves them out, so `k:` steps name them anyway.
pub const KEY_DEFAULTS: &[(&str, &str)] = &[("protocol", "TCP")];

/// Granular maps every object has (ObjectMeta's); a kind's own are in its `Shape`.
const META_MAPS: &[&str] = &["metadata.labels", "metadata.annotations"];

/// The kind of the list at `path` (dotted, without list positions).
pub fn list_kind(rt: &Served, path: &str) -> ListKind {
    if let Some((_, keys)) = rt
        .builtin()
        .and_then(|k| k.apply.list_keys.iter().find(|(p, _)| *p == path))
    {
        return ListKind::Map(keys.iter().map(|k| (*k).to_string()).collect());
    }
    match rt.list_type(path) {
        Some(ListType::Map(keys)) => ListKind::Map(keys),
        Some(ListType::Set) => ListKind::Set,
        None => ListKind::Atomic,
    }
}

/// The kind of the object at `path`: for built-ins from their `Shape`, for custom resources
/// from their schema (`additionalProperties` makes a map).
pub fn object_kind(rt: &Served, path: &str) -> ObjectKind {
    let shape = rt.builtin().map(|k| &k.apply);
    let is = |paths: &[&str]| paths.contains(&path);
    let custom_map = rt
        .custom()
        .and_then(|c| c.schema.as_ref())
        .is_some_and(|s| s.is_map(path));
    if shape.is_some_and(|s| is(s.atomic)) {
        ObjectKind::Atomic
    } else if is(META_MAPS) || shape.is_some_and(|s| is(s.maps)) || custom_map {
        ObjectKind::Map
    } else {
        ObjectKind::Struct
    }
}

/// Whether an object at `path` exists in every object of the type (a value struct of a
/// built-in type, `metadata`, `spec`, `status`): adding fields under it does not add it.
/// Nested structs Go holds by value (not behind a pointer) are in every object even when empty:
/// a write that fills one in owns its fields but not the struct itself; a struct behind a
/// pointer (crd-create.txt: `spec.conversion`), or any object of a custom resource
/// (cr-create-defaulted-pruned.txt: `spec`), is owned itself too.
pub fn always_present(rt: &Served, path: &str) -> bool {
    path == "metadata"
        || rt
            .builtin()
            .is_some_and(|k| !path.contains('.') || k.apply.value_structs.contains(&path))
}
/// Top-level and metadata fields the server sets and nobody owns.
pub fn unowned(path: &str) -> bool {
    matches!(
        path,
        "apiVersion"
            | "kind"
            | "metadata.name"
            | "metadata.namespace"
            | "metadata.uid"
            | "metadata.resourceVersion"
            | "metadata.generation"
            | "metadata.creationTimestamp"
            | "metadata.deletionTimestamp"
            | "metadata.deletionGracePeriodSeconds"
            | "metadata.managedFields"
            | "metadata.selfLink"
            | "metadata.generateName"
    )
}

/// Fields the registry allocates after the field manager has run on a create, so the creator
/// does not own them (svc-create-lb.txt: no clusterIP, ipFamilies or nodePort in its entry).
pub fn allocated_on_create(rt: &Served, path: &str) -> bool {
    rt.builtin()
        .is_some_and(|k| k.apply.allocated_on_create.contains(&path))
}

/// Which top-level part of the object a write through `subresource` may own: a type with a
/// status subresource resets `status` on its main endpoint, and `/status` owns `status` and
/// metadata (svc-status-patch-finalizer.txt: a finalizer written through `/status`).
pub fn in_scope(rt: &Served, subresource: Option<&str>, top: &str) -> bool {
    match subresource {
        Some("status") => top == "status" || top == "metadata",
        _ => !(rt.status_subresource() && top == "status"),
    }
}
