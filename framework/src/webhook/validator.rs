//! [`Validator`]: a validating webhook over a typed object, and [`Validating`], the admission
//! service that decodes each request for it and answers with its [`Verdict`].

use std::convert::Infallible;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use kube::Resource;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use serde::de::DeserializeOwned;

use super::review::Review;
use super::verdict::Verdict;

/// Decides whether a create, update or delete of a `T` may go on. `review.object` is the new
/// object (`None` on DELETE), `review.old_object` the stored one (UPDATE and DELETE). Write it
/// as `async fn validate(&self, review: &Review<T>) -> Verdict`.
pub trait Validator<T>: Send + Sync + 'static {
    /// The verdict on one request.
    fn validate(&self, review: &Review<T>) -> impl Future<Output = Verdict> + Send;
}

/// The admission service of a [`Validator`]: a request that does not decode as `T` is denied
/// with a 400 naming the field, without calling the validator.
pub struct Validating<V, T> {
    validator: Arc<V>,
    _kind: PhantomData<fn() -> T>,
}

impl<V, T> Clone for Validating<V, T> {
    fn clone(&self) -> Self {
        Validating {
            validator: self.validator.clone(),
            _kind: PhantomData,
        }
    }
}

impl<V, T> Validating<V, T> {
    /// Serves `validator`.
    pub fn new(validator: V) -> Self {
        Validating {
            validator: Arc::new(validator),
            _kind: PhantomData,
        }
    }
}

impl<V, T> tower::Service<AdmissionRequest<DynamicObject>> for Validating<V, T>
where
    V: Validator<T>,
    T: Resource<DynamicType = ()> + DeserializeOwned + Send + Sync + 'static,
{
    type Response = AdmissionResponse;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<AdmissionResponse, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: AdmissionRequest<DynamicObject>) -> Self::Future {
        let validator = self.validator.clone();
        Box::pin(async move {
            let response = AdmissionResponse::from(&request);
            let verdict = match Review::<T>::decode(&request) {
                Ok(review) => validator.validate(&review).await,
                Err(denied) => denied,
            };
            Ok(verdict.answer(response))
        })
    }
}
