//! Owns [`ObjectKey`], the identity under which the shared store files an object.
//!
//! The key is the same `namespace/name` (or `name` for cluster-scoped kinds) that client-go's
//! `MetaNamespaceKeyFunc` produces, so log lines and work-queue keys read the same as upstream's.

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;

/// Identifies one object in a [`Store`](super::Store) so controllers can look up what an event
/// or a work-queue key refers to without re-parsing strings.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// Namespace of the object; `None` for cluster-scoped kinds such as Nodes.
    pub namespace: Option<String>,
    /// Name of the object.
    pub name: String,
}

impl ObjectKey {
    /// Builds the key of a namespaced object, for look-ups by a known `namespace/name`.
    pub fn namespaced(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: Some(namespace.into()),
            name: name.into(),
        }
    }

    /// Builds the key of a cluster-scoped object, for look-ups by a known name.
    pub fn cluster(name: impl Into<String>) -> Self {
        Self {
            namespace: None,
            name: name.into(),
        }
    }

    /// Reads a client-go style key: `namespace/name`, or `name` for a cluster-scoped object
    /// (split at the first `/`, as `SplitMetaNamespaceKey`).
    pub fn parse(key: &str) -> Self {
        match key.split_once('/') {
            Some((ns, name)) if !ns.is_empty() => Self::namespaced(ns, name),
            Some((_, name)) => Self::cluster(name),
            None => Self::cluster(key),
        }
    }

    /// Derives the key from an object's metadata, the way the informer files it.
    ///
    /// An empty namespace counts as none, matching client-go's key function.
    pub fn from_object<K: ResourceExt>(obj: &K) -> Self {
        Self::from_meta(obj.meta())
    }

    /// [`Self::from_object`] from the metadata alone (the name, else the generateName, as
    /// `ResourceExt::name_any`).
    pub(crate) fn from_meta(meta: &ObjectMeta) -> Self {
        Self {
            namespace: meta.namespace.clone().filter(|ns| !ns.is_empty()),
            name: meta
                .name
                .clone()
                .or_else(|| meta.generate_name.clone())
                .unwrap_or_default(),
        }
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_matches_client_go_key_function() {
        assert_eq!(
            ObjectKey::namespaced("kube-system", "dns").to_string(),
            "kube-system/dns"
        );
        assert_eq!(ObjectKey::cluster("node-1").to_string(), "node-1");
    }

    #[test]
    fn parse_reads_what_display_writes() {
        for key in [
            ObjectKey::namespaced("kube-system", "dns"),
            ObjectKey::cluster("node-1"),
        ] {
            assert_eq!(ObjectKey::parse(&key.to_string()), key);
        }
        assert_eq!(ObjectKey::parse("/n"), ObjectKey::cluster("n"));
    }
}
