//! The Kubernetes API as data, below everything that serves it: the kinds served (the built-in
//! table and the CRD-defined registry), their schemas (the built-ins' generated OpenAPI, a
//! custom resource's structural schema), what decoding into a kind refuses, the `Status` errors,
//! name and label rules, object-meta values the server makes up, request and object size
//! limits, and the body formats (JSON, YAML).

pub mod body;
pub mod cel;
pub mod decoding;
pub mod limits;
pub mod meta;
pub mod openapi;
pub mod resources;
pub mod status;
pub mod structural;
pub mod types;
pub mod validation;
