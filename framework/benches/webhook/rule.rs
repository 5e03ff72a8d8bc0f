//! The rule both servers enforce, from their cache: a ConfigMap's `data.first`..`data.last`
//! range may not overlap another cached ConfigMap's (MetalLB's "no two pools overlap", on a
//! kind every API server serves). Both servers call this one function on the same cached
//! objects, so the bench compares what is around it.

use k8s_openapi::api::core::v1::ConfigMap;

/// The ConfigMaps' namespace.
pub const NAMESPACE: &str = "bench";
/// Each seeded ConfigMap's range is this wide; the reviewed one starts after all of them.
pub const WIDTH: u64 = 10;

/// The `first..=last` range of a ConfigMap, if it has one.
pub fn range(cm: &ConfigMap) -> Option<(u64, u64)> {
    let data = cm.data.as_ref()?;
    let first = data.get("first")?.parse().ok()?;
    let last = data.get("last")?.parse().ok()?;
    Some((first, last))
}

/// The name of the first cached ConfigMap other than `name` whose range overlaps `candidate`'s.
pub fn overlapping<'a>(
    candidate: &ConfigMap,
    name: &str,
    cached: impl Iterator<Item = &'a ConfigMap>,
) -> Option<String> {
    let (first, last) = range(candidate)?;
    cached
        .filter(|other| other.metadata.name.as_deref() != Some(name))
        .find(|other| range(other).is_some_and(|(f, l)| f <= last && first <= l))
        .and_then(|other| other.metadata.name.clone())
}

/// The denial message.
pub fn message(other: &str) -> String {
    format!("data.first..data.last overlaps ConfigMap {other}")
}
