//! Owns kinds given at run time: [`dynamic_type`] reads `apps/v1/Deployment` (an apiVersion and
//! a kind, as manifests write them) into the `ApiResource` a `DynamicObject` informer is keyed
//! by, and `kind_label` names a kind the way kubectl does (`Deployment.apps`).

use kube::core::{ApiResource, GroupVersionKind};

/// A kind that cannot be read; says how to write it.
#[derive(Debug, thiserror::Error)]
#[error(
    "unknown kind {input:?}: write it as apiVersion/Kind, e.g. v1/Secret or apps/v1/Deployment"
)]
pub struct KindError {
    /// What was given.
    pub input: String,
}

/// The group, version and kind in `apiVersion/Kind` (`v1/Secret`, `apps/v1/Deployment`,
/// `example.com/v1/Widget`).
pub fn parse_kind(input: &str) -> Result<GroupVersionKind, KindError> {
    let error = || KindError {
        input: input.to_string(),
    };
    let parts: Vec<&str> = input.trim().split('/').collect();
    let (group, version, kind) = match parts.as_slice() {
        [version, kind] => ("", *version, *kind),
        [group, version, kind] if !group.is_empty() => (*group, *version, *kind),
        _ => return Err(error()),
    };
    let word = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric());
    let starts_upper = kind.chars().next().is_some_and(|c| c.is_ascii_uppercase());
    if !word(version) || !word(kind) || !starts_upper || group.contains(char::is_whitespace) {
        return Err(error());
    }
    Ok(GroupVersionKind::gvk(group, version, kind))
}

/// The dynamic type of the kind in `apiVersion/Kind`, for `DynamicObject` (or
/// `PartialObjectMeta<DynamicObject>`) informers; its plural is a guess until the factory
/// resolves the kind through discovery at start.
pub fn dynamic_type(input: &str) -> Result<ApiResource, KindError> {
    parse_kind(input).map(|gvk| ApiResource::from_gvk(&gvk))
}

/// `Kind` for the core group, `Kind.group` otherwise, as kubectl names resources.
pub(crate) fn kind_label(group: &str, kind: &str) -> String {
    if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    }
}

/// `apiVersion/Kind`, as [`parse_kind`] reads it.
pub(crate) fn kind_name(gvk: &GroupVersionKind) -> String {
    if gvk.group.is_empty() {
        format!("{}/{}", gvk.version, gvk.kind)
    } else {
        format!("{}/{}/{}", gvk.group, gvk.version, gvk.kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_api_version_and_kind() {
        let gvk = parse_kind("apps/v1/Deployment").expect("valid");
        assert_eq!(
            (gvk.group.as_str(), gvk.version.as_str(), gvk.kind.as_str()),
            ("apps", "v1", "Deployment")
        );
        let core = parse_kind("v1/Secret").expect("valid");
        assert_eq!(kind_name(&core), "v1/Secret");
        assert_eq!(kind_label(&core.group, &core.kind), "Secret");
        assert_eq!(
            dynamic_type("example.com/v1beta1/Widget")
                .expect("valid")
                .plural,
            "widgets"
        );
    }

    #[test]
    fn refuses_what_is_not_api_version_and_kind() {
        for bad in [
            "",
            "Secret",
            "v1/",
            "/v1/Secret",
            "apps/v1/deployment",
            "a/b/c/D",
            "v1/Se cret",
        ] {
            let err = parse_kind(bad).expect_err(bad);
            assert!(err.to_string().contains("apiVersion/Kind"), "{err}");
        }
    }
}
