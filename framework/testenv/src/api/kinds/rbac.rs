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
pub const CLUSTER_ROLE: Kind = rbac(
    Type::of::<openapi::ClusterRole>(),
    "clusterrole",
    Protobuf::of::<pb::ClusterRole, pb::ClusterRoleList>(),
    Shape::NONE,
);

/// ClusterRoleBinding.
pub const CLUSTER_ROLE_BINDING: Kind = rbac(
    Type::of::<openapi::ClusterRoleBinding>(),
    "clusterrolebinding",
    Protobuf::of::<pb::ClusterRoleBinding, pb::ClusterRoleBindingList>(),
    BINDING,
);

/// Role.
pub const ROLE: Kind = rbac(
    Type::of::<openapi::Role>(),
    "role",
    Protobuf::of::<pb::Role, pb::RoleList>(),
    Shape::NONE,
);

/// RoleBinding.
pub const ROLE_BINDING: Kind = rbac(
    Type::of::<openapi::RoleBinding>(),
    "rolebinding",
    Protobuf::of::<pb::RoleBinding, pb::RoleBindingList>(),
    BINDING,
);

/// An RBAC kind: everything but its type, names, message and shape is the same for all four.
const fn rbac(ty: Type, singular: &'static str, protobuf: Protobuf, apply: Shape) -> Kind {
    Kind {
        ty,
        names: Names {
            singular,
            short: &[],
            categories: &[],
        },
        rest: Rest::PLAIN,
        lifecycle: Lifecycle::Object,
        name_rule: NameRule::PathSegment,
        field_selectors: &[],
        patch_lists: &[],
        admission: Admission::NONE,
        printer: Printer::NAME_AGE,
        protobuf,
        apply,
    }
}

/// A binding's `roleRef` is replaced whole.
const BINDING: Shape = Shape {
    atomic: &["roleRef"],
    ..Shape::NONE
};
