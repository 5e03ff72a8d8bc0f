//! Where objects live: the store (every object, the global resourceVersion, the event history
//! and the fan-out to watches, each through its bounded backlog), the label and field selectors lists and watches filter by, the
//! allocated Service addresses the store keeps in step with every write, and list continue
//! tokens.

pub mod allocations;
pub mod backlog;
pub mod continue_token;
pub mod selectors;
pub mod store;
