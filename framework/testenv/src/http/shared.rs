//! The state every connection and request handler shares: the store, the request log, faults,
//! admission and watch settings and the auth configuration, and the record of one served request.

use std::sync::Arc;

use parking_lot::Mutex;

use crate::api::cluster::AdmissionConfig;
use crate::auth::{Auth, Tls};
use crate::http::faults::Faults;
use crate::http::watch;
use crate::storage::store::Store;

/// One served request, for assertions like "exactly one LIST and one WATCH".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRecord {
    /// kube-apiserver verb: get, list, watch, create, update, patch, delete, deletecollection
    /// (non-resource requests such as discovery: the lower-case HTTP method).
    pub verb: String,
    /// Plural resource, e.g. `nodes` (empty for non-resource requests).
    pub resource: String,
    /// Subresource, e.g. `status`.
    pub subresource: Option<String>,
    /// Namespace from the URL.
    pub namespace: Option<String>,
    /// Name from the URL.
    pub name: Option<String>,
    /// Raw query string.
    pub query: String,
    /// `User-Agent` header.
    pub user_agent: Option<String>,
    /// `Accept` header, e.g. `application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1`
    /// from a metadata-only informer.
    pub accept: Option<String>,
    /// HTTP status sent.
    pub status: u16,
    /// URL path (tells discovery requests apart).
    pub path: String,
    /// The authenticated user name (`system:anonymous` without credentials, empty when the
    /// token did not authenticate).
    pub user: String,
}

/// State shared by the accept loop, every connection and the handles.
pub(crate) struct Shared {
    pub(crate) store: Arc<Store>,
    pub(crate) log: Mutex<Vec<RequestRecord>>,
    pub(crate) faults: Faults,
    pub(crate) admission: AdmissionConfig,
    pub(crate) watch: watch::WatchConfig,
    pub(crate) address: String,
    pub(crate) auth: Auth,
    pub(crate) tls: Option<Arc<Tls>>,
    /// How long a request may take before it is answered 504 (`--request-timeout`).
    pub(crate) request_timeout: std::time::Duration,
}
