//! Owns [`InformerScope`], the "which objects" half of an informer's identity: two requests with
//! the same kind and equal scopes share one watch.

use std::fmt;

/// Restricts an informer to a namespace and/or selectors, so a controller that only needs part
/// of a kind does not cache all of it. Equal scopes share one informer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct InformerScope {
    /// Only this namespace; `None` = every namespace. Ignored for cluster-scoped kinds.
    pub namespace: Option<String>,
    /// A label selector as the API server accepts it, e.g. `node-role.kubernetes.io/control-plane`.
    pub label_selector: Option<String>,
    /// A field selector as the API server accepts it, e.g. `spec.type=LoadBalancer`.
    pub field_selector: Option<String>,
}

impl InformerScope {
    /// Every object of the kind, the scope [`informer`](super::SharedInformerFactory::informer) uses.
    pub fn all() -> Self {
        Self::default()
    }

    /// Restricts to one namespace.
    pub fn in_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Restricts to objects matching a label selector.
    pub fn with_labels(mut self, selector: impl Into<String>) -> Self {
        self.label_selector = Some(selector.into());
        self
    }

    /// Restricts to objects matching a field selector.
    pub fn with_fields(mut self, selector: impl Into<String>) -> Self {
        self.field_selector = Some(selector.into());
        self
    }

    /// True for the unrestricted scope.
    pub fn is_everything(&self) -> bool {
        self.namespace.is_none() && self.label_selector.is_none() && self.field_selector.is_none()
    }

    /// Treats empty strings as "no restriction", so `Some("")` and `None` share one informer.
    pub(crate) fn normalized(self) -> Self {
        let keep = |s: Option<String>| s.filter(|s| !s.is_empty());
        Self {
            namespace: keep(self.namespace),
            label_selector: keep(self.label_selector),
            field_selector: keep(self.field_selector),
        }
    }
}

impl fmt::Display for InformerScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_everything() {
            return f.write_str("all");
        }
        let parts: Vec<String> = [
            self.namespace.as_ref().map(|v| format!("namespace={v}")),
            self.label_selector.as_ref().map(|v| format!("labels={v}")),
            self.field_selector.as_ref().map(|v| format!("fields={v}")),
        ]
        .into_iter()
        .flatten()
        .collect();
        f.write_str(&parts.join(" "))
    }
}
