//! Delegated authorization, as k8s.io/apiserver's `DelegatingAuthorizationOptions`: group
//! `system:masters` is always allowed, then `--authorization-always-allow-paths`, then a
//! SubjectAccessReview for the non-resource request (`get /metrics`). The first to allow wins.

use super::user::{MASTERS, UserInfo};
use super::webhook::{AccessReviewer, Decision};
use crate::options::AllowPaths;

/// The union of the configured authorizers.
pub(crate) struct Authorizer {
    pub always_allow: AllowPaths,
    pub reviews: Option<AccessReviewer>,
}

impl Authorizer {
    /// The decision for `user` doing `verb` on `path`; `Err` when the review itself failed.
    pub(crate) async fn authorize(
        &self,
        user: &UserInfo,
        verb: &str,
        path: &str,
    ) -> Result<Decision, String> {
        if user.groups.iter().any(|g| g == MASTERS) || self.always_allow.allows(path) {
            return Ok(Decision::Allow);
        }
        match &self.reviews {
            Some(reviews) => reviews.review(user, verb, path).await,
            None => Ok(Decision::NoOpinion(String::new())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(p: &[&str]) -> AllowPaths {
        AllowPaths::parse(&p.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[tokio::test]
    async fn masters_and_allowed_paths_pass_and_the_rest_has_no_opinion() {
        let authz = Authorizer {
            always_allow: paths(&["/healthz"]),
            reviews: None,
        };
        let anonymous = UserInfo::anonymous();
        let admin = UserInfo {
            name: "admin".into(),
            groups: vec![MASTERS.into()],
            ..Default::default()
        };
        assert_eq!(
            authz.authorize(&anonymous, "get", "/healthz").await,
            Ok(Decision::Allow)
        );
        assert_eq!(
            authz.authorize(&admin, "get", "/metrics").await,
            Ok(Decision::Allow)
        );
        assert_eq!(
            authz.authorize(&anonymous, "get", "/metrics").await,
            Ok(Decision::NoOpinion(String::new()))
        );
    }
}
