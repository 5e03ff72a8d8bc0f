//! Controller pieces run over the fake cloud without an API server: what the node and lifecycle
//! controllers read from each facet, the instrumented provider and its call budget, and the route
//! reconcile pass. One test binary, so the workspace links it once.

mod budget;
mod instrumented;
mod node_cloud_state;
mod node_metadata;
mod route_reconcile_pass;
