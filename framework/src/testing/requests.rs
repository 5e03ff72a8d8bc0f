//! Owns [`Requests`]: filters and counts over kube-testenv's request log, for tests that check
//! how many LISTs and WATCHes a process made, and with which selectors.

use std::collections::BTreeMap;

use crate::admin::percent_decode;
use kube_testenv::{RequestRecord, TestEnv};

/// A snapshot of the requests kube-testenv served, narrowed by each filter call:
/// `Requests::of(&env).verb("watch").resource("secrets").count()`.
#[derive(Clone, Debug)]
pub struct Requests {
    records: Vec<RequestRecord>,
}

impl Requests {
    /// Every request `env` served so far.
    pub fn of(env: &TestEnv) -> Self {
        Requests {
            records: env.requests(),
        }
    }

    fn keep(mut self, f: impl Fn(&RequestRecord) -> bool) -> Self {
        self.records.retain(|r| f(r));
        self
    }

    /// Only this verb: `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, ...
    pub fn verb(self, verb: &str) -> Self {
        self.keep(|r| r.verb == verb)
    }

    /// Only this plural resource, e.g. `secrets`.
    pub fn resource(self, resource: &str) -> Self {
        self.keep(|r| r.resource == resource)
    }

    /// Only requests in this namespace (`None`: only cluster-wide ones).
    pub fn namespace(self, namespace: Option<&str>) -> Self {
        self.keep(|r| r.namespace.as_deref() == namespace)
    }

    /// Only requests whose `User-Agent` starts with `prefix`, e.g. a binary's name.
    pub fn user_agent(self, prefix: &str) -> Self {
        self.keep(|r| {
            r.user_agent
                .as_deref()
                .is_some_and(|ua| ua.starts_with(prefix))
        })
    }

    /// Only requests whose query has `key=value` (decoded), e.g.
    /// `.param("labelSelector", "app=web")`.
    pub fn param(self, key: &str, value: &str) -> Self {
        self.keep(|r| query_param(r, key).as_deref() == Some(value))
    }

    /// Only the requests that asked for metadata only (`Accept: ...;as=PartialObjectMetadata`
    /// or `as=PartialObjectMetadataList`), e.g. a metadata-only informer's.
    pub fn metadata_only(self) -> Self {
        self.keep(|r| {
            r.accept
                .as_deref()
                .is_some_and(|a| a.contains("as=PartialObjectMetadata"))
        })
    }

    /// Without the LISTs and WATCHes of one object by name (`fieldSelector=metadata.name=..`),
    /// which is what this module's waits make.
    pub fn without_waits(self) -> Self {
        self.keep(|r| {
            !query_param(r, "fieldSelector").is_some_and(|f| f.starts_with("metadata.name="))
        })
    }

    /// How many requests are left.
    pub fn count(&self) -> usize {
        self.records.len()
    }

    /// The requests left, in arrival order.
    pub fn records(&self) -> &[RequestRecord] {
        &self.records
    }

    /// How many requests are left per `(verb, resource)`, for a failure message or an exact
    /// comparison.
    pub fn per_verb_and_resource(&self) -> BTreeMap<(String, String), usize> {
        let mut counts = BTreeMap::new();
        for r in &self.records {
            *counts
                .entry((r.verb.clone(), r.resource.clone()))
                .or_default() += 1;
        }
        counts
    }
}

/// The decoded value of `key` in a request's query (`+` is a space, as in forms).
pub fn query_param(record: &RequestRecord, key: &str) -> Option<String> {
    record.query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (percent_decode(k) == key).then(|| percent_decode(v))
    })
}
