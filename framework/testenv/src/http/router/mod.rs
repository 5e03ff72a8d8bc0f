//! One HTTP request from arrival to response: URL parsing into (group, version, namespace,
//! resource, name, subresource) and a kube-apiserver verb, injected latency and faults, dispatch
//! to discovery / handlers / watch, JSON rendering (pretty for curl, as upstream), and the request
//! log entry.

mod deadline;
mod negotiation;
mod respond;
mod route;
mod serve;

pub use deadline::DEFAULT_REQUEST_TIMEOUT;
pub use serve::handle;
