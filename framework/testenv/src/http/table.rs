//! Server-side printing: the `meta.k8s.io/v1` Table that kubectl asks for (`Accept: ...;as=Table`)
//! on get, list and watch, with each type's columns from `printers`. Rows carry the object's
//! metadata as PartialObjectMetadata, as with `includeObject=Metadata`.

use serde_json::{Value, json};

use crate::api::types::Served;
use crate::http::printers::{cells, columns, text};

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
            &crate::api::resources::TABLE
                [crate::api::resources::lookup("", "v1", "configmaps").unwrap()],
        );
        let cm = json!({"metadata": {"name": "c", "resourceVersion": "7"}, "data": {"a": "1"}});
        let t = single(cms, &cm);
        assert_eq!(t["metadata"]["resourceVersion"], "7");
        assert_eq!(t["rows"][0]["object"]["metadata"]["name"], "c");
        assert_eq!(t["rows"][0]["cells"][1], 1);
    }
}
