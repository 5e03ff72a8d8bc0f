//! The objects of a write as another version of their resource shows them, for a webhook that
//! matched through `matchPolicy: Equivalent` (its rule names `v1`, the write came through
//! `v1beta1`): the webhook gets them in the version it named, and a mutating webhook's patch
//! applies to that version and is converted back. Built-in kinds have no other version here;
//! a CRD converts as its `spec.conversion` says. Policies and match conditions, which run under
//! the store's lock, see the objects converted too when that needs no webhook (`at_once`).

use serde_json::Value;

use super::{Gvr, Objects, Request};
use crate::api::status::ApiError;
use crate::crd::conversion::{self, Converter};
use crate::storage::store::State;

/// How a CRD's objects change version.
#[derive(Debug, Clone)]
pub enum Conversion {
    /// `strategy: None`: only `apiVersion` changes.
    None,
    /// `strategy: Webhook`: the CRD's conversion webhook converts.
    Webhook(Converter),
}

/// How the CRD named `crd` converts (read under the store lock).
pub fn of(state: &State, crd: &str) -> Conversion {
    match conversion::of_crd(state, crd) {
        Some(converter) => Conversion::Webhook(converter),
        None => Conversion::None,
    }
}

/// `objects` as the version `resource` names, when that needs no call: the write's own version,
/// or a CRD with `strategy: None` (only `apiVersion` changes). `None` when only the CRD's
/// conversion webhook can convert them.
pub fn at_once(state: &State, req: &Request, resource: &Gvr, objects: &Objects) -> Option<Objects> {
    match (&req.crd, resource.version != req.resource.version) {
        (Some(crd), true) => match of(state, crd) {
            Conversion::None => Some(relabel(objects.clone(), &resource.api_version())),
            Conversion::Webhook(_) => None,
        },
        _ => Some(objects.clone()),
    }
}

fn relabel(objects: Objects, api_version: &str) -> Objects {
    let one = |o: Option<Value>| o.map(|o| rewrite(o, api_version));
    Objects {
        object: one(objects.object),
        old: one(objects.old),
    }
}

/// `objects` as `api_version` (`group/version`) shows them.
pub async fn convert(
    conversion: &Conversion,
    objects: Objects,
    api_version: &str,
) -> Result<Objects, ApiError> {
    match conversion {
        Conversion::None => Ok(relabel(objects, api_version)),
        // One review per object, as the server converts each.
        Conversion::Webhook(converter) => {
            let one = async |o: Option<Value>| match o {
                None => Ok(None),
                Some(o) => {
                    let converted = conversion::convert(converter, vec![o], api_version).await?;
                    Ok::<_, ApiError>(converted.into_iter().next())
                }
            };
            Ok(Objects {
                object: one(objects.object).await?,
                old: one(objects.old).await?,
            })
        }
    }
}

fn rewrite(mut object: Value, api_version: &str) -> Value {
    if object.is_object() {
        object["apiVersion"] = api_version.into();
    }
    object
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn strategy_none_rewrites_the_api_version_only() {
        let objects = Objects {
            object: Some(
                json!({"apiVersion": "wh.example.com/v1alpha1", "kind": "Widget", "spec": {"size": 1}}),
            ),
            old: None,
        };
        let out = convert(&Conversion::None, objects, "wh.example.com/v1")
            .await
            .unwrap();
        assert_eq!(
            out.object,
            Some(json!({"apiVersion": "wh.example.com/v1", "kind": "Widget", "spec": {"size": 1}}))
        );
        assert_eq!(out.old, None);
    }
}
