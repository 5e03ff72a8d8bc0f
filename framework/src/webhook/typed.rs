//! [`Typed`]: the kind a typed webhook decodes, recorded when it is registered and checked
//! against the configurations that call it ([`super::mismatches`]).

/// The kind a typed webhook decodes, recorded at registration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Typed {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    /// A defaulter: it answers a patch, which only a mutating configuration may carry.
    pub mutating: bool,
}

impl Typed {
    /// `v1 configmaps`, `metal.example.com/v1 addresspools`.
    pub(crate) fn describe(&self) -> String {
        resource(&self.group, &self.version, &self.plural)
    }

    /// Whether a rule naming `group`, `version` and `resource` only sends this kind (its
    /// subresources included: their reviews carry the whole object).
    pub(crate) fn takes(&self, group: &str, version: &str, resource: &str) -> bool {
        let plural = resource.split('/').next().unwrap_or(resource);
        group == self.group && version == self.version && plural == self.plural
    }
}

/// `version resource` for the core group, `group/version resource` otherwise.
pub(crate) fn resource(group: &str, version: &str, resource: &str) -> String {
    match group {
        "" => format!("{version} {resource}"),
        _ => format!("{group}/{version} {resource}"),
    }
}
