//! Server-side printing: the `meta.k8s.io/v1` Table that kubectl asks for (`Accept: ...;as=Table`)
//! on get, list and watch, with a built-in kind's columns from its printer and a custom
//! resource's from its CRD version (`crd::columns`). Rows carry the object's metadata as
//! PartialObjectMetadata, as with `includeObject=Metadata`.

use serde_json::{Value, json};

use crate::api::printing::text;
use crate::api::types::Served;
use crate::crd::columns as custom;

/// The `columnDefinitions` of a type.
fn columns(rt: &Served) -> Vec<Value> {
    match rt {
        Served::Builtin(k) => k.printer.columns.iter().map(|c| c.definition()).collect(),
        Served::Custom(c) => custom::definitions(&c.columns),
    }
}

/// One object's cells, a cell per column.
fn cells(rt: &Served, obj: &Value) -> Vec<Value> {
    match rt {
        Served::Builtin(k) => (k.printer.cells)(obj),
        Served::Custom(c) => {
            let mut out = vec![Value::from(text(obj, "/metadata/name"))];
            out.extend(custom::cells(&c.columns, obj));
            out
        }
    }
}

fn row(rt: &Served, obj: &Value) -> Value {
    let meta = obj.get("metadata").cloned().unwrap_or_else(|| json!({}));
    json!({
        "cells": cells(rt, obj),
        "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": meta}
    })
}

/// A Table of some objects, at `rv`.
pub fn of<'a>(
    rt: &Served,
    objects: impl Iterator<Item = &'a Value>,
    rv: &str,
    cont: Option<&str>,
) -> Value {
    let rows: Vec<Value> = objects.map(|o| row(rt, o)).collect();
    let mut meta = json!({"resourceVersion": rv});
    if let Some(c) = cont {
        meta["continue"] = c.into();
    }
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": meta, "columnDefinitions": columns(rt), "rows": rows})
}

/// A one-row Table for a single object (get, and each watch event).
pub fn single(rt: &Served, obj: &Value) -> Value {
    let rv = text(obj, "/metadata/resourceVersion").to_string();
    of(rt, std::iter::once(obj), &rv, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_carries_the_metadata_and_the_table_the_resource_version() {
        let cms = &Served::Builtin(
            &crate::api::kinds::TABLE[crate::api::kinds::lookup("", "v1", "configmaps").unwrap()],
        );
        let cm = json!({"metadata": {"name": "c", "resourceVersion": "7"}, "data": {"a": "1"}});
        let t = single(cms, &cm);
        assert_eq!(t["metadata"]["resourceVersion"], "7");
        assert_eq!(t["rows"][0]["object"]["metadata"]["name"], "c");
        assert_eq!(t["rows"][0]["cells"][1], 1);
    }
}
