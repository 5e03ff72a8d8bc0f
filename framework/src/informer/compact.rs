//! Owns [`CompactMeta`], the form a metadata-only informer stores each object in: its whole
//! `ObjectMeta` packed into one byte buffer, unpacked into a fresh `ObjectMeta` on each read.
//!
//! Decoded by k8s-openapi, the metadata of a Secret with three labels and two annotations costs
//! about 2 KB of heap in a dozen allocations, 1.3 KB of it the two `BTreeMap`s (a 544-byte leaf
//! node each) and their strings; packed, it is one allocation of about 250 bytes. Readers pay
//! instead: each read builds the `ObjectMeta` again, as a metadata view of a full informer
//! already does (`view.rs`).
//!
//! The buffer holds, in order, strings as a length prefix (LEB128: 0 for none, else length + 1)
//! then their bytes: namespace, name, resourceVersion, generateName, uid, creationTimestamp; the
//! labels and the annotations (a count prefix the same way, then key, value, key, value...);
//! then the fields controllers rarely carry (owner references, finalizers, generation,
//! deletion, managedFields, selfLink) as the JSON of an `ObjectMeta` holding only them, or
//! nothing when none is set.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;

use super::key::ObjectKey;

/// One object's metadata, packed (see the module docs for the layout).
pub(crate) struct CompactMeta {
    packed: Box<[u8]>,
}

impl CompactMeta {
    /// Packs `meta`; the fields it packs as strings and maps are taken out of it.
    pub(crate) fn pack(mut meta: ObjectMeta) -> Self {
        let mut buf = Vec::with_capacity(256);
        for s in [
            meta.namespace.take(),
            meta.name.take(),
            meta.resource_version.take(),
            meta.generate_name.take(),
            meta.uid.take(),
            meta.creation_timestamp.take().map(|t| t.0.to_string()),
        ] {
            put_str(&mut buf, s.as_deref());
        }
        put_map(&mut buf, meta.labels.take());
        put_map(&mut buf, meta.annotations.take());
        if meta != ObjectMeta::default() {
            // An `ObjectMeta` always serializes.
            if let Ok(rest) = serde_json::to_vec(&meta) {
                buf.extend_from_slice(&rest);
            }
        }
        CompactMeta {
            packed: buf.into_boxed_slice(),
        }
    }

    /// The metadata, unpacked.
    pub(crate) fn unpack(&self) -> ObjectMeta {
        // Only `pack` writes the buffer, so it always reads back.
        self.try_unpack().unwrap_or_default()
    }

    fn try_unpack(&self) -> Option<ObjectMeta> {
        let mut r = Reader(&self.packed);
        let owned = |s: Option<&str>| s.map(str::to_string);
        let namespace = owned(r.str()?);
        let name = owned(r.str()?);
        let resource_version = owned(r.str()?);
        let generate_name = owned(r.str()?);
        let uid = owned(r.str()?);
        let creation_timestamp = match r.str()? {
            Some(t) => Some(Time(t.parse::<Timestamp>().ok()?)),
            None => None,
        };
        let labels = r.map()?;
        let annotations = r.map()?;
        let rest = match r.0 {
            [] => ObjectMeta::default(),
            json => serde_json::from_slice(json).ok()?,
        };
        Some(ObjectMeta {
            namespace,
            name,
            resource_version,
            generate_name,
            uid,
            creation_timestamp,
            labels,
            annotations,
            ..rest
        })
    }

    /// The key the store files the object under, read without unpacking the rest.
    pub(crate) fn key(&self) -> ObjectKey {
        let mut r = Reader(&self.packed);
        let (namespace, name) = (r.str().flatten(), r.str().flatten());
        let _resource_version = r.str();
        let generate_name = r.str().flatten();
        ObjectKey {
            namespace: namespace.filter(|ns| !ns.is_empty()).map(str::to_string),
            name: name.or(generate_name).unwrap_or_default().to_string(),
        }
    }

    /// The object's resourceVersion, read in place.
    pub(crate) fn resource_version(&self) -> Option<&str> {
        let mut r = Reader(&self.packed);
        r.str()?;
        r.str()?;
        r.str()?
    }

    /// The metadata as the JSON of a `PartialObjectMetadata`, for a view of another type.
    pub(crate) fn to_json(&self) -> serde_json::Result<serde_json::Value> {
        Ok(serde_json::json!({
            "apiVersion": "meta.k8s.io/v1",
            "kind": "PartialObjectMetadata",
            "metadata": serde_json::to_value(self.unpack())?,
        }))
    }

    /// The buffer's length, for tests of its size.
    #[cfg(test)]
    fn packed_len(&self) -> usize {
        self.packed.len()
    }
}

impl fmt::Debug for CompactMeta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("CompactMeta").field(&self.unpack()).finish()
    }
}

/// Appends `n` in LEB128.
fn put_len(buf: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        buf.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    buf.push(n as u8);
}

/// Appends an optional string: its length + 1 (0 for none), then its bytes.
fn put_str(buf: &mut Vec<u8>, s: Option<&str>) {
    match s {
        None => put_len(buf, 0),
        Some(s) => {
            put_len(buf, s.len() + 1);
            buf.extend_from_slice(s.as_bytes());
        }
    }
}

/// Appends an optional map: its length + 1 (0 for none), then each key and value.
fn put_map(buf: &mut Vec<u8>, map: Option<BTreeMap<String, String>>) {
    let Some(map) = map else {
        return put_len(buf, 0);
    };
    put_len(buf, map.len() + 1);
    for (k, v) in &map {
        put_str(buf, Some(k));
        put_str(buf, Some(v));
    }
}

/// Reads back what the `put_*` functions wrote; `None` where the bytes do not fit.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn len(&mut self) -> Option<usize> {
        let mut n = 0usize;
        for shift in (0..usize::BITS).step_by(7) {
            let (&byte, rest) = self.0.split_first()?;
            self.0 = rest;
            n |= usize::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return Some(n);
            }
        }
        None
    }

    /// An optional string; the outer `None` when the bytes do not fit.
    fn str(&mut self) -> Option<Option<&'a str>> {
        let Some(len) = self.len()?.checked_sub(1) else {
            return Some(None);
        };
        if len > self.0.len() {
            return None;
        }
        let (s, rest) = self.0.split_at(len);
        self.0 = rest;
        std::str::from_utf8(s).ok().map(Some)
    }

    fn map(&mut self) -> Option<Option<BTreeMap<String, String>>> {
        let Some(len) = self.len()?.checked_sub(1) else {
            return Some(None);
        };
        let mut map = BTreeMap::new();
        for _ in 0..len {
            let (k, v) = (self.str()??, self.str()??);
            map.insert(k.to_string(), v.to_string());
        }
        Some(Some(map))
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, OwnerReference};

    use super::*;

    /// The metadata of one Secret of the benchmark's table 4c: a Helm release's.
    fn helm_secret() -> ObjectMeta {
        let map = |pairs: &[(&str, &str)]| {
            Some(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            )
        };
        ObjectMeta {
            namespace: Some("bench-secrets".into()),
            name: Some("secret-00042".into()),
            resource_version: Some("10042".into()),
            uid: Some("3f0c9d9e-8d7a-4c51-9a52-8f5b2d0c1e42".into()),
            creation_timestamp: Some(Time("2026-12-03T10:00:00Z".parse().expect("time"))),
            labels: map(&[
                ("app.kubernetes.io/name", "app-42"),
                ("app.kubernetes.io/managed-by", "helm"),
                ("owner", "bench"),
            ]),
            annotations: map(&[
                ("meta.helm.sh/release-name", "app-42"),
                ("meta.helm.sh/release-namespace", "bench-secrets"),
            ]),
            ..Default::default()
        }
    }

    #[test]
    fn packs_a_helm_secrets_metadata_into_one_small_buffer() {
        let meta = helm_secret();
        let packed = CompactMeta::pack(meta.clone());
        assert_eq!(packed.unpack(), meta);
        assert!(packed.packed_len() < 260, "{} bytes", packed.packed_len());
        assert_eq!(
            packed.key(),
            ObjectKey::namespaced("bench-secrets", "secret-00042")
        );
        assert_eq!(packed.resource_version(), Some("10042"));
    }

    #[test]
    fn keeps_every_field_and_tells_none_from_empty() {
        let meta = ObjectMeta {
            generate_name: Some("web-".into()),
            labels: Some(BTreeMap::new()),
            annotations: None,
            namespace: Some(String::new()),
            creation_timestamp: Some(Time("2026-12-03T10:00:00.123456789Z".parse().expect("t"))),
            deletion_timestamp: Some(Time("2026-12-03T11:00:00Z".parse().expect("time"))),
            deletion_grace_period_seconds: Some(30),
            finalizers: Some(vec!["example.com/cleanup".into()]),
            generation: Some(7),
            owner_references: Some(vec![OwnerReference {
                api_version: "apps/v1".into(),
                kind: "ReplicaSet".into(),
                name: "web-1".into(),
                uid: "u-1".into(),
                controller: Some(true),
                ..Default::default()
            }]),
            managed_fields: Some(vec![ManagedFieldsEntry {
                manager: Some("kubectl".into()),
                ..Default::default()
            }]),
            self_link: Some("/api/v1/x".into()),
            ..Default::default()
        };
        let packed = CompactMeta::pack(meta.clone());
        assert_eq!(packed.unpack(), meta);
        // No name: filed under its generateName, an empty namespace counting as none.
        assert_eq!(packed.key(), ObjectKey::cluster("web-"));
        assert_eq!(packed.resource_version(), None);
        assert_eq!(
            CompactMeta::pack(ObjectMeta::default()).unpack(),
            ObjectMeta::default()
        );
    }

    #[test]
    fn long_strings_take_multi_byte_lengths() {
        let value = "v".repeat(70_000);
        let meta = ObjectMeta {
            name: Some("big".into()),
            annotations: Some([("a".to_string(), value)].into()),
            ..Default::default()
        };
        assert_eq!(CompactMeta::pack(meta.clone()).unpack(), meta);
    }
}
