//! The Kubernetes API as data, below everything that serves it: the built-in kinds, one value
//! each (`kind`, `kinds`), and the types CRDs define at run time (`types`); their schemas (the
//! built-ins' generated OpenAPI, a custom resource's structural schema) and protobuf messages;
//! what decoding into a kind refuses; the `Status` errors, name and label rules, object-meta
//! values the server makes up, what kubectl's printers share, the cluster a kind's admission
//! may consult, request and object size limits, and the body formats (JSON, YAML).

pub mod body;
pub mod cel;
pub mod cluster;
pub mod decoding;
pub mod json_depth;
pub mod kind;
pub mod kinds;
pub mod limits;
pub mod meta;
pub mod openapi;
pub mod printing;
pub mod protobuf;
pub mod status;
pub mod structural;
pub mod types;
pub mod validation;
