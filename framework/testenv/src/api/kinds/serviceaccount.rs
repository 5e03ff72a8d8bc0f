//! ServiceAccount (`v1`, namespaced): plain object-meta rules; what it is for (the tokens minted
//! for it, the `default` one a Pod gets) is `auth`'s and the Pod's.

use k8s_openapi::api::core::v1 as openapi;
use k8s_pb::api::core::v1 as pb;

use crate::api::kind::{
    Admission, Kind, Lifecycle, NameRule, Names, Printer, Protobuf, Rest, Shape, Type,
};

/// ServiceAccount.
pub const KIND: Kind = Kind {
    ty: Type::of::<openapi::ServiceAccount>(),
    names: Names {
        singular: "serviceaccount",
        short: &["sa"],
        categories: &[],
    },
    rest: Rest::PLAIN,
    lifecycle: Lifecycle::Object,
    name_rule: NameRule::Subdomain,
    field_selectors: &[],
    patch_lists: &[],
    admission: Admission::NONE,
    printer: Printer::NAME_AGE,
    protobuf: Protobuf::of::<pb::ServiceAccount, pb::ServiceAccountList>(),
    apply: Shape::NONE,
};
