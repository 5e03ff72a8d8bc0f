//! Delegated authorization, as k8s.io/apiserver's `DelegatingAuthorizationOptions`: group
//! `system:masters` is always allowed, then `--authorization-always-allow-paths`, then a
//! SubjectAccessReview for the non-resource request (`get /metrics`). The first to allow wins.

use super::user::{MASTERS, UserInfo};
use super::webhook::{AccessReviewer, Decision};

/// `--authorization-always-allow-paths`: exact paths and `prefix*` patterns, leading `/` optional.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllowPaths {
    exact: Vec<String>,
    prefixes: Vec<String>,
}

impl AllowPaths {
    /// Upstream's path authorizer rules: only a trailing `*` is allowed.
    pub fn parse(paths: &[String]) -> Result<Self, String> {
        let mut out = AllowPaths::default();
        for p in paths {
            let p = p.strip_prefix('/').unwrap_or(p);
            if p.is_empty() {
                out.exact.push(String::new());
                continue;
            }
            if p[..p.len() - 1].contains('*') {
                return Err(format!("only trailing * allowed in {p:?}"));
            }
            match p.strip_suffix('*') {
                Some(prefix) => out.prefixes.push(prefix.to_string()),
                None => out.exact.push(p.to_string()),
            }
        }
        Ok(out)
    }

    /// Whether `path` is always allowed.
    pub fn allows(&self, path: &str) -> bool {
        let path = path.strip_prefix('/').unwrap_or(path);
        self.exact.iter().any(|p| p == path) || self.prefixes.iter().any(|p| path.starts_with(p))
    }
}

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

    #[test]
    fn exact_and_prefix_paths_as_upstream() {
        let p = paths(&["/healthz", "readyz", "/debug/*"]);
        assert!(p.allows("/healthz") && p.allows("/readyz") && p.allows("/debug/pprof/heap"));
        assert!(!p.allows("/healthz/leaderElection"), "exact means exact");
        assert!(!p.allows("/metrics") && !p.allows("/"));
        assert!(paths(&["/"]).allows("/"));
        let err = AllowPaths::parse(&["/a*/b".to_string()]).unwrap_err();
        assert_eq!(err, "only trailing * allowed in \"a*/b\"");
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
