//! Owns [`Projection`]: how one view of a kind reads the objects its informer stores, whatever
//! type the informer watched them as.
//!
//! - The stored type itself: the same `Arc`, no copy.
//! - Metadata only (`PartialObjectMeta<K>`, `PartialObjectMeta<DynamicObject>`): of a full
//!   informer, the object's `ObjectMeta` cloned into the view's type on each read or event; of
//!   a metadata-only informer, which stores it packed (`compact.rs`), unpacked the same way.
//! - Another full type (a `DynamicObject` view of a typed informer): through JSON.
//!
//! Within one event the old and the new object are projected once when they are the same
//! `Arc` (a resync or an unchanged relist), so `Arc::ptr_eq(old, new)` still tells a
//! re-delivery in every view.

use std::any::Any;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::event::Event;
use super::object::{Obj, Object};
use super::resource::CacheResource;

/// The media type fields a metadata-only answer carries, and the empty object every metadata
/// projection starts from.
const METADATA_PROTOTYPE: &str =
    r#"{"apiVersion":"meta.k8s.io/v1","kind":"PartialObjectMetadata","metadata":{}}"#;

/// A copy of a stored object as `V`, if it converts.
type Convert<V> = Box<dyn Fn(&dyn Object) -> Option<V> + Send + Sync>;

/// Reads stored objects as `V`. Made where `V`'s bounds are known ([`Projection::new`]), used
/// where they are not (any handler or store of `V`).
pub(crate) struct Projection<V> {
    /// A copy of the object as `V`, for objects stored as another type.
    convert: Convert<V>,
}

impl<V: CacheResource> Projection<V> {
    pub(crate) fn new() -> Self {
        let prototype = V::metadata_api()
            .then(|| serde_json::from_str::<V>(METADATA_PROTOTYPE).ok())
            .flatten();
        let convert = move |obj: &dyn Object| match &prototype {
            Some(prototype) => {
                let mut view = prototype.clone();
                *view.meta_mut() = obj.meta().into_owned();
                Some(view)
            }
            None => through_json(obj),
        };
        Projection {
            convert: Box::new(convert),
        }
    }

    /// Runs a metadata view's `f` on `meta`, for a transform that must apply to whatever type
    /// the informer stores.
    pub(crate) fn edit_meta(meta: &mut ObjectMeta, f: &impl Fn(&mut V)) {
        if let Ok(mut view) = serde_json::from_str::<V>(METADATA_PROTOTYPE) {
            *view.meta_mut() = std::mem::take(meta);
            f(&mut view);
            *meta = std::mem::take(view.meta_mut());
        }
    }
}

impl<V: Send + Sync + 'static> Projection<V> {
    /// The stored `Arc` when the object is stored as `V`; `None` when it needs converting.
    pub(crate) fn same(obj: &Obj) -> Option<Arc<V>> {
        let stored: &dyn Any = &**obj;
        if !stored.is::<V>() {
            return None;
        }
        let any: Arc<dyn Any + Send + Sync> = obj.clone();
        any.downcast::<V>().ok()
    }

    /// The object as `V`, sharing the stored `Arc` when it already is one.
    pub(crate) fn arc(&self, obj: &Obj) -> Option<Arc<V>> {
        let any: Arc<dyn Any + Send + Sync> = obj.clone();
        match any.downcast::<V>() {
            Ok(same) => Some(same),
            Err(_) => (self.convert)(obj.as_ref()).map(Arc::new),
        }
    }

    /// Runs `f` on the object as `V`, without a copy when it already is one.
    pub(crate) fn with<R>(&self, obj: &dyn Object, f: impl FnOnce(&V) -> R) -> Option<R> {
        let any: &dyn Any = obj;
        match any.downcast_ref::<V>() {
            Some(same) => Some(f(same)),
            None => (self.convert)(obj).map(|v| f(&v)),
        }
    }

    /// One event as `V`; `None` when the object does not convert (logged).
    pub(crate) fn event(&self, event: &Event<dyn Object>) -> Option<Event<V>> {
        Some(match event {
            Event::Added(obj) => Event::Added(self.arc(obj)?),
            Event::Deleted(obj) => Event::Deleted(self.arc(obj)?),
            Event::Updated { old, new } if Arc::ptr_eq(old, new) => {
                let same = self.arc(new)?;
                Event::Updated {
                    old: Arc::clone(&same),
                    new: same,
                }
            }
            Event::Updated { old, new } => Event::Updated {
                old: self.arc(old)?,
                new: self.arc(new)?,
            },
        })
    }
}

/// `obj` as `V` through its JSON form; `None` (logged) when it does not fit `V`.
fn through_json<V: CacheResource>(obj: &dyn Object) -> Option<V> {
    match obj
        .to_json()
        .and_then(|json| serde_json::from_value::<V>(json))
    {
        Ok(view) => Some(view),
        Err(error) => {
            tracing::warn!(
                view = std::any::type_name::<V>(),
                object = %obj.key(),
                %error,
                "cached object does not convert into this view's type; skipped"
            );
            None
        }
    }
}
