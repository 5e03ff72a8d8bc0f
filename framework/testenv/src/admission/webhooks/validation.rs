//! Validating webhooks: every matching one called at once, as upstream's dispatcher starts one
//! goroutine each; the write is refused if any refuses, and every warning is kept.
//!
//! Which refusal wins when several refuse: upstream's goroutines send their errors to one
//! channel as they finish, and the dispatcher returns the first one received (the others are
//! only logged), so the refusal of the webhook that answered first wins, whatever the
//! configuration order; its warnings are recorded as each call returns too. That is
//! nondeterministic upstream when two answer at nearly the same moment; here the answers are
//! taken in the order they complete (a test with a slow and a quick refusal pins it).

use super::call::call;
use super::equivalent;
use super::failure::{self, Failure};
use super::matching::Invocation;
use super::{Objects, Request};
use crate::api::status::ApiError;

/// What the validating webhooks said: their warnings, and the refusal if any.
#[derive(Debug, Default)]
pub struct Said {
    /// Every webhook's warnings, in the order the calls completed.
    pub warnings: Vec<String>,
    /// The write's error, if a webhook refused it (or failed under `failurePolicy: Fail`).
    pub refusal: Option<ApiError>,
}

/// Calls every invocation about `req` with `objects` (in the write's version).
pub async fn run(invocations: &[Invocation], req: &Request, objects: &Objects) -> Said {
    use futures::StreamExt;
    let mut answered: futures::stream::FuturesUnordered<_> = invocations
        .iter()
        .map(|inv| one(inv, req, objects))
        .collect();
    let mut said = Said::default();
    while let Some((warnings, refusal)) = answered.next().await {
        said.warnings.extend(warnings);
        if said.refusal.is_none() {
            said.refusal = refusal;
        }
    }
    said
}

async fn one(
    inv: &Invocation,
    req: &Request,
    objects: &Objects,
) -> (Vec<String>, Option<ApiError>) {
    let versioned = match &inv.conversion {
        None => objects.clone(),
        Some(c) => match equivalent::convert(c, objects.clone(), &inv.resource.api_version()).await
        {
            Ok(o) => o,
            Err(e) => return (Vec::new(), Some(e)),
        },
    };
    let hook = &inv.hook;
    match call(inv, req, &versioned, false).await {
        Ok(v) if v.allowed => (v.warnings, None),
        Ok(v) => {
            let refusal = failure::denial(&hook.name, v.status.as_ref());
            (v.warnings, Some(refusal))
        }
        Err(f @ (Failure::Calling(_) | Failure::Refused(_))) => {
            (Vec::new(), f.into_error(&hook.name, hook.fail_open))
        }
    }
}
