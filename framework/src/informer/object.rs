//! Owns [`Object`]: one cached object, whatever type its kind was watched as (a compile-time
//! type, its metadata packed as [`CompactMeta`], a `DynamicObject`), so one store and one
//! fan-out serve every view of the kind. Views turn it back into their own type (`view.rs`).

use std::any::Any;
use std::borrow::Cow;
use std::fmt::Debug;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::Serialize;

use super::compact::CompactMeta;
use super::key::ObjectKey;

/// What the shared store keeps of one object: its metadata for keys, indexes and spans, and its
/// JSON form for a view of another type (a `DynamicObject` view of a typed informer).
pub(crate) trait Object: Any + Send + Sync + Debug {
    /// The object's metadata (a copy when it is stored packed).
    fn meta(&self) -> Cow<'_, ObjectMeta>;
    /// The key the store files the object under.
    fn key(&self) -> ObjectKey;
    /// The object's resourceVersion.
    fn resource_version(&self) -> Option<&str>;
    /// The object as JSON, for converting it into another view's type.
    fn to_json(&self) -> serde_json::Result<serde_json::Value>;
}

impl<T> Object for T
where
    T: Resource + Serialize + Debug + Send + Sync + 'static,
{
    fn meta(&self) -> Cow<'_, ObjectMeta> {
        Cow::Borrowed(Resource::meta(self))
    }

    fn key(&self) -> ObjectKey {
        ObjectKey::from_meta(Resource::meta(self))
    }

    fn resource_version(&self) -> Option<&str> {
        Resource::meta(self).resource_version.as_deref()
    }

    fn to_json(&self) -> serde_json::Result<serde_json::Value> {
        serde_json::to_value(self)
    }
}

impl Object for CompactMeta {
    fn meta(&self) -> Cow<'_, ObjectMeta> {
        Cow::Owned(self.unpack())
    }

    fn key(&self) -> ObjectKey {
        CompactMeta::key(self)
    }

    fn resource_version(&self) -> Option<&str> {
        CompactMeta::resource_version(self)
    }

    fn to_json(&self) -> serde_json::Result<serde_json::Value> {
        CompactMeta::to_json(self)
    }
}

/// A cached object as the store and the handlers' queues share it.
pub(crate) type Obj = Arc<dyn Object>;

/// `obj` as the store keeps it: packed when the informer watches metadata only, as is otherwise.
pub(crate) fn stored<K: Resource + Serialize + Debug + Send + Sync + 'static>(mut obj: K) -> Obj {
    if K::metadata_api() {
        Arc::new(CompactMeta::pack(std::mem::take(obj.meta_mut())))
    } else {
        Arc::new(obj)
    }
}
