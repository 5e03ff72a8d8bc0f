//! One walk over every built-in kind: what the compiler cannot see of a kind's value (that its
//! paths exist in its own schema, that its messages and printer fit it) is checked here, so a
//! kind added with a typo or another kind's part fails this test.

use serde_json::{Value, json};

use super::*;
use crate::api::openapi::{KindSchema, schema};

/// Whether a dotted path (list items share their list's path) names a field of the schema.
fn resolves(ks: &KindSchema, path: &str) -> bool {
    let Some(mut node) = ks.root_schema() else {
        return false;
    };
    for field in path.split('.') {
        node = ks.resolve(node);
        while let Some(items) = node.get("items") {
            node = ks.resolve(items);
        }
        match node.get("properties").and_then(|p| p.get(field)) {
            Some(next) => node = next,
            None => return false,
        }
    }
    true
}

fn name(k: &Kind) -> String {
    format!("{}/{} {}", k.ty.group, k.ty.version, k.ty.kind)
}

#[test]
fn every_kind_names_its_own_schema() {
    for k in TABLE {
        let s = schema(k.ty.group, k.ty.version, k.ty.kind)
            .unwrap_or_else(|| panic!("{}: no schema", name(k)));
        assert!(
            s.root.ends_with(&format!(".{}", k.ty.kind)),
            "{}: schema {}",
            name(k),
            s.root
        );
        let mut paths: Vec<&str> = k.field_selectors.iter().map(|(_, p)| *p).collect();
        paths.extend(k.patch_lists.iter().map(|(p, _)| *p));
        let a = &k.apply;
        paths.extend(a.list_keys.iter().map(|(p, _)| *p));
        for list in [a.maps, a.atomic, a.value_structs, a.allocated_on_create] {
            paths.extend(list);
        }
        for p in paths {
            assert!(resolves(&s, p), "{}: no field {p} in its schema", name(k));
        }
    }
}

#[test]
fn every_kind_round_trips_through_its_protobuf_messages() {
    for k in TABLE {
        let (kind, list) = k.protobuf.messages;
        let want = format!("::{}::{}", k.ty.version, k.ty.kind);
        assert!(kind().ends_with(&want), "{}: message {}", name(k), kind());
        if let Some(list) = list {
            assert_eq!(list(), format!("{}List", kind()), "{}", name(k));
        }
        let obj = json!({"metadata": {"name": "x", "labels": {"a": "b"}}});
        let (encode, decode) = k.protobuf.kind;
        let back = encode(&obj).and_then(|raw| decode(&raw));
        assert_eq!(
            back.map(|v| v["metadata"].clone()),
            Ok(obj["metadata"].clone()),
            "{}",
            name(k)
        );
        if let Some((encode, decode)) = k.protobuf.list {
            let list = json!({"metadata": {"resourceVersion": "5"}, "items": [obj]});
            let back = encode(&list).and_then(|raw| decode(&raw));
            assert_eq!(back, Ok(list), "{} list", name(k));
        }
    }
}

#[test]
fn every_kind_prints_a_cell_per_column() {
    for k in TABLE {
        let obj = json!({"metadata": {"name": "x", "creationTimestamp": "2026-01-01T00:00:00Z"}});
        let cells = (k.printer.cells)(&obj);
        assert_eq!(cells.len(), k.printer.columns.len(), "{}", name(k));
        let at = k.printer.columns.iter().position(|c| c.name == "Name");
        assert_eq!(
            at.map(|i| &cells[i]),
            Some(&Value::from("x")),
            "{}",
            name(k)
        );
    }
}

#[test]
fn kinds_are_unique_and_named_as_upstream() {
    for (i, k) in TABLE.iter().enumerate() {
        assert_eq!(
            lookup(k.ty.group, k.ty.version, k.ty.plural),
            Some(i),
            "{}: another kind has its plural",
            name(k)
        );
        let singular = k.names.singular;
        assert!(
            singular.is_empty() || singular == k.ty.kind.to_lowercase(),
            "{}: singular {singular}",
            name(k)
        );
    }
}
