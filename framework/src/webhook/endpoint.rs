//! The HTTP envelope of a webhook: an [`Admission`] or [`Conversion`] endpoint reads the review
//! from the request body, hands its request to the handler, and writes the answer back in the
//! review version it came in (`admission.k8s.io/v1` or `v1beta1`). A body that is not a review
//! is a 400 saying why; the handler is never called with it.

use std::task::{Context, Poll};

use bytes::Bytes;
use futures::future::BoxFuture;
use http_body_util::Full;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use kube::core::conversion::{ConversionRequest, ConversionResponse, ConversionReview};
use serde::Serialize;
use tower::{BoxError, Service, ServiceExt};

use super::conversion::check::checked;

/// What a webhook endpoint is called with: the request, its body read in full.
pub type WebhookRequest = http::Request<Bytes>;
/// What a webhook endpoint answers.
pub type WebhookResponse = http::Response<Full<Bytes>>;

/// Serves an admission handler (`Service<AdmissionRequest<DynamicObject>>`) over HTTP.
#[derive(Clone, Debug)]
pub struct Admission<S> {
    handler: S,
}

impl<S> Admission<S> {
    /// Serves `handler`.
    pub fn new(handler: S) -> Self {
        Admission { handler }
    }
}

impl<S> Service<WebhookRequest> for Admission<S>
where
    S: Service<AdmissionRequest<DynamicObject>, Response = AdmissionResponse>
        + Clone
        + Send
        + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send,
{
    type Response = WebhookResponse;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<WebhookResponse, BoxError>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: WebhookRequest) -> Self::Future {
        let handler = self.handler.clone();
        Box::pin(async move {
            let review: AdmissionReview<DynamicObject> = match decode(&request, "AdmissionReview") {
                Ok(review) => review,
                Err(refused) => return Ok(text(400, &refused)),
            };
            let admission: Result<AdmissionRequest<DynamicObject>, _> = review.try_into();
            let Ok(admission) = admission else {
                return Ok(text(400, "the AdmissionReview has no request"));
            };
            let span = tracing::Span::current();
            if let Ok(serde_json::Value::String(operation)) =
                serde_json::to_value(&admission.operation)
            {
                span.record("k8s.operation", operation);
            }
            span.record("object.ref", object_ref(&admission));
            let response = handler.oneshot(admission).await.map_err(Into::into)?;
            span.record("allowed", response.allowed);
            let review = response.into_review();
            // Only a patch needs the detour through a JSON value; the rest is written at once.
            match review.response.as_ref().is_some_and(|r| r.patch.is_some()) {
                true => Ok(json(&with_base64_patch(review))),
                false => Ok(json(&review)),
            }
        })
    }
}

/// Serves a conversion handler (`Service<ConversionRequest>`, e.g. a
/// [`HubAndSpoke`](super::HubAndSpoke)) over HTTP, checking its answers as the server would.
#[derive(Clone, Debug)]
pub struct Conversion<S> {
    handler: S,
}

impl<S> Conversion<S> {
    /// Serves `handler`.
    pub fn new(handler: S) -> Self {
        Conversion { handler }
    }
}

impl<S> Service<WebhookRequest> for Conversion<S>
where
    S: Service<ConversionRequest, Response = ConversionResponse> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send,
{
    type Response = WebhookResponse;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<WebhookResponse, BoxError>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: WebhookRequest) -> Self::Future {
        let handler = self.handler.clone();
        Box::pin(async move {
            let review: ConversionReview = match decode(&request, "ConversionReview") {
                Ok(review) => review,
                Err(refused) => return Ok(text(400, &refused)),
            };
            let Ok(conversion) = ConversionRequest::from_review(review) else {
                return Ok(text(400, "the ConversionReview has no request"));
            };
            tracing::Span::current().record(
                "k8s.operation",
                format!("convert to {}", conversion.desired_api_version),
            );
            let sent = conversion.objects.clone();
            let desired = conversion.desired_api_version.clone();
            let answer = handler.oneshot(conversion).await.map_err(Into::into)?;
            let answer = checked(&sent, &desired, answer);
            tracing::Span::current().record("allowed", answer.result.is_success());
            Ok(json(&answer.into_review()))
        })
    }
}

/// The review as JSON, its `response.patch` in base64 as the API server reads a `[]byte`
/// (kube-core writes an array of numbers, kube-rs#1781).
fn with_base64_patch(review: AdmissionReview<DynamicObject>) -> serde_json::Value {
    use base64::Engine;
    let patch = review.response.as_ref().and_then(|r| r.patch.clone());
    let mut json = serde_json::to_value(&review).unwrap_or(serde_json::Value::Null);
    if let (Some(patch), Some(slot)) = (patch, json.pointer_mut("/response/patch")) {
        *slot = base64::engine::general_purpose::STANDARD
            .encode(patch)
            .into();
    }
    json
}

/// The body as a `what`, or why not (answered as a 400) (controller-runtime's checks: JSON
/// content, a body, a review).
fn decode<T: serde::de::DeserializeOwned>(
    request: &WebhookRequest,
    what: &str,
) -> Result<T, String> {
    let content_type = request
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if content_type.split(';').next().map(str::trim) != Some("application/json") {
        return Err(format!(
            "contentType={content_type}, expected application/json"
        ));
    }
    if request.body().is_empty() {
        return Err("request body is empty".to_string());
    }
    serde_json::from_slice(request.body())
        .map_err(|e| format!("cannot decode the body as a {what}: {e}"))
}

/// `namespace/name` of the reviewed object (`name` alone when cluster-scoped).
fn object_ref(request: &AdmissionRequest<DynamicObject>) -> String {
    match &request.namespace {
        Some(ns) if !ns.is_empty() => format!("{ns}/{}", request.name),
        _ => request.name.clone(),
    }
}

/// A JSON answer with status 200.
fn json<T: Serialize>(body: &T) -> WebhookResponse {
    match serde_json::to_vec(body) {
        Ok(bytes) => http::Response::builder()
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(bytes)))
            .unwrap_or_else(|_| text(500, "cannot build the response")),
        Err(e) => text(500, &format!("cannot encode the answer: {e}")),
    }
}

/// A plain-text answer with `status`.
pub(crate) fn text(status: u16, message: &str) -> WebhookResponse {
    let mut response = http::Response::new(Full::new(Bytes::from(format!("{message}\n"))));
    *response.status_mut() =
        http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
