//! Streaming lists (KEP-3157 WatchList) as servers of different ages answer them: which of the
//! `sendInitialEvents` / `resourceVersionMatch` parameters a watch or list may carry (upstream's
//! `ValidateListOptions`, 422 with its causes), and what the server then does with them.
//!
//! [`WatchListSupport`] picks the server: current kube-apiserver (the default), one with the
//! `WatchList` gate off, v1.23 (no such parameter; `resourceVersionMatch` refused on a watch), or
//! one that ignores both parameters and serves a plain watch.

use std::collections::HashMap;

use crate::api::status::{ApiError, Cause, go_quote};

/// How the server treats streaming lists; set with [`crate::Builder::watch_list`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum WatchListSupport {
    /// Current kube-apiserver with `WatchList` on (default since 1.34): `sendInitialEvents=true`
    /// streams the objects as ADDED, then the `k8s.io/initial-events-end` BOOKMARK.
    #[default]
    Served,
    /// kube-apiserver 1.27–1.33 with the `WatchList` gate off: a watch carrying
    /// `sendInitialEvents` is a 422 (`sendInitialEvents is forbidden for watch unless the
    /// WatchList feature gate is enabled`).
    GateDisabled,
    /// kube-apiserver v1.23: `sendInitialEvents` is an unknown parameter and ignored, and
    /// `resourceVersionMatch` on a watch is a 422 (`resourceVersionMatch is forbidden for watch`),
    /// so a streaming-list request is refused.
    V1_23,
    /// A server (or proxy) that drops both parameters and serves a plain watch: rv unset starts
    /// with the current objects as ADDED, then live events, and no initial-events-end bookmark.
    Ignored,
}

fn get<'a>(query: &'a HashMap<String, String>, key: &str) -> &'a str {
    query.get(key).map_or("", String::as_str)
}

fn invalid(causes: Vec<Cause>) -> Result<(), ApiError> {
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid("meta.k8s.io", "ListOptions", "", causes))
}

/// `sendInitialEvents` parsed as upstream's parameter codec parses a `*bool` (400 otherwise).
fn send_initial_events(query: &HashMap<String, String>) -> Result<Option<bool>, ApiError> {
    let Some(v) = query.get("sendInitialEvents") else {
        return Ok(None);
    };
    match v.as_str() {
        "" => Ok(None),
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(Some(true)),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(Some(false)),
        other => Err(ApiError::bad_request(format!(
            "strconv.ParseBool: parsing {}: invalid syntax",
            go_quote(other)
        ))),
    }
}

/// Checks a list's `sendInitialEvents` (forbidden on lists since it exists; v1.23 and servers
/// that ignore it do not know it).
pub fn check_list(
    query: &HashMap<String, String>,
    support: WatchListSupport,
) -> Result<(), ApiError> {
    if matches!(support, WatchListSupport::V1_23 | WatchListSupport::Ignored) {
        return Ok(());
    }
    if send_initial_events(query)?.is_none() {
        return Ok(());
    }
    invalid(vec![Cause::forbidden(
        "sendInitialEvents",
        "sendInitialEvents is forbidden for list",
    )])
}

/// Validates a watch's `sendInitialEvents` / `resourceVersionMatch` as `support`'s server does
/// and returns the `sendInitialEvents` it then acts on (`None` where it does not know it).
pub fn check_watch(
    query: &HashMap<String, String>,
    support: WatchListSupport,
) -> Result<Option<bool>, ApiError> {
    let rv_match = Some(get(query, "resourceVersionMatch").to_string()).filter(|m| !m.is_empty());
    match support {
        WatchListSupport::Ignored => return Ok(None),
        WatchListSupport::V1_23 => {
            check_v1_23(query, rv_match.as_deref())?;
            return Ok(None);
        }
        WatchListSupport::Served | WatchListSupport::GateDisabled => {}
    }
    let initial = send_initial_events(query)?;
    let field = "resourceVersionMatch";
    let mut causes = Vec::new();
    if initial.is_some() {
        if rv_match.as_deref() != Some("NotOlderThan") {
            causes.push(Cause::forbidden(
                field,
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            ));
        }
        if support == WatchListSupport::GateDisabled {
            causes.push(Cause::forbidden(
                "sendInitialEvents",
                "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled",
            ));
        }
    }
    if let Some(m) = rv_match.as_deref() {
        if initial.is_none() {
            causes.push(Cause::forbidden(
                field,
                "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            ));
        }
        if m != "NotOlderThan" {
            causes.push(Cause::not_supported(field, &go_quote(m), &["NotOlderThan"]));
        }
        if !get(query, "continue").is_empty() {
            causes.push(Cause::forbidden(
                field,
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
    }
    invalid(causes)?;
    Ok(initial)
}

/// v1.23's `ValidateListOptions` for a watch: any `resourceVersionMatch` is refused, with the
/// list's checks of it after.
fn check_v1_23(query: &HashMap<String, String>, rv_match: Option<&str>) -> Result<(), ApiError> {
    if rv_match.is_none() {
        return Ok(());
    }
    let mut causes = vec![Cause::forbidden(
        "resourceVersionMatch",
        "resourceVersionMatch is forbidden for watch",
    )];
    causes.extend(crate::http::query::list_rv_match_causes(query));
    invalid(causes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_bad_boolean_is_the_parameter_codec_400() {
        let e = check_watch(
            &q(&[("sendInitialEvents", "yes")]),
            WatchListSupport::Served,
        )
        .unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (400, "strconv.ParseBool: parsing \"yes\": invalid syntax")
        );
    }

    #[test]
    fn servers_that_do_not_know_the_parameter_drop_it() {
        let p = q(&[("sendInitialEvents", "true")]);
        for support in [WatchListSupport::V1_23, WatchListSupport::Ignored] {
            assert_eq!(check_watch(&p, support).unwrap(), None);
            assert!(check_list(&p, support).is_ok());
        }
    }
}
