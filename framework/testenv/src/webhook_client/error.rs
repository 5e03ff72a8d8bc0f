//! Why a webhook call failed, worded as kube-apiserver words it after its own prefix.

/// A failed webhook call. `Display` is the Go error text (`Post "…": dial tcp …`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// No client could be made for the configuration (e.g. a `caBundle` without a certificate);
    /// upstream words it `could not get REST client: <this>`.
    #[error("{0}")]
    Setup(String),
    /// The call itself failed: connecting, TLS, the deadline, the HTTP status or the answer's
    /// body; upstream words it `failed to call webhook: <this>`.
    #[error("{0}")]
    Call(String),
}

impl CallError {
    /// A failure of the `POST` itself, as Go's `url.Error` prints it.
    pub(super) fn post(url: &str, why: impl std::fmt::Display) -> CallError {
        CallError::Call(format!("Post {}: {why}", crate::api::status::go_quote(url)))
    }
}

/// An OS error as Go's `net` package prints it (`connect: connection refused`): Rust's text
/// without ` (os error N)`, first letter lowered.
pub(super) fn os_text(op: &str, e: &std::io::Error) -> String {
    use std::io::ErrorKind;
    let text = match e.kind() {
        ErrorKind::ConnectionRefused => "connection refused".to_string(),
        ErrorKind::ConnectionReset => "connection reset by peer".to_string(),
        ErrorKind::TimedOut => return "i/o timeout".to_string(),
        _ => {
            let s = e.to_string();
            let s = s.split(" (os error").next().unwrap_or_default().to_string();
            let mut c = s.chars();
            match c.next() {
                Some(f) => f.to_lowercase().chain(c).collect(),
                None => s,
            }
        }
    };
    format!("{op}: {text}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_post_failure_quotes_the_url() {
        let e = CallError::post("https://127.0.0.1:1/down?timeout=5s", "EOF");
        assert_eq!(
            e.to_string(),
            "Post \"https://127.0.0.1:1/down?timeout=5s\": EOF"
        );
    }

    #[test]
    fn os_errors_read_as_go_reads_them() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(os_text("connect", &refused), "connect: connection refused");
        let other = std::io::Error::from_raw_os_error(101);
        assert!(
            os_text("connect", &other).starts_with("connect: network"),
            "{}",
            os_text("connect", &other)
        );
    }
}
