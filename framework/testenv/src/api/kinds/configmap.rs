//! ConfigMap (`v1`, namespaced): plain object-meta rules; its data and binaryData are maps each
//! key of which is owned on its own; kubectl counts its keys.

use k8s_openapi::api::core::v1 as openapi;
use k8s_pb::api::core::v1 as pb;
use serde_json::Value;

use crate::api::kind::{
    Admission, Column, Kind, Lifecycle, NameRule, Names, Printer, Protobuf, Rest, Shape, Type,
};
use crate::api::printing::{age, row};

/// ConfigMap.
pub const KIND: Kind = Kind {
    ty: Type::of::<openapi::ConfigMap>(),
    names: Names {
        singular: "configmap",
        short: &["cm"],
        categories: &[],
    },
    rest: Rest::PLAIN,
    lifecycle: Lifecycle::Object,
    name_rule: NameRule::Subdomain,
    field_selectors: &[],
    patch_lists: &[],
    admission: Admission::NONE,
    printer: Printer {
        columns: &[
            Column::text("Name"),
            Column::new("Data", "integer", 0),
            Column::text("Age"),
        ],
        cells,
    },
    protobuf: Protobuf::of::<pb::ConfigMap, pb::ConfigMapList>(),
    apply: Shape {
        maps: &["data", "binaryData"],
        ..Shape::NONE
    },
};

fn cells(obj: &Value) -> Vec<Value> {
    let n = ["data", "binaryData"]
        .iter()
        .filter_map(|k| obj.get(*k).and_then(Value::as_object))
        .map(|m| m.len())
        .sum::<usize>();
    row(obj, vec![n.into(), age(obj).into()])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn data_counts_both_maps() {
        let cm =
            json!({"metadata": {"name": "c"}, "data": {"a": "1"}, "binaryData": {"b": "AA=="}});
        assert_eq!(cells(&cm)[..2], [json!("c"), json!(2)]);
    }
}
