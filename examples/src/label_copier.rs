//! A controller over kinds named at run time: for every object of each kind in `--kinds`, copies
//! the value of one label (`--label`, e.g. a team or cost-centre label) onto the object's
//! controlling owner, whatever kind the owner is, so selecting on the owners finds what their
//! children carry.
//!
//! One builder controller per kind (`label-copier-<apiVersion-kind>`), each over the kind's
//! metadata only (`PartialObjectMeta<DynamicObject>`): labels and owner references are all it
//! reads, so the process caches no Pod spec or Secret data, and shares one watch per kind with
//! any other controller in the process. A kind whose CRD is not yet Established is waited for
//! (and named by /readyz); an unknown kind stops the process at start with the reason.

use std::collections::HashMap;
use std::sync::Arc;

use controller_manager::builder::{ControllerBuilder, predicates};
use controller_manager::controller::Action;
use controller_manager::informer::{CacheOptions, KindError, KindOptions, parse_kind};
use controller_manager::manager::{InitContext, InitError, InitOutcome, Initializer, Initializers};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, Patch, PatchParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind, PartialObjectMeta};
use kube::discovery::Scope;
use kube::{Client, ResourceExt};
use parking_lot::Mutex;
use serde_json::json;

/// The prefix of every controller's name.
pub const NAME: &str = "label-copier";

/// The controller of `kind` (`apiVersion/Kind`) as `--controllers` and the metrics name it:
/// `label-copier-apps-v1-replicaset`.
pub fn controller_name(kind: &str) -> String {
    format!(
        "{NAME}-{}",
        kind.to_ascii_lowercase().replace(['/', '.'], "-")
    )
}

/// One initializer per kind in `kinds`, each copying `label` from the kind's objects onto their
/// owners; fails on the first kind that is not written `apiVersion/Kind`.
pub fn initializers<C: Send + Sync + 'static>(
    kinds: &[String],
    label: &str,
) -> Result<Initializers<C>, KindError> {
    let owners = Arc::new(Owners::default());
    let mut initializers = Initializers::new();
    for kind in kinds {
        parse_kind(kind)?;
        let (kind, label, owners) = (kind.clone(), label.to_string(), owners.clone());
        initializers = initializers.with(Initializer::new(controller_name(&kind), move |ctx| {
            init(ctx, kind.clone(), label.clone(), owners.clone())
        }));
    }
    Ok(initializers)
}

/// The process's cache: of each kind in `kinds`, only the objects `selector` matches (all when
/// `None`). The API server parses the selector: one it cannot parse stops the process at start
/// with the server's message.
pub fn cache_options(kinds: &[String], selector: Option<&str>) -> Result<CacheOptions, KindError> {
    let Some(selector) = selector else {
        return Ok(CacheOptions::new());
    };
    kinds.iter().try_fold(CacheOptions::new(), |cache, kind| {
        cache.kind_named(kind, KindOptions::new().labels(selector))
    })
}

async fn init<C: Send + Sync + 'static>(
    ctx: InitContext<C>,
    kind: String,
    label: String,
    owners: Arc<Owners>,
) -> Result<InitOutcome, InitError> {
    let client = ctx.client.clone();
    Ok(
        ControllerBuilder::<PartialObjectMeta<DynamicObject>>::dynamic(&ctx, &kind)?
            // New objects, and changes of their labels, are all that can change the copy.
            .with_predicate(predicates::labels_changed)
            .start_fn(move |obj| copy(client.clone(), owners.clone(), label.clone(), obj)),
    )
}

/// Puts `obj`'s `label` on its controlling owner, unless the owner has it already.
async fn copy(
    client: Client,
    owners: Arc<Owners>,
    label: String,
    obj: Arc<PartialObjectMeta<DynamicObject>>,
) -> kube::Result<Action> {
    let Some(value) = obj.labels().get(&label) else {
        return Ok(Action::Done);
    };
    let Some(owner) = obj
        .owner_references()
        .iter()
        .find(|r| r.controller == Some(true))
    else {
        return Ok(Action::Done);
    };
    let (resource, namespaced) = owners.resolve(&client, owner).await?;
    let api: Api<DynamicObject> = match obj.namespace() {
        Some(ns) if namespaced => Api::namespaced_with(client, &ns, &resource),
        _ => Api::all_with(client, &resource),
    };
    let Some(current) = api.get_metadata_opt(&owner.name).await? else {
        return Ok(Action::Done);
    };
    if current.labels().get(&label) != Some(value) {
        let patch = json!({"metadata": {"labels": {label.as_str(): value}}});
        api.patch(&owner.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        tracing::info!(owner = %owner.name, kind = %owner.kind, %label, %value, "label copied onto owner");
    }
    Ok(Action::Done)
}

/// Owner kinds as discovery found them (resource and scope), asked once per kind.
#[derive(Default)]
struct Owners(Mutex<HashMap<(String, String), (ApiResource, bool)>>);

impl Owners {
    async fn resolve(
        &self,
        client: &Client,
        owner: &OwnerReference,
    ) -> kube::Result<(ApiResource, bool)> {
        let key = (owner.api_version.clone(), owner.kind.clone());
        if let Some(found) = self.0.lock().get(&key) {
            return Ok(found.clone());
        }
        let gvk = GroupVersionKind::from(owner.clone());
        let (resource, caps) = kube::discovery::pinned_kind(client, &gvk).await?;
        let found = (resource, caps.scope == Scope::Namespaced);
        self.0.lock().insert(key, found.clone());
        Ok(found)
    }
}
