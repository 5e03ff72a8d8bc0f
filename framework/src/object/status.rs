//! Owns [`patch_status`]: the status write that is skipped when nothing changed.

use std::fmt::Debug;

use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Writes `status` to `obj`'s status subresource with a JSON merge patch, unless it equals the
/// status `obj` already has; returns whether it wrote. Comparing first keeps a controller that
/// reconciles on every change of its object from looping on its own writes, and spares the API
/// server a request per reconcile.
///
/// Merge-patch rules apply: lists (such as `conditions`) are replaced whole, and a field is
/// cleared only when `status` serializes it as `null`, not when it omits it.
pub async fn patch_status<K, S>(api: &Api<K>, obj: &K, status: &S) -> kube::Result<bool>
where
    K: Resource + Serialize + DeserializeOwned + Clone + Debug,
    S: Serialize,
{
    let desired = serde_json::to_value(status).map_err(kube::Error::SerdeError)?;
    let current = serde_json::to_value(obj)
        .map_err(kube::Error::SerdeError)?
        .get("status")
        .cloned()
        .unwrap_or(serde_json::Value::Null);
    if current == desired {
        return Ok(false);
    }
    let patch = serde_json::json!({ "status": desired });
    api.patch_status(
        &obj.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    Ok(true)
}
