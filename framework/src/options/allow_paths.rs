//! `--authorization-always-allow-paths` parsed: the paths delegated authorization allows without
//! asking the API server, with upstream's path-authorizer rules. Parsed here, beside the flag, so
//! a bad pattern is reported with every other flag error before anything starts.

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
}
