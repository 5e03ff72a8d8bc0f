//! ListOptions values read from the query string as upstream's parameter codec reads them:
//! integers (`limit`, `timeoutSeconds`) through Go's `strconv.ParseInt` (400 with its message
//! otherwise), a watch timeout of any size that never overflows the clock, and the list checks
//! of `resourceVersionMatch` (`ValidateListOptions`, 422).

use std::collections::HashMap;
use std::time::Duration;

use crate::api::status::{ApiError, Cause, go_quote};

/// The longest watch kept open when `timeoutSeconds` asks for more (about 30 years): a huge
/// value means "no timeout", and `Instant + Duration` must not overflow.
const LONGEST_WATCH: Duration = Duration::from_secs(30 * 365 * 24 * 3600);

/// An integer query parameter (unset or empty = `None`), or upstream's 400.
pub fn int(query: &HashMap<String, String>, name: &str) -> Result<Option<i64>, ApiError> {
    let Some(v) = query.get(name).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    let digits = v.strip_prefix(['+', '-']).unwrap_or(v);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(parse_int_error(v, "invalid syntax"));
    }
    v.parse::<i64>()
        .map(Some)
        .map_err(|_| parse_int_error(v, "value out of range"))
}

fn parse_int_error(v: &str, why: &str) -> ApiError {
    ApiError::bad_request(format!("strconv.ParseInt: parsing {}: {why}", go_quote(v)))
}

/// `limit` (a negative or missing one lists everything).
pub fn limit(query: &HashMap<String, String>) -> Result<usize, ApiError> {
    Ok(int(query, "limit")?.map_or(0, |n| usize::try_from(n).unwrap_or(0)))
}

/// `timeoutSeconds` of a watch: `None` (unset or 0) is upstream's random default, a negative
/// value ends the watch at once (`Some(ZERO)`), a huge one is capped at [`LONGEST_WATCH`].
pub fn watch_timeout(query: &HashMap<String, String>) -> Result<Option<Duration>, ApiError> {
    Ok(match int(query, "timeoutSeconds")? {
        None | Some(0) => None,
        Some(n) if n < 0 => Some(Duration::ZERO),
        Some(n) => Some(Duration::from_secs(n.unsigned_abs()).min(LONGEST_WATCH)),
    })
}

/// The checks upstream's `ValidateListOptions` makes of `resourceVersionMatch` on a list.
pub fn check_list_rv_match(query: &HashMap<String, String>) -> Result<(), ApiError> {
    let causes = list_rv_match_causes(query);
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid("meta.k8s.io", "ListOptions", "", causes))
}

/// What is wrong with a list's `resourceVersionMatch` (v1.23 applied the same to watches, after
/// refusing the parameter there outright).
pub fn list_rv_match_causes(query: &HashMap<String, String>) -> Vec<Cause> {
    let get = |k: &str| query.get(k).map_or("", String::as_str);
    let (rv_match, rv) = (get("resourceVersionMatch"), get("resourceVersion"));
    let mut causes = Vec::new();
    if rv_match.is_empty() {
        return causes;
    }
    let field = "resourceVersionMatch";
    if rv.is_empty() {
        causes.push(Cause::forbidden(
            field,
            "resourceVersionMatch is forbidden unless resourceVersion is provided",
        ));
    }
    if !get("continue").is_empty() {
        causes.push(Cause::forbidden(
            field,
            "resourceVersionMatch is forbidden when continue is provided",
        ));
    }
    if rv_match != "Exact" && rv_match != "NotOlderThan" {
        causes.push(Cause::not_supported(
            field,
            &go_quote(rv_match),
            &["Exact", "NotOlderThan", ""],
        ));
    }
    if rv_match == "Exact" && rv == "0" {
        causes.push(Cause::forbidden(
            field,
            "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
        ));
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(k: &str, v: &str) -> HashMap<String, String> {
        HashMap::from([(k.to_string(), v.to_string())])
    }

    #[test]
    fn integers_as_strconv_parse_int() {
        assert_eq!(int(&q("limit", "+5"), "limit").unwrap(), Some(5));
        let e = int(&q("limit", "1.5"), "limit").unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (400, "strconv.ParseInt: parsing \"1.5\": invalid syntax")
        );
        let e = int(&q("t", "18446744073709551615"), "t").unwrap_err();
        assert_eq!(
            e.message,
            "strconv.ParseInt: parsing \"18446744073709551615\": value out of range"
        );
        let huge = q("timeoutSeconds", "9223372036854775807");
        assert_eq!(watch_timeout(&huge).unwrap(), Some(LONGEST_WATCH));
        let negative = q("timeoutSeconds", "-5");
        assert_eq!(watch_timeout(&negative).unwrap(), Some(Duration::ZERO));
    }
}
