//! Owns [`finalizer`]: a reconcile wrapped so that cleanup runs before a deleted object goes away
//! (kube-runtime's `finalizer`, with its race-free patches).
//!
//! | object | what happens |
//! |---|---|
//! | alive, without our finalizer | the finalizer is added, then [`Finalizer::Apply`] runs on the patched object |
//! | alive, with it | [`Finalizer::Apply`] |
//! | deleted (`deletionTimestamp` set), with it | [`Finalizer::Cleanup`]; on success the finalizer is removed and the API server deletes the object |
//! | deleted, without it | nothing: our cleanup already ran, another finalizer holds the object |
//!
//! Finalizers are changed with JSON patches that `test` the list first, so a concurrent change by
//! another controller makes the patch fail (and the key retry) instead of being overwritten.

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;

use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;
use tower::BoxError;

use crate::controller::Action;

/// What the wrapped reconcile is asked to do.
#[derive(Debug)]
pub enum Finalizer<K> {
    /// Bring the object to its desired state; our finalizer is on it.
    Apply(Arc<K>),
    /// The object is being deleted: release what it holds. Must be idempotent: a failure after
    /// partial cleanup calls it again.
    Cleanup(Arc<K>),
}

/// Why [`finalizer`] failed; the reconcile's own errors keep their chain (so a
/// [`RetryAfter`](crate::controller::RetryAfter) inside is still honoured).
#[derive(Debug, thiserror::Error)]
pub enum FinalizerError {
    /// The reconcile's `Apply` failed.
    #[error("failed to apply object: {0}")]
    ApplyFailed(#[source] BoxError),
    /// The reconcile's `Cleanup` failed; the finalizer stays, so the object is not deleted yet.
    #[error("failed to clean up object: {0}")]
    CleanupFailed(#[source] BoxError),
    /// Adding the finalizer failed (e.g. a concurrent change of the finalizer list).
    #[error("failed to add finalizer: {0}")]
    AddFinalizer(#[source] kube::Error),
    /// Removing the finalizer failed; cleanup will run again, which it must tolerate.
    #[error("failed to remove finalizer: {0}")]
    RemoveFinalizer(#[source] kube::Error),
    /// An object without a name cannot be patched; only a malformed object gets here.
    #[error("object has no name")]
    UnnamedObject,
}

/// Runs `reconcile` for `obj` under the finalizer `name` (e.g. `example.com/cleanup`); see the
/// module docs for the cases. `api` must address `obj`'s namespace.
pub async fn finalizer<K, F, Fut, E>(
    api: &Api<K>,
    name: &str,
    obj: Arc<K>,
    reconcile: F,
) -> Result<Action, FinalizerError>
where
    K: Resource + Serialize + DeserializeOwned + Clone + Debug,
    F: FnOnce(Finalizer<K>) -> Fut,
    Fut: Future<Output = Result<Action, E>>,
    E: Into<BoxError>,
{
    let object_name = obj
        .meta()
        .name
        .clone()
        .ok_or(FinalizerError::UnnamedObject)?;
    let index = obj.finalizers().iter().position(|f| f == name);
    let deleting = obj.meta().deletion_timestamp.is_some();
    match (index, deleting) {
        (Some(_), false) => reconcile(Finalizer::Apply(obj))
            .await
            .map_err(|e| FinalizerError::ApplyFailed(e.into())),
        (Some(index), true) => {
            let action = reconcile(Finalizer::Cleanup(obj))
                .await
                .map_err(|e| FinalizerError::CleanupFailed(e.into()))?;
            let path = format!("/metadata/finalizers/{index}");
            let remove = json!([
                {"op": "test", "path": path, "value": name},
                {"op": "remove", "path": path},
            ]);
            json_patch(api, &object_name, remove)
                .await
                .map_err(FinalizerError::RemoveFinalizer)?;
            Ok(action)
        }
        (None, true) => Ok(Action::Done),
        (None, false) => {
            // `test` what we saw, then add: a concurrent writer makes the patch fail. Without a
            // list there is nothing to test, so the resourceVersion stands in for it.
            let add = if obj.meta().finalizers.is_none() {
                json!([
                    {"op": "test", "path": "/metadata/resourceVersion", "value": obj.resource_version()},
                    {"op": "add", "path": "/metadata/finalizers", "value": [name]},
                ])
            } else {
                json!([
                    {"op": "test", "path": "/metadata/finalizers", "value": obj.finalizers()},
                    {"op": "add", "path": "/metadata/finalizers/-", "value": name},
                ])
            };
            let patched = json_patch(api, &object_name, add)
                .await
                .map_err(FinalizerError::AddFinalizer)?;
            // Apply at once: the finalizer write changes no generation, so a controller filtering
            // on `generation_changed` would never see it come back.
            reconcile(Finalizer::Apply(Arc::new(patched)))
                .await
                .map_err(|e| FinalizerError::ApplyFailed(e.into()))
        }
    }
}

async fn json_patch<K>(api: &Api<K>, name: &str, ops: serde_json::Value) -> kube::Result<K>
where
    K: Clone + DeserializeOwned + Debug,
{
    let ops: json_patch::Patch = serde_json::from_value(ops).map_err(kube::Error::SerdeError)?;
    api.patch(name, &PatchParams::default(), &Patch::Json::<()>(ops))
        .await
}
