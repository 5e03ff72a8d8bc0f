//! Conversion webhooks. [`HubAndSpoke`] converts a CRD's objects between its served versions
//! through one hub version (usually the storage version): each other version, a spoke, converts
//! to and from the hub with `TryFrom`. Whatever conversion service a webhook runs, hub and spoke
//! or hand-written (`tower::Service<ConversionRequest, Response = ConversionResponse>`), its
//! answer is checked as kube-apiserver checks it before it leaves (`check`).

pub(crate) mod check;

use std::collections::HashMap;
use std::convert::Infallible;
use std::fmt::Display;
use std::sync::Arc;
use std::task::{Context, Poll};

use kube::Resource;
use kube::core::Status;
use kube::core::conversion::{ConversionRequest, ConversionResponse};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

type ToHub<H> = Arc<dyn Fn(Value) -> Result<H, String> + Send + Sync>;
type FromHub<H> = Arc<dyn Fn(H) -> Result<Value, String> + Send + Sync>;

/// How one served version converts to and from the hub.
struct Version<H> {
    to_hub: ToHub<H>,
    from_hub: FromHub<H>,
}

impl<H> Clone for Version<H> {
    fn clone(&self) -> Self {
        Version {
            to_hub: self.to_hub.clone(),
            from_hub: self.from_hub.clone(),
        }
    }
}

/// A conversion service over hub `H` and the spokes added with [`Self::spoke`]:
///
/// ```ignore
/// HubAndSpoke::<AddressPoolV1>::new().spoke::<AddressPoolV1alpha1>()
/// ```
///
/// An object in a version nobody registered, or one a conversion refuses, fails the whole
/// review with a message naming the object and the versions.
pub struct HubAndSpoke<H> {
    versions: Arc<HashMap<String, Version<H>>>,
}

impl<H> Clone for HubAndSpoke<H> {
    fn clone(&self) -> Self {
        HubAndSpoke {
            versions: self.versions.clone(),
        }
    }
}

impl<H> Default for HubAndSpoke<H>
where
    H: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Send + 'static,
{
    fn default() -> Self {
        Self::new()
    }
}

impl<H> HubAndSpoke<H>
where
    H: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Send + 'static,
{
    /// Converts to and from `H` only.
    pub fn new() -> Self {
        let mut versions = HashMap::new();
        versions.insert(
            H::api_version(&()).into_owned(),
            Version {
                to_hub: Arc::new(|value| decode::<H>(value)) as ToHub<H>,
                from_hub: Arc::new(|hub: H| encode(&hub)) as FromHub<H>,
            },
        );
        HubAndSpoke {
            versions: Arc::new(versions),
        }
    }

    /// Adds spoke `S`, another served version of the same kind.
    pub fn spoke<S>(mut self) -> Self
    where
        S: Resource<DynamicType = ()> + Serialize + DeserializeOwned + TryFrom<H> + 'static,
        H: TryFrom<S>,
        <S as TryFrom<H>>::Error: Display,
        <H as TryFrom<S>>::Error: Display,
    {
        let version = Version {
            to_hub: Arc::new(|value| {
                let spoke = decode::<S>(value)?;
                H::try_from(spoke).map_err(|e| e.to_string())
            }) as ToHub<H>,
            from_hub: Arc::new(|hub: H| {
                let spoke = S::try_from(hub).map_err(|e| e.to_string())?;
                encode(&spoke)
            }) as FromHub<H>,
        };
        let mut versions = HashMap::clone(&self.versions);
        versions.insert(S::api_version(&()).into_owned(), version);
        self.versions = Arc::new(versions);
        self
    }

    /// The apiVersions this service converts between.
    pub fn api_versions(&self) -> Vec<String> {
        let mut versions: Vec<String> = self.versions.keys().cloned().collect();
        versions.sort();
        versions
    }

    /// `object` in `desired`.
    fn convert(&self, object: Value, desired: &str) -> Result<Value, String> {
        let from = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if from == desired {
            return Ok(object);
        }
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let failed = |e: String| format!("cannot convert {name:?} from {from} to {desired}: {e}");
        let unknown = |v: &str| failed(format!("{v} is not one of {:?}", self.api_versions()));
        let source = self.versions.get(&from).ok_or_else(|| unknown(&from))?;
        let target = self.versions.get(desired).ok_or_else(|| unknown(desired))?;
        let hub = (source.to_hub)(object).map_err(failed)?;
        (target.from_hub)(hub).map_err(failed)
    }
}

impl<H> tower::Service<ConversionRequest> for HubAndSpoke<H>
where
    H: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Send + 'static,
{
    type Response = ConversionResponse;
    type Error = Infallible;
    type Future = std::future::Ready<Result<ConversionResponse, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: ConversionRequest) -> Self::Future {
        let objects = std::mem::take(&mut request.objects);
        let desired = request.desired_api_version.clone();
        let response = ConversionResponse::for_request(request);
        let converted: Result<Vec<Value>, String> = objects
            .into_iter()
            .map(|object| self.convert(object, &desired))
            .collect();
        std::future::ready(Ok(match converted {
            Ok(objects) => response.success(objects),
            Err(message) => response.failure(Status::failure(&message, "")),
        }))
    }
}

/// `value` as `T`, the error naming the field that does not fit.
fn decode<T: DeserializeOwned>(value: Value) -> Result<T, String> {
    serde_path_to_error::deserialize(value).map_err(|e| match e.path().to_string().as_str() {
        "." => e.into_inner().to_string(),
        path => format!("{path}: {}", e.into_inner()),
    })
}

fn encode<T: Serialize>(object: &T) -> Result<Value, String> {
    serde_json::to_value(object).map_err(|e| e.to_string())
}
