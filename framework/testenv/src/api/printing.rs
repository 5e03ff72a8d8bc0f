//! What the built-in kinds' printers share: a cell's text at a JSON pointer, ages as kubectl
//! shows them (Go's `duration.HumanDuration`), `<none>` for empty cells, lists cut at three, and
//! the row that starts with the object's name.

use serde_json::Value;

/// The string at `ptr`, empty when missing.
pub fn text<'a>(obj: &'a Value, ptr: &str) -> &'a str {
    obj.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

/// `<none>` for an empty cell.
pub fn or_none(s: String) -> String {
    if s.is_empty() { "<none>".into() } else { s }
}

/// The array at `key`, empty when missing.
pub fn arr<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// Up to three of `items`, then `+ N more...`, as upstream's endpoint printers cut lists.
pub fn first_three(items: Vec<String>, none: &str) -> String {
    match items.len() {
        0 => none.to_string(),
        n if n > 3 => format!("{} + {} more...", items[..3].join(","), n - 3),
        _ => items.join(","),
    }
}

/// The AGE cell: how long ago the object was created.
pub fn age(obj: &Value) -> String {
    since(obj, "/metadata/creationTimestamp").unwrap_or_else(|| "<unknown>".into())
}

/// How long ago an RFC 3339 timestamp (or MicroTime) was, as kubectl prints it.
pub fn since(obj: &Value, ptr: &str) -> Option<String> {
    let t = obj
        .pointer(ptr)?
        .as_str()?
        .parse::<jiff::Timestamp>()
        .ok()?;
    Some(human_duration(
        jiff::Timestamp::now().as_second() - t.as_second(),
    ))
}

/// A row: the object's name, then `rest`.
pub fn row(obj: &Value, rest: Vec<Value>) -> Vec<Value> {
    let mut out = vec![Value::from(text(obj, "/metadata/name"))];
    out.extend(rest);
    out
}

/// Go's `duration.HumanDuration`, as kubectl's AGE column shows it.
pub fn human_duration(secs: i64) -> String {
    let s = secs.max(0);
    let (m, h, d) = (s / 60, s / 3600, s / 86400);
    if s < 120 {
        format!("{s}s")
    } else if m < 10 {
        if s % 60 == 0 {
            format!("{m}m")
        } else {
            format!("{m}m{}s", s % 60)
        }
    } else if m < 180 {
        format!("{m}m")
    } else if h < 8 {
        if m % 60 == 0 {
            format!("{h}h")
        } else {
            format!("{h}h{}m", m % 60)
        }
    } else if h < 48 {
        format!("{h}h")
    } else if h < 24 * 8 {
        if h % 24 == 0 {
            format!("{d}d")
        } else {
            format!("{d}d{}h", h % 24)
        }
    } else if h < 24 * 365 * 2 {
        format!("{d}d")
    } else {
        format!("{}y", d / 365)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_durations_match_go() {
        let cases = [
            (5, "5s"),
            (119, "119s"),
            (150, "2m30s"),
            (600, "10m"),
            (3 * 3600 + 60, "3h1m"),
            (9 * 3600, "9h"),
            (50 * 3600, "2d2h"),
            (10 * 86400, "10d"),
            (800 * 86400, "2y"),
        ];
        for (s, want) in cases {
            assert_eq!(human_duration(s), want, "{s}");
        }
    }
}
