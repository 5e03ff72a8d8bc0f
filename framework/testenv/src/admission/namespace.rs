//! NamespaceLifecycle: nothing is created in a namespace that does not exist (404) or is being
//! deleted (403).

use serde_json::json;

use crate::api::kinds::lookup;
use crate::api::status::ApiError;
use crate::storage::store::State;

/// NamespaceLifecycle: 404 for a missing namespace, 403 for a terminating one.
pub fn check_open(state: &State, ns: &str) -> Result<(), ApiError> {
    let Some(nsid) = lookup("", "v1", "namespaces") else {
        return Ok(());
    };
    match state.get(nsid, "", ns) {
        None => Err(ApiError::not_found("", "namespaces", ns)),
        Some(n) if n.pointer("/metadata/deletionTimestamp").is_some() => Err(ApiError {
            code: 403,
            reason: "Forbidden".into(),
            message: format!(
                "unable to create new content in namespace {ns} because it is being terminated"
            ),
            details: Some(
                json!({"causes": [{"reason": "NamespaceTerminating", "message": format!("namespace {ns} is being terminated"), "field": "metadata.namespace"}]}),
            ),
            retry_after: None,
        }),
        Some(_) => Ok(()),
    }
}
