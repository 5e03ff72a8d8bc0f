//! Who a request is from, as k8s.io/apiserver's `user.Info`, and the well-known names.

use std::collections::BTreeMap;

/// The anonymous user and its group, given to requests no authenticator claims.
pub const ANONYMOUS: &str = "system:anonymous";
/// Group of every anonymous request.
pub const UNAUTHENTICATED: &str = "system:unauthenticated";
/// Group added to every authenticated user.
pub const AUTHENTICATED: &str = "system:authenticated";
/// Group always allowed by the delegated authorizer.
pub const MASTERS: &str = "system:masters";

/// An authenticated (or anonymous) caller.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserInfo {
    /// User name.
    pub name: String,
    /// UID, empty when unknown.
    pub uid: String,
    /// Groups.
    pub groups: Vec<String>,
    /// Extra attributes.
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// Upstream's anonymous user.
    pub fn anonymous() -> Self {
        UserInfo {
            name: ANONYMOUS.to_string(),
            groups: vec![UNAUTHENTICATED.to_string()],
            ..Default::default()
        }
    }

    /// Upstream's `AuthenticatedGroupAdder`: `system:authenticated` unless already there (or the
    /// user is anonymous).
    pub(crate) fn with_authenticated_group(mut self) -> Self {
        let marked = self
            .groups
            .iter()
            .any(|g| g == AUTHENTICATED || g == UNAUTHENTICATED);
        if !marked && self.name != ANONYMOUS {
            self.groups.push(AUTHENTICATED.to_string());
        }
        self
    }
}
