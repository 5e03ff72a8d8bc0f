//! One webhook call: a dry run only to a webhook without side effects, the review in the version
//! the webhook takes, the HTTPS `POST` within its `timeoutSeconds` (`crate::webhook_client`), and
//! the answer checked. No store lock is held here.

use super::failure::{self, Failure};
use super::matching::Invocation;
use super::review::{self, BadAnswer, Verdict};
use super::{Objects, Request};
use crate::webhook_client::{self, CallError};

/// Calls `inv` about `req` with `objects` (already in the version the webhook named).
pub async fn call(
    inv: &Invocation,
    req: &Request,
    objects: &Objects,
    mutating: bool,
) -> Result<Verdict, Failure> {
    let hook = &inv.hook;
    if req.dry_run && !matches!(hook.side_effects.as_str(), "None" | "NoneOnDryRun") {
        return Err(Failure::Refused(failure::dry_run_unsupported(&hook.name)));
    }
    let Some(version) = review::version(inv) else {
        return Err(Failure::Calling(
            "could not create admission objects: webhook does not accept known AdmissionReview versions (v1, v1beta1)".into(),
        ));
    };
    let target = match &inv.target {
        Ok(t) => t,
        Err(e) => return Err(Failure::Calling(format!("could not get REST client: {e}"))),
    };
    let uid = uuid::Uuid::new_v4().to_string();
    let body = review::request(version, &uid, inv, req, objects);
    let body = serde_json::to_vec(&body).unwrap_or_default();
    let answer = webhook_client::post(target, body, hook.timeout)
        .await
        .map_err(calling)?;
    match review::verdict(&answer, version, &uid, mutating) {
        Ok(v) => Ok(v),
        Err(BadAnswer::Call(e)) => Err(calling(e)),
        Err(BadAnswer::Invalid(why)) => Err(Failure::Calling(format!(
            "received invalid webhook response: {why}"
        ))),
    }
}

fn calling(e: CallError) -> Failure {
    match e {
        CallError::Setup(why) => Failure::Calling(format!("could not get REST client: {why}")),
        CallError::Call(why) => Failure::Calling(format!("failed to call webhook: {why}")),
    }
}
