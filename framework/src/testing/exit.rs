//! Owns [`ManagerExit`]: how a manager under test ended, kept so that every later wait reports
//! it too.

use std::error::Error;
use std::fmt;
use std::process::ExitStatus;
use std::sync::Arc;

/// How a manager under test ended.
#[derive(Clone)]
pub enum ManagerExit {
    /// Its run future returned `Ok` (it was stopped, or it had nothing left to run).
    Returned,
    /// Its run future returned this error, e.g. a controller that failed to start.
    Failed(Arc<dyn Error + Send + Sync + 'static>),
    /// Its task panicked (or was aborted) with this message.
    Panicked(String),
    /// The child process exited with this status.
    Process(ExitStatus),
}

impl ManagerExit {
    /// The manager's error, for a test that expects one (`downcast_ref` it to the error type).
    pub fn error(&self) -> Option<&(dyn Error + Send + Sync + 'static)> {
        match self {
            ManagerExit::Failed(e) => Some(e.as_ref()),
            _ => None,
        }
    }

    /// Whether it ended as a clean stop does: `Ok`, or exit status 0.
    pub fn is_clean(&self) -> bool {
        match self {
            ManagerExit::Returned => true,
            ManagerExit::Process(status) => status.success(),
            ManagerExit::Failed(_) | ManagerExit::Panicked(_) => false,
        }
    }
}

impl fmt::Display for ManagerExit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ManagerExit::Returned => f.write_str("it returned Ok"),
            ManagerExit::Failed(e) => write!(f, "it failed: {}", chain(e.as_ref())),
            ManagerExit::Panicked(message) => write!(f, "its task panicked: {message}"),
            ManagerExit::Process(status) => write!(f, "the process exited with {status}"),
        }
    }
}

impl fmt::Debug for ManagerExit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The error and each cause its message does not already show (many errors print their source
/// in their own message too).
fn chain(error: &(dyn Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text = format!("{text}: {cause_text}");
        }
        source = cause.source();
    }
    text
}
