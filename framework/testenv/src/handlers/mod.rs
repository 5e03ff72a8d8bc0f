//! The verbs on the store: create, get, list, update, patch, delete, deletecollection, each a
//! read-modify-write under the store lock with upstream's semantics (optimistic concurrency,
//! no-op updates that keep the resourceVersion, finalizers holding a deleted object, namespace
//! cascade, exact-resourceVersion and paginated lists). A client's writes go through the
//! admission chain (`admitted`), which releases the lock while webhooks are called.

mod admitted;
mod converted;
mod delete;
mod object_write;
mod read;
mod target;
mod write;

pub use admitted::{delete_object, write_object};
pub use delete::{DeleteOptions, delete_collection};
pub use object_write::Verb;
pub use read::{ListParams, get, list};
pub use target::{Target, WriteOptions};
pub use write::create;
