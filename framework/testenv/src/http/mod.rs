//! The wire: the accept loop and connections (`server`), one request from arrival to response
//! (`router`: URL, verb, faults, authentication, dispatch), content negotiation and protobuf,
//! server-side printing (`table`), watch streams, discovery and OpenAPI documents,
//! query parameters and `fieldValidation`, and the state every connection shares.

pub mod discovery;
pub mod faults;
pub mod fieldcheck;
pub mod openapi;
pub mod protobuf;
pub mod query;
pub mod router;
pub mod server;
pub mod shared;
pub mod table;
pub mod watch;
pub mod watch_list;
