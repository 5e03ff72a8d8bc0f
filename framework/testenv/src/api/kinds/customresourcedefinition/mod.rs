//! CustomResourceDefinition (`apiextensions.k8s.io/v1`, cluster-scoped, with `/status`, whose
//! generation the server keeps): the strategy's defaults and initial status (`prepare`), its
//! validation as apiextensions-apiserver words it (`validation`, with its CEL rules' entries
//! checked in `rule_shape` and the rules compiled and refused in `rules`), and the default table
//! convertor's columns. What a CRD sets off when stored (the types it serves) is `crd`'s.

mod prepare;
mod rule_shape;
mod rules;
mod validation;

pub use prepare::storage_version;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as openapi;
use k8s_pb::apiextensions_apiserver::pkg::apis::apiextensions::v1 as pb;
use serde_json::Value;

use crate::api::kind::{
    Admission, Column, Kind, Lifecycle, ListStrategy, NameRule, Names, Printer, Protobuf, Rest,
    Shape, Type,
};
use crate::api::printing::{row, text};

/// CustomResourceDefinition.
pub const KIND: Kind = Kind {
    ty: Type::of::<openapi::CustomResourceDefinition>(),
    names: Names {
        singular: "customresourcedefinition",
        short: &["crd", "crds"],
        categories: &[],
    },
    rest: Rest {
        status: true,
        generation: true,
        ..Rest::PLAIN
    },
    lifecycle: Lifecycle::CustomResourceDefinition,
    name_rule: NameRule::Subdomain,
    field_selectors: &[],
    patch_lists: &[("status.conditions", ListStrategy::MergeByKey("type"))],
    admission: Admission {
        prepare: Some(prepare::prepare),
        validate: Some(validation::validate),
        ..Admission::NONE
    },
    // The default table convertor's.
    printer: Printer {
        columns: &[Column::text("Name"), Column::new("Created At", "date", 0)],
        cells,
    },
    protobuf: Protobuf::of::<pb::CustomResourceDefinition, pb::CustomResourceDefinitionList>(),
    // `spec.conversion` is behind a pointer, so it is owned itself (crd-create.txt).
    apply: Shape {
        value_structs: &["spec.names", "status.acceptedNames"],
        ..Shape::NONE
    },
};

fn cells(obj: &Value) -> Vec<Value> {
    row(obj, vec![text(obj, "/metadata/creationTimestamp").into()])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_new_crd_gets_its_names_conversion_and_stored_version() {
        let mut crd = json!({"spec": {"names": {"kind": "Widget", "plural": "widgets"},
            "versions": [{"name": "v1", "served": true, "storage": true}]}});
        prepare::prepare(&mut crd, None);
        assert_eq!(crd["spec"]["names"]["singular"], "widget");
        assert_eq!(crd["spec"]["names"]["listKind"], "WidgetList");
        assert_eq!(crd["spec"]["conversion"], json!({"strategy": "None"}));
        assert_eq!(crd["status"]["storedVersions"], json!(["v1"]));
    }
}
