//! RBAC (`rbac.authorization.k8s.io/v1`): Roles and ClusterRoles, their bindings. Names are path
//! segments, as upstream validates them; a binding's `roleRef` is an atomic struct
//! (defaults-clusterrolebinding.txt). The authorizer, escalation checks and ClusterRole
//! aggregation over them are `auth`'s.

use k8s_openapi::api::rbac::v1 as openapi;
use k8s_pb::api::rbac::v1 as pb;

use crate::api::kind::{
    Admission, Kind, Lifecycle, NameRule, Names, Printer, Protobuf, Rest, Shape, Type,
};

/// ClusterRole.
pub const CLUSTER_ROLE: Kind = Kind {
    ty: Type::of::<openapi::ClusterRole>(),
    names: names("clusterrole"),
    rest: Rest::PLAIN,
    lifecycle: Lifecycle::Object,
    name_rule: NameRule::PathSegment,
    field_selectors: &[],
    patch_lists: &[],
    admission: Admission::NONE,
    printer: Printer::NAME_AGE,
    protobuf: Protobuf::of::<pb::ClusterRole, pb::ClusterRoleList>(),
    apply: Shape::NONE,
};

/// ClusterRoleBinding.
pub const CLUSTER_ROLE_BINDING: Kind = Kind {
    ty: Type::of::<openapi::ClusterRoleBinding>(),
    names: names("clusterrolebinding"),
    rest: Rest::PLAIN,
    lifecycle: Lifecycle::Object,
    name_rule: NameRule::PathSegment,
    field_selectors: &[],
    patch_lists: &[],
    admission: Admission::NONE,
    printer: Printer::NAME_AGE,
    protobuf: Protobuf::of::<pb::ClusterRoleBinding, pb::ClusterRoleBindingList>(),
    apply: BINDING,
};

/// Role.
pub const ROLE: Kind = Kind {
    ty: Type::of::<openapi::Role>(),
    names: names("role"),
    rest: Rest::PLAIN,
    lifecycle: Lifecycle::Object,
    name_rule: NameRule::PathSegment,
    field_selectors: &[],
    patch_lists: &[],
    admission: Admission::NONE,
    printer: Printer::NAME_AGE,
    protobuf: Protobuf::of::<pb::Role, pb::RoleList>(),
    apply: Shape::NONE,
};

/// RoleBinding.
pub const ROLE_BINDING: Kind = Kind {
    ty: Type::of::<openapi::RoleBinding>(),
    names: names("rolebinding"),
    rest: Rest::PLAIN,
    lifecycle: Lifecycle::Object,
    name_rule: NameRule::PathSegment,
    field_selectors: &[],
    patch_lists: &[],
    admission: Admission::NONE,
    printer: Printer::NAME_AGE,
    protobuf: Protobuf::of::<pb::RoleBinding, pb::RoleBindingList>(),
    apply: BINDING,
};

const fn names(singular: &'static str) -> Names {
    Names {
        singular,
        short: &[],
        categories: &[],
    }
}

const BINDING: Shape = Shape {
    list_keys: &[],
    maps: &[],
    atomic: &["roleRef"],
    value_structs: &[],
    allocated_on_create: &[],
};
