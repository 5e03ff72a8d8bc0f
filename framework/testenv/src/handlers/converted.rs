//! A write through a custom resource version that a conversion webhook converts
//! (`crd::conversion`): the stored object is converted to the request's version before the
//! write is staged (a patch applies to it), the write goes through the admission chain in the
//! request's version without being stored, then the object is converted to the storage version
//! and stored (its failure is the write's, conv-webhook-failure-create.txt), and the stored
//! object is converted back for the answer (conv-create-old-version.txt,
//! conv-patch-old-version.txt). No store lock is held while the webhook is called.

use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::object_write::{ObjectWrite, Verb};
use super::target::{Target, WriteOptions};
use super::write;
use crate::admission::chain::{self, Outcome};
use crate::admission::webhooks::Requester;
use crate::api::cluster::AdmissionConfig;
use crate::api::status::ApiError;
use crate::crd::conversion::{self, Converter};
use crate::storage::store::Store;

/// One create, update, patch or apply through a converted version.
pub(super) async fn write_object(
    store: &Store,
    cfg: &AdmissionConfig,
    t: &Target,
    verb: Verb<'_>,
    opts: &WriteOptions,
    user: &Requester,
    converter: &Converter,
) -> Outcome {
    let held = Mutex::new(None);
    let view = match verb {
        Verb::Create(_) => Ok(None),
        _ => stored_view(store, t, converter).await,
    };
    let view = match view {
        Ok(v) => v,
        Err(e) => return refused(e),
    };
    let w = ObjectWrite {
        cfg,
        t,
        verb,
        opts,
        user,
        view,
        held: Some(&held),
    };
    let out = chain::run(store, &w).await;
    let Ok((code, _)) = out.result else {
        return out;
    };
    let staged = held.lock().ok().and_then(|mut h| h.take());
    let result = match staged {
        Some((s, object)) => store_converted(store, t, converter, &s, object).await,
        None => Err(ApiError::internal("the write was not staged")),
    };
    Outcome {
        result: result.map(|answer| (code, answer)),
        warnings: out.warnings,
    }
}

fn refused(e: ApiError) -> Outcome {
    Outcome {
        result: Err(e),
        warnings: Vec::new(),
    }
}

/// The stored object as the request's version shows it (none when there is none).
async fn stored_view(
    store: &Store,
    t: &Target,
    converter: &Converter,
) -> Result<Option<Arc<Value>>, ApiError> {
    let stored = store.with(|s| s.get(t.res, t.ns_key(), t.name()).cloned());
    let Some(stored) = stored else {
        return Ok(None);
    };
    let view = conversion::read(Some(converter), &t.rt, vec![(*stored).clone()]).await?;
    Ok(view.into_iter().next().map(Arc::new))
}

/// `object` (the request's version) converted, stored unless on a dry run, and converted back.
async fn store_converted(
    store: &Store,
    t: &Target,
    converter: &Converter,
    s: &write::Staged,
    object: Value,
) -> Result<Value, ApiError> {
    let rt = &t.rt;
    let storage = rt
        .custom()
        .map(|c| format!("{}/{}", c.group, c.storage_version))
        .unwrap_or_default();
    let converted = conversion::convert(converter, vec![object], &storage).await?;
    let converted = converted.into_iter().next().unwrap_or_default();
    let stored = match s.opts.dry_run {
        true => converted,
        false => store
            .with(|state| write::store_converted(state, s, converted))?
            .ok_or_else(|| {
                let name = t.name.as_deref().unwrap_or("");
                ApiError::stale(rt.group(), rt.plural(), name)
            })?,
    };
    let answer = conversion::read(Some(converter), rt, vec![stored]).await?;
    Ok(answer.into_iter().next().unwrap_or_default())
}
