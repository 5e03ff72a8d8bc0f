//! Parsing a YAML file a flag names (`--cloud-config`, `--kubeconfig`, the delegated
//! authentication and authorization kubeconfigs) without echoing it: [`parse_yaml`],
//! [`parse_yaml_documents`] and their redacted [`ConfigFileError`].
//!
//! These files hold credentials, and the YAML library's own errors quote the file (a snippet of
//! the lines around the fault), and serde's messages quote the offending value
//! (`invalid type: string "s3cr3t"`). Errors from here name the key path, line and column and
//! what was wrong with the value's *kind*, never the value or a line of the file; the caller
//! adds the file's name.

use std::borrow::Cow;
use std::cell::RefCell;
use std::fmt;

use serde::de::{Deserialize, DeserializeOwned, Deserializer};
use serde_saphyr::{DefaultMessageFormatter, MessageFormatter, Options};

/// The longest key path or reason kept (a runaway one is cut, never printed whole).
const MAX_REASON: usize = 240;

/// Why a YAML file does not parse into its type; the message names the key and position, never
/// the value or the file's text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{at}: {reason}", KeyPath(key))]
pub struct ConfigFileError {
    /// Path of the key at fault (`instances[0].name`); empty for the whole document.
    pub key: String,
    /// Line and column (1-based) of the fault, when known.
    pub at: FilePosition,
    /// What was wrong, with every value taken out.
    pub reason: String,
}

/// A 1-based line and column in the file; `None` when the parser did not say.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FilePosition(pub Option<(u64, u64)>);

impl FilePosition {
    /// The line, when known.
    pub fn line(&self) -> Option<u64> {
        self.0.map(|(line, _)| line)
    }
}

impl fmt::Display for FilePosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some((line, column)) => write!(f, " (line {line}, column {column})"),
            None => Ok(()),
        }
    }
}

struct KeyPath<'a>(&'a str);

impl fmt::Display for KeyPath<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            f.write_str("the document")
        } else {
            write!(f, "key {}", self.0)
        }
    }
}

/// Parses a YAML document into `T`; an empty document (blank, `---`, only comments) is `T`'s
/// YAML null (use `Option<T>` to accept it). A provider's `--cloud-config` is read with this
/// (`cloud_controllers::cloud::parse_cloud_config`).
///
/// ```
/// # use controller_manager::config_file::parse_yaml;
/// #[derive(Debug, serde::Deserialize)]
/// struct Config { token: String }
/// let err = parse_yaml::<Config>(b"token: [ \"s3cr3t\" ]\n").unwrap_err();
/// assert_eq!(err.to_string(), "key token (line 1, column 8): expected string scalar");
/// ```
pub fn parse_yaml<T: DeserializeOwned>(yaml: &[u8]) -> Result<T, ConfigFileError> {
    parse(yaml, |yaml, options| {
        serde_saphyr::from_slice_with_options::<Tracked<T>>(yaml, options)
    })
    .map(|tracked| tracked.0)
}

/// Parses a stream of YAML documents (separated by `---`) into one `T` each, skipping empty
/// ones, as kube reads a kubeconfig; the first fault is reported as [`parse_yaml`] reports it.
pub fn parse_yaml_documents<T: DeserializeOwned>(yaml: &[u8]) -> Result<Vec<T>, ConfigFileError> {
    parse(yaml, |yaml, options| {
        serde_saphyr::from_slice_multiple_with_options::<Tracked<T>>(yaml, options)
    })
    .map(|docs| docs.into_iter().map(|tracked| tracked.0).collect())
}

thread_local! {
    /// The key path of the fault a [`Tracked`] value saw last on this thread (parsing is
    /// synchronous, so it is the fault of the parse that just failed here).
    static FAULT_KEY: RefCell<String> = const { RefCell::new(String::new()) };
}

/// `T`, deserialized through serde_path_to_error: a failure leaves its key path in
/// [`FAULT_KEY`], and the library's own error goes back to the library (which then stops
/// reading and adds the position).
struct Tracked<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Tracked<T> {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        serde_path_to_error::deserialize(de)
            .map(Tracked)
            .map_err(|e| {
                FAULT_KEY.with(|key| *key.borrow_mut() = key_path(e.path()));
                e.into_inner()
            })
    }
}

/// Runs `parse` over `yaml` without the library's snippets, and redacts its error.
fn parse<R>(
    yaml: &[u8],
    parse: impl FnOnce(&[u8], Options) -> Result<R, serde_saphyr::Error>,
) -> Result<R, ConfigFileError> {
    FAULT_KEY.with(|key| key.borrow_mut().clear());
    let mut options = Options::default();
    options.with_snippet = false;
    parse(yaml, options).map_err(|e| redacted(FAULT_KEY.with(|key| key.take()), &e))
}

/// The path as `a.b[0].c`, without the `value` segment serde-saphyr's `Spanned` wrapper adds
/// (so a key literally named `value` is left out too; line and column still point at it).
fn key_path(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut out = String::new();
    for segment in path {
        match segment {
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key } if key == "value" => {}
            other => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(&other.to_string());
            }
        }
    }
    out
}

fn redacted(key: String, err: &serde_saphyr::Error) -> ConfigFileError {
    let at = FilePosition(
        err.location()
            .filter(|l| l.line() > 0)
            .map(|l| (l.line(), l.column())),
    );
    let message = DefaultMessageFormatter.format_message(err.without_snippet());
    ConfigFileError {
        key: cut(key.escape_debug().to_string()),
        at,
        reason: cut(redact(&message.escape_debug().to_string())),
    }
}

/// Keeps what a message says about the *kind* of fault and drops every value in it: serde's
/// templates (`invalid type: string "v", expected X`, `unknown variant `v``) lose the value, any
/// other text loses whatever it quotes.
fn redact(message: &str) -> String {
    let (head, expected) = match message.split_once(", expected ") {
        Some((head, tail)) => (head, Some(tail)),
        None => (message, None),
    };
    let head: Cow<'_, str> = if let Some(kind) = head
        .strip_prefix("invalid type: ")
        .map(|k| ("invalid type: ", k))
        .or_else(|| {
            head.strip_prefix("invalid value: ")
                .map(|k| ("invalid value: ", k))
        }) {
        // `string "v"`, `integer `5``, `floating point `1.5``, `sequence`: the words before the value.
        let words = kind.1.split(['`', '"']).next().unwrap_or("").trim();
        format!("{}{}", kind.0, words).into()
    } else if head.starts_with("unknown variant ") {
        "unknown value".into()
    } else {
        unquoted(head)
    };
    match expected {
        Some(expected) => format!("{head}, expected {expected}"),
        None => head.into_owned(),
    }
}

/// `text` cut to [`MAX_REASON`] bytes (a runaway key or message is never printed whole).
pub(crate) fn cut(mut text: String) -> String {
    if text.len() > MAX_REASON {
        let end = (0..=MAX_REASON)
            .rev()
            .find(|i| text.is_char_boundary(*i))
            .unwrap_or(0);
        text.truncate(end);
        text.push('…');
    }
    text
}

/// `text` with everything between quotes or backticks replaced by `…`, except field names in
/// serde's `unknown field`/`missing field`/`duplicate field` (they are keys, not values).
fn unquoted(text: &str) -> Cow<'_, str> {
    if ["unknown field ", "missing field ", "duplicate field "]
        .iter()
        .any(|p| text.starts_with(p))
    {
        return text.into();
    }
    let mut out = String::with_capacity(text.len());
    let mut open: Option<char> = None;
    for c in text.chars() {
        match open {
            Some(q) if c == q => {
                out.push(c);
                open = None;
            }
            Some(_) => {}
            None => {
                out.push(c);
                if matches!(c, '"' | '`') {
                    out.push('…');
                    open = Some(c);
                }
            }
        }
    }
    out.into()
}

#[cfg(test)]
#[path = "config_file_tests.rs"]
mod tests;
