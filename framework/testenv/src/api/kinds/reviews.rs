//! The create-only review APIs (`authentication.k8s.io/v1` TokenReview, `authorization.k8s.io/v1`
//! SubjectAccessReview, SelfSubjectAccessReview, LocalSubjectAccessReview,
//! SelfSubjectRulesReview): served for discovery, OpenAPI and protobuf here, answered by `auth`
//! and never stored. They have no singular name and no list, as upstream.

use k8s_openapi::api::authentication::v1 as authn;
use k8s_openapi::api::authorization::v1 as authz;
use k8s_pb::api::authentication::v1 as authn_pb;
use k8s_pb::api::authorization::v1 as authz_pb;

use crate::api::kind::{
    Admission, Kind, Lifecycle, NameRule, Names, Printer, Protobuf, Rest, Shape, Type,
};

/// TokenReview.
pub const TOKEN_REVIEW: Kind = review(
    Type::of::<authn::TokenReview>(),
    Protobuf::without_list::<authn_pb::TokenReview>(),
);

/// SubjectAccessReview.
pub const SUBJECT_ACCESS_REVIEW: Kind = review(
    Type::of::<authz::SubjectAccessReview>(),
    Protobuf::without_list::<authz_pb::SubjectAccessReview>(),
);

/// SelfSubjectAccessReview.
pub const SELF_SUBJECT_ACCESS_REVIEW: Kind = review(
    Type::of::<authz::SelfSubjectAccessReview>(),
    Protobuf::without_list::<authz_pb::SelfSubjectAccessReview>(),
);

/// LocalSubjectAccessReview.
pub const LOCAL_SUBJECT_ACCESS_REVIEW: Kind = review(
    Type::of::<authz::LocalSubjectAccessReview>(),
    Protobuf::without_list::<authz_pb::LocalSubjectAccessReview>(),
);

/// SelfSubjectRulesReview.
pub const SELF_SUBJECT_RULES_REVIEW: Kind = review(
    Type::of::<authz::SelfSubjectRulesReview>(),
    Protobuf::without_list::<authz_pb::SelfSubjectRulesReview>(),
);

/// A review API: everything but its type and message is the same for all of them.
const fn review(ty: Type, protobuf: Protobuf) -> Kind {
    Kind {
        ty,
        names: Names {
            singular: "",
            short: &[],
            categories: &[],
        },
        rest: Rest {
            verbs: &["create"],
            ..Rest::PLAIN
        },
        lifecycle: Lifecycle::Object,
        name_rule: NameRule::Subdomain,
        field_selectors: &[],
        patch_lists: &[],
        admission: Admission::NONE,
        printer: Printer::NAME_AGE,
        protobuf,
        apply: Shape::NONE,
    }
}
