//! `/configz`: component-base's configz registry, each component's configuration as JSON under
//! its key (the CCM registers `cloudcontrollermanager.config.k8s.io`).

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::RwLock;

/// Shared, settable configurations served on `/configz`; cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Configz {
    entries: Arc<RwLock<BTreeMap<String, serde_json::Value>>>,
}

impl Configz {
    /// An empty registry (`/configz` answers `{}`).
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers or replaces the configuration under `key`.
    pub fn set(&self, key: impl Into<String>, value: serde_json::Value) {
        self.entries.write().insert(key.into(), value);
    }

    /// The body of `/configz`.
    pub(crate) fn render(&self) -> String {
        serde_json::to_string(&*self.entries.read()).unwrap_or_else(|_| "{}".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_key() {
        let c = Configz::new();
        assert_eq!(c.render(), "{}");
        c.set(
            "cloudcontrollermanager.config.k8s.io",
            serde_json::json!({"kind": "CloudControllerManagerConfiguration"}),
        );
        assert_eq!(
            c.render(),
            "{\"cloudcontrollermanager.config.k8s.io\":{\"kind\":\"CloudControllerManagerConfiguration\"}}"
        );
    }
}
