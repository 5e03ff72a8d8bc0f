//! The rule for a provider name read from a config file ([`check_provider_name`]): it goes into
//! every `providerID` as `<name>://…` and into label values, so it must be a label value.

use std::fmt;

/// The longest provider name: a Kubernetes label value's limit.
pub const MAX_PROVIDER_NAME: usize = 63;

/// A provider name broke the rule; the message states the rule and quotes at most the first
/// 64 characters of the name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "provider name {} {problem}: a provider name must be 1 to 63 ASCII letters, digits, '-', '_' or '.', beginning and ending with a letter or digit, since it goes into every providerID as <name>:// and into label values",
    Truncated(name)
)]
pub struct ProviderNameError {
    /// The name given (printed cut to 64 characters).
    pub name: String,
    /// Which part of the rule it breaks.
    pub problem: &'static str,
}

/// Checks `name` against the provider-name rule (a Kubernetes label value, not empty): no
/// slashes, spaces, control characters or colons can reach a `providerID`.
pub fn check_provider_name(name: &str) -> Result<(), ProviderNameError> {
    let problem = if name.is_empty() {
        Some("is empty")
    } else if name.len() > MAX_PROVIDER_NAME {
        Some("is longer than 63 characters")
    } else if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        Some(if c == '/' {
            "has a slash"
        } else if c.is_whitespace() {
            "has a space"
        } else if c.is_control() {
            "has a control character"
        } else {
            "has a character other than letters, digits, '-', '_' and '.'"
        })
    } else if !name.starts_with(|c: char| c.is_ascii_alphanumeric())
        || !name.ends_with(|c: char| c.is_ascii_alphanumeric())
    {
        Some("does not begin and end with a letter or digit")
    } else {
        None
    };
    match problem {
        None => Ok(()),
        Some(problem) => Err(ProviderNameError {
            name: name.to_owned(),
            problem,
        }),
    }
}

/// Quotes a user-given string cut to its first 64 characters, saying how much was left out, so
/// a huge value never fills an error message.
pub struct Truncated<'a>(pub &'a str);

impl fmt::Display for Truncated<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 64;
        match self.0.char_indices().nth(SHOWN) {
            None => write!(f, "{:?}", self.0),
            Some((cut, _)) => write!(
                f,
                "{:?}… ({} more bytes)",
                &self.0[..cut],
                self.0.len() - cut
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_value_names_pass() {
        for name in ["fake", "acme-cloud", "a", "v1.2_x", &"a".repeat(63)] {
            assert_eq!(check_provider_name(name), Ok(()), "{name}");
        }
    }

    #[test]
    fn each_broken_rule_is_named() {
        let long = "a".repeat(64);
        for (name, problem) in [
            ("", "is empty"),
            ("a/b", "has a slash"),
            ("my cloud", "has a space"),
            ("a\tb", "has a space"),
            ("a\0b", "has a control character"),
            ("a\u{7f}b", "has a control character"),
            ("acme:", "has a character other than"),
            ("-acme", "does not begin and end"),
            (long.as_str(), "is longer than 63 characters"),
        ] {
            let err = check_provider_name(name).unwrap_err();
            let text = err.to_string();
            assert!(text.contains(problem), "{name:?}: {text}");
            assert!(text.contains("1 to 63 ASCII letters"), "{name:?}: {text}");
            assert!(!text.contains('\0') && !text.contains('\t'), "{text}");
        }
    }

    #[test]
    fn a_huge_name_is_quoted_cut() {
        let huge = format!("{}{}", "x".repeat(64), "y".repeat(1_000_000));
        let text = check_provider_name(&huge).unwrap_err().to_string();
        assert!(text.len() < 500, "{}", text.len());
        assert!(text.contains("(1000000 more bytes)"), "{text}");
        assert!(!text.contains("yy"), "{text}");
    }
}
