//! Admission and conversion webhooks, served by the framework on every replica (issue 33).
//!
//! - Validating and defaulting webhooks over a typed object: implement [`Validator`] or
//!   [`Defaulter`]; the framework decodes the [`Review`] (a decode failure is a 400 naming the
//!   field), answers the [`Verdict`] and, for a defaulter, the JSON patch from before to after.
//! - Anything else: any `tower::Service<AdmissionRequest<DynamicObject>, Response =
//!   AdmissionResponse>` ([`WebhookInitializer::raw`]).
//! - Conversion: [`HubAndSpoke`], or any `Service<ConversionRequest>`; the answer is checked as
//!   kube-apiserver checks it before it leaves, and refused with the server's wording.
//! - Every handler runs behind the [`layers`] (trace span `webhook`, controller-runtime's
//!   metrics, a deadline under the server's `?timeout=`, panic capture answering 500).
//! - [`Webhooks`], a name → initializer map selected by `--webhooks` as `--controllers`
//!   selects controllers; the manager serves the selected ones ([`WebhookServing`]) on every
//!   replica before leader election ([`crate::manager::Manager::with_webhooks`]).
//!
//! Files: `verdict`, `review`, `validator`, `defaulter`, `conversion/` (hub and spoke; `check`:
//! the server's checks), `endpoint` (the HTTP envelope), `layers`, `metrics`, `registry` (the
//! map), `typed` and `matching` (a configuration's rules against each typed webhook's kind), `server`
//! (routes on the serving layer), `config` (where and how it listens).

mod config;
pub mod conversion;
mod defaulter;
mod endpoint;
pub mod layers;
mod matching;
mod metrics;
mod registry;
mod review;
mod server;
mod typed;
mod validator;
mod verdict;

pub use config::{CertSource, DEFAULT_HANDLER_TIMEOUT, WebhookServing};
pub use conversion::HubAndSpoke;
pub use defaulter::{Defaulter, Defaulting};
pub use endpoint::{Admission, Conversion, WebhookRequest, WebhookResponse};
pub use kube::core::admission::Operation;
pub use layers::Route;
pub use matching::{ConfigurationKind, mismatches};
pub use metrics::WebhookMetrics;
pub use registry::{
    Endpoint, WebhookContext, WebhookInitError, WebhookInitializer, Webhooks, WebhooksError,
};
pub use review::Review;
pub use server::{MAX_BODY, WebhookServer};
pub use validator::{Validating, Validator};
pub use verdict::Verdict;
