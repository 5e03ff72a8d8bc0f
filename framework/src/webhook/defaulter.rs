//! [`Defaulter`]: a defaulting (mutating) webhook over a typed object, and [`Defaulting`], the
//! admission service that hands it the decoded object and answers with the RFC 6902 JSON patch
//! from the object before to the object after, so no handler writes a patch by hand. Both sides
//! are the object as `T` serializes it, so fields `T` does not know are never touched; an
//! unchanged object answers no patch.

use std::convert::Infallible;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use kube::Resource;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::review::Review;
use super::verdict::Verdict;

/// Fills in what the user left out of a `T` being created or updated. `object` starts as
/// `review.object`; what the defaulter changes in it is sent back as a patch. A denial sends
/// no patch. Write it as `async fn default(&self, review: &Review<T>, object: &mut T) -> Verdict`.
pub trait Defaulter<T>: Send + Sync + 'static {
    /// Defaults `object`; [`Verdict::allow`] unless the request must be refused.
    fn default(&self, review: &Review<T>, object: &mut T) -> impl Future<Output = Verdict> + Send;
}

/// The admission service of a [`Defaulter`]: a request without an object (DELETE) is allowed
/// untouched; one that does not decode as `T` is denied with a 400 naming the field.
pub struct Defaulting<D, T> {
    defaulter: Arc<D>,
    _kind: PhantomData<fn() -> T>,
}

impl<D, T> Clone for Defaulting<D, T> {
    fn clone(&self) -> Self {
        Defaulting {
            defaulter: self.defaulter.clone(),
            _kind: PhantomData,
        }
    }
}

impl<D, T> Defaulting<D, T> {
    /// Serves `defaulter`.
    pub fn new(defaulter: D) -> Self {
        Defaulting {
            defaulter: Arc::new(defaulter),
            _kind: PhantomData,
        }
    }
}

impl<D, T> tower::Service<AdmissionRequest<DynamicObject>> for Defaulting<D, T>
where
    D: Defaulter<T>,
    T: Resource<DynamicType = ()> + DeserializeOwned + Serialize + Clone + Send + Sync + 'static,
{
    type Response = AdmissionResponse;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<AdmissionResponse, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: AdmissionRequest<DynamicObject>) -> Self::Future {
        let defaulter = self.defaulter.clone();
        Box::pin(async move {
            let response = AdmissionResponse::from(&request);
            let review = match Review::<T>::decode(&request) {
                Ok(review) => review,
                Err(denied) => return Ok(denied.answer(response)),
            };
            let Some(before) = review.object.clone() else {
                return Ok(Verdict::allow().answer(response));
            };
            let mut after = before.clone();
            let verdict = defaulter.default(&review, &mut after).await;
            if !verdict.is_allowed() {
                return Ok(verdict.answer(response));
            }
            Ok(match patch(&before, &after) {
                Ok(None) => verdict.answer(response),
                Ok(Some(patch)) => match verdict.answer(response.clone()).with_patch(patch) {
                    Ok(patched) => patched,
                    Err(e) => cannot_patch(response, &e),
                },
                Err(e) => cannot_patch(response, &e),
            })
        })
    }
}

/// The JSON patch from `before` to `after`; `None` when nothing changed.
fn patch<T: Serialize>(
    before: &T,
    after: &T,
) -> Result<Option<json_patch::Patch>, serde_json::Error> {
    let patch = json_patch::diff(
        &serde_json::to_value(before)?,
        &serde_json::to_value(after)?,
    );
    Ok((!patch.0.is_empty()).then_some(patch))
}

/// A 500 denial: the defaulted object could not be written out.
fn cannot_patch(response: AdmissionResponse, error: &dyn std::fmt::Display) -> AdmissionResponse {
    Verdict::deny(format!("cannot encode the defaulted object: {error}"))
        .with_code(500)
        .with_reason("InternalError")
        .answer(response)
}
