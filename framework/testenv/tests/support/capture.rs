//! The captured kube-apiserver exchanges in `tests/golden/*.txt` (copied from the shared
//! captures): the request line, `Content-Type` and body, the status, and the JSON answer.
#![allow(dead_code)]

use serde_json::Value;

/// One captured request and its answer.
pub struct Capture {
    pub method: String,
    pub path: String,
    pub content_type: Option<String>,
    pub body: Option<String>,
    pub code: u16,
    pub response: Value,
}

/// Reads `tests/golden/<name>.txt`: `# METHOD PATH` first, then `# Content-Type: ...`,
/// `# body: ...` and `# HTTP N` lines, then the JSON answer.
pub fn parse(name: &str) -> Capture {
    let path = format!("{}/tests/golden/{name}.txt", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut cap = Capture {
        method: String::new(),
        path: String::new(),
        content_type: None,
        body: None,
        code: 0,
        response: Value::Null,
    };
    let mut json = String::new();
    for line in text.lines() {
        if let Some(h) = line.strip_prefix("# ") {
            if let Some(ct) = h.strip_prefix("Content-Type: ") {
                cap.content_type = Some(ct.to_string());
            } else if let Some(b) = h.strip_prefix("body: ") {
                cap.body = Some(b.to_string());
            } else if let Some(c) = h.strip_prefix("HTTP ") {
                cap.code = c.trim().parse().unwrap();
            } else if h.starts_with("note: ") {
                // The capture's own comment (the cel/ and webhooks/ files have one).
            } else if cap.method.is_empty()
                && let Some((m, p)) = h.split_once(' ')
            {
                cap.method = m.to_string();
                cap.path = p.split_whitespace().next().unwrap_or_default().to_string();
            }
        } else {
            json.push_str(line);
            json.push('\n');
        }
    }
    cap.response = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{name}: {e}"));
    cap
}
