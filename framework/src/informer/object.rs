//! Owns [`Object`]: one cached object, whatever type its kind was watched as (a compile-time
//! type, its metadata, a `DynamicObject`), so one store and one fan-out serve every view of the
//! kind. Views turn it back into their own type (`view.rs`).

use std::any::Any;
use std::fmt::Debug;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::Serialize;

/// What the shared store keeps of one object: its metadata for keys, indexes and spans, and its
/// JSON form for a view of another type (a `DynamicObject` view of a typed informer).
pub(crate) trait Object: Any + Send + Sync + Debug {
    /// The object's metadata.
    fn meta(&self) -> &ObjectMeta;
    /// The object as JSON, for converting it into another view's type.
    fn to_json(&self) -> serde_json::Result<serde_json::Value>;
}

impl<T> Object for T
where
    T: Resource + Serialize + Debug + Send + Sync + 'static,
{
    fn meta(&self) -> &ObjectMeta {
        Resource::meta(self)
    }

    fn to_json(&self) -> serde_json::Result<serde_json::Value> {
        serde_json::to_value(self)
    }
}

/// A cached object as the store and the handlers' queues share it.
pub(crate) type Obj = Arc<dyn Object>;
