//! The wire: the accept loop and connections (`server`), one request from arrival to response
//! (`router`: URL, verb, faults, authentication, dispatch), content negotiation (`accept`) and
//! protobuf, server-side printing (`table`), metadata-only answers (`partial`),
//! watch streams, discovery and OpenAPI documents,
//! query parameters and `fieldValidation`, and the state every connection shares.

pub mod accept;
pub mod discovery;
pub mod faults;
pub mod fieldcheck;
pub mod openapi;
pub mod partial;
pub mod protobuf;
pub mod query;
pub mod router;
pub mod server;
pub mod shared;
pub mod table;
pub mod watch;
pub mod watch_list;
