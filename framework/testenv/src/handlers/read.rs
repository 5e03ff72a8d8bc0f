//! GET of one object and of a collection: exact-resourceVersion, paginated and selected lists,
//! serialized without copying the items.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use serde::ser::SerializeMap;
use serde_json::Value;

use super::target::Target;
use crate::api::status::ApiError;
use crate::crd;
use crate::storage::continue_token;
use crate::storage::selectors::Filter;
use crate::storage::store::{ObjKey, State};

/// GET of one object.
pub fn get(state: &State, t: &Target) -> Result<Value, ApiError> {
    let obj = state
        .get(t.res, t.ns_key(), t.name())
        .ok_or_else(|| t.not_found())?;
    if t.sub.as_deref() == Some("scale") {
        return Ok(crd::scale::of(&t.rt, obj));
    }
    Ok(crd::to_version(&t.rt, (**obj).clone()))
}

/// Parsed list parameters.
#[derive(Debug, Default)]
pub struct ListParams {
    /// Selection.
    pub filter: Filter,
    /// `limit` (0 = none).
    pub limit: usize,
    /// `continue`.
    pub continue_token: Option<String>,
    /// `resourceVersion`.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch`.
    pub rv_match: Option<String>,
}

/// A list response; serialized without cloning the items, and (as upstream) without each item's
/// `kind` / `apiVersion`.
pub struct ListBody {
    kind: String,
    api_version: String,
    rv: u64,
    cont: Option<String>,
    remaining: Option<usize>,
    items: Vec<Arc<Value>>,
    /// Whether items keep their `kind` / `apiVersion` and an unset `continue` is `""` (custom
    /// resources converted by a webhook, as upstream's unstructured lists have them:
    /// conv-list-old-version.txt).
    typed_items: bool,
}

struct Item<'a>(&'a Value, bool);

impl Serialize for Item<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0.as_object() {
            Some(m) => {
                let mut map = s.serialize_map(None)?;
                for (k, v) in m {
                    if self.1 || (k != "kind" && k != "apiVersion") {
                        map.serialize_entry(k, v)?;
                    }
                }
                map.end()
            }
            None => self.0.serialize(s),
        }
    }
}

impl Serialize for ListBody {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut meta = serde_json::Map::new();
        meta.insert("resourceVersion".into(), self.rv.to_string().into());
        match &self.cont {
            Some(c) => _ = meta.insert("continue".into(), c.clone().into()),
            // An unstructured list's metadata says `continue: ""` (conv-list-old-version.txt).
            None if self.typed_items => _ = meta.insert("continue".into(), "".into()),
            None => {}
        }
        if let Some(r) = self.remaining {
            meta.insert("remainingItemCount".into(), r.into());
        }
        let mut map = s.serialize_map(Some(4))?;
        map.serialize_entry("kind", &self.kind)?;
        map.serialize_entry("apiVersion", &self.api_version)?;
        map.serialize_entry("metadata", &meta)?;
        let items: Vec<Item<'_>> = self
            .items
            .iter()
            .map(|i| Item(i, self.typed_items))
            .collect();
        map.serialize_entry("items", &items)?;
        map.end()
    }
}

impl ListBody {
    /// The items (for in-process callers).
    pub fn items(&self) -> &[Arc<Value>] {
        &self.items
    }

    /// Replaces the items with ones a conversion webhook converted, which keep their type.
    pub fn set_converted_items(&mut self, items: Vec<Arc<Value>>) {
        self.items = items;
        self.typed_items = true;
    }

    /// The list's resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.rv
    }

    /// The `continue` token of a partial list.
    pub fn continue_token(&self) -> Option<&str> {
        self.cont.as_deref()
    }
}

fn parse_rv(s: &str) -> Result<u64, ApiError> {
    s.parse()
        .map_err(|_| ApiError::bad_request(format!("invalid resource version: {s}")))
}

/// GET of a collection.
pub fn list(state: &State, t: &Target, p: &ListParams) -> Result<ListBody, ApiError> {
    let rt = &t.rt;
    let current = state.rv();
    let ns = t.ns.as_deref().filter(|_| rt.namespaced());
    let scope = match (rt.namespaced(), ns) {
        (false, _) => continue_token::Scope::Cluster,
        (true, None) => continue_token::Scope::AllNamespaces,
        (true, Some(ns)) => continue_token::Scope::Namespace(ns),
    };
    let (list_rv, after) = if let Some(token) = &p.continue_token {
        let (rv, start) = continue_token::decode(token, scope)?;
        (rv, Some(start))
    } else {
        let rv = match p.resource_version.as_deref() {
            None | Some("") | Some("0") => current,
            Some(s) => {
                let n = parse_rv(s)?;
                if n > current {
                    return Err(ApiError::too_large_rv(n, current));
                }
                if p.rv_match.as_deref() == Some("Exact") {
                    n
                } else {
                    current
                }
            }
        };
        (rv, None)
    };
    if list_rv < current && list_rv < state.floor() {
        return Err(if p.continue_token.is_some() {
            ApiError::continue_expired()
        } else {
            ApiError::expired(list_rv, state.floor() + 1)
        });
    }
    let snapshot;
    let iter: Box<dyn Iterator<Item = (&ObjKey, &Arc<Value>)>> = if list_rv == current {
        state.iter(t.res, ns, after)
    } else {
        snapshot = state.snapshot_at(t.res, list_rv);
        Box::new(snapshot_iter(&snapshot, ns, after))
    };
    let mut items = Vec::new();
    let mut last_key = None;
    let mut cont = None;
    let mut remaining = None;
    let mut iter = iter.filter(|(_, o)| p.filter.matches(o));
    for (k, o) in iter.by_ref() {
        items.push(o.clone());
        if p.limit > 0 && items.len() == p.limit {
            last_key = Some(k.clone());
            break;
        }
    }
    if let Some(k) = last_key {
        let rest = iter.count();
        if rest > 0 {
            cont = Some(continue_token::encode(list_rv, &k, scope));
            let plain = p.filter.labels == Default::default() && p.filter.fields.is_empty();
            remaining = plain.then_some(rest);
        }
    }
    Ok(ListBody {
        kind: rt.list_kind(),
        api_version: rt.api_version(),
        rv: list_rv,
        cont,
        remaining,
        items,
        typed_items: false,
    })
}

fn snapshot_iter<'a>(
    snap: &'a BTreeMap<ObjKey, Arc<Value>>,
    ns: Option<&'a str>,
    after: Option<ObjKey>,
) -> impl Iterator<Item = (&'a ObjKey, &'a Arc<Value>)> + 'a {
    snap.iter()
        .filter(move |(k, _)| ns.is_none_or(|n| k.0 == n))
        .filter(move |(k, _)| after.as_ref().is_none_or(|a| *k > a))
}
