//! Owns finding a kind given at run time: which resource (plural) and scope the API server
//! serves it as, through discovery of its group version, and what to do when it does not.
//!
//! - Served with `list` and `watch`: resolved.
//! - Served without them (`v1/Binding`, `authorization.k8s.io/v1/SubjectAccessReview`): an
//!   error; an informer cannot list it.
//! - Not served, in a group no CustomResourceDefinition can add to (one without a dot: the
//!   core group, `apps`, `batch`, ...): an unknown kind, an error.
//! - Not served in any other group: not yet, perhaps; its CRD may be created or not be
//!   Established yet. The informer waits, saying what for, and asks again.

use std::time::Duration;

use kube::Client;
use kube::core::{ApiResource, GroupVersion, GroupVersionKind};
use kube::discovery::{pinned_group, verbs};
use tokio_util::sync::CancellationToken;

use super::kind::kind_name;

/// How discovery is asked again while a kind is not served: from the first delay, doubling up
/// to the last.
const FIRST_RETRY: Duration = Duration::from_millis(500);
const LAST_RETRY: Duration = Duration::from_secs(8);

/// A kind as the API server serves it.
#[derive(Clone, Debug)]
pub(crate) struct Resolved {
    /// Group, version, kind and the served plural.
    pub(crate) resource: ApiResource,
    /// Whether its objects live in namespaces.
    pub(crate) namespaced: bool,
}

/// What discovery said about a kind.
#[derive(Debug)]
pub(crate) enum Resolution {
    Served(Resolved),
    /// Not served (yet): what the informer waits for.
    Waiting(String),
    /// Never servable to an informer: why.
    Invalid(String),
}

/// Asks discovery about `gvk` once.
pub(crate) async fn resolve(client: &Client, gvk: &GroupVersionKind) -> Resolution {
    let gv = GroupVersion::gv(&gvk.group, &gvk.version);
    let name = kind_name(gvk);
    let builtin = !gvk.group.contains('.');
    let group = match pinned_group(client, &gv).await {
        Ok(group) => group,
        Err(kube::Error::Api(status)) if status.code == 404 => {
            return if builtin {
                Resolution::Invalid(format!(
                    "unknown kind {name}: the API server serves no {}",
                    gv.api_version()
                ))
            } else {
                Resolution::Waiting(format!(
                    "{name} to be served: the API server serves no {} yet (is its CustomResourceDefinition created and Established?)",
                    gv.api_version()
                ))
            };
        }
        Err(error) => {
            return Resolution::Waiting(format!(
                "discovery of {} to find {name} (it failed: {error})",
                gv.api_version()
            ));
        }
    };
    let resources = group.versioned_resources(&gvk.version);
    let Some((resource, caps)) = resources.iter().find(|(r, _)| r.kind == gvk.kind) else {
        let mut kinds: Vec<&str> = resources.iter().map(|(r, _)| r.kind.as_str()).collect();
        kinds.sort_unstable();
        kinds.dedup();
        return if builtin {
            Resolution::Invalid(format!(
                "unknown kind {name}: {} serves {}",
                gv.api_version(),
                kinds.join(", ")
            ))
        } else {
            Resolution::Waiting(format!(
                "{name} to be served: {} serves no {} yet (is its CustomResourceDefinition created and Established?)",
                gv.api_version(),
                gvk.kind
            ))
        };
    };
    if !(caps.supports_operation(verbs::LIST) && caps.supports_operation(verbs::WATCH)) {
        return Resolution::Invalid(format!(
            "{name} is not served for list and watch (it serves {}); an informer needs both",
            caps.operations.join(", ")
        ));
    }
    Resolution::Served(Resolved {
        resource: resource.clone(),
        namespaced: caps.scope == kube::discovery::Scope::Namespaced,
    })
}

/// Asks discovery about `gvk` until it is served (`Ok`), can never be (`Err`), or `stop`
/// fires (`None`); calls `waiting` with what it waits for each time that changes.
pub(crate) async fn resolve_until_served(
    client: &Client,
    gvk: &GroupVersionKind,
    waiting: impl Fn(String),
    stop: &CancellationToken,
) -> Option<Result<Resolved, String>> {
    let mut delay = FIRST_RETRY;
    loop {
        match resolve(client, gvk).await {
            Resolution::Served(resolved) => return Some(Ok(resolved)),
            Resolution::Invalid(why) => return Some(Err(why)),
            Resolution::Waiting(what) => {
                tracing::debug!(kind = %kind_name(gvk), waiting_for = %what, "kind not served yet");
                waiting(what);
            }
        }
        tokio::select! {
            _ = stop.cancelled() => return None,
            _ = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(LAST_RETRY);
    }
}
