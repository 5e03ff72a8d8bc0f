//! Owns the waits of [`ManagerTask`](super::ManagerTask) and
//! [`ManagerProcess`](super::ManagerProcess) and their [`WaitError`]: every wait races the
//! manager's exit and a timeout, so a manager that fails is reported at once, and a wait that
//! times out says what it saw last.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::wait::Condition;
use kube::runtime::watcher;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::exit::ManagerExit;

/// Why a wait (or a stop) of a manager under test failed. `Debug` prints the `Display` message,
/// so a test's `.unwrap()` shows it whole.
#[derive(thiserror::Error)]
pub enum WaitError {
    /// The manager exited before what was awaited happened (at once, not at the timeout).
    #[error("{what}: the manager exited first: {exit}{logs}")]
    Exited {
        /// What the test waited for.
        what: String,
        /// How the manager ended; [`ManagerExit::error`] is its error.
        exit: ManagerExit,
        /// A child process's output so far (empty in-process).
        logs: Logs,
    },
    /// What was awaited did not happen within the timeout.
    #[error("{what}: not within {after:?}{}{logs}", seen_suffix(.last_seen))]
    Timeout {
        /// What the test waited for.
        what: String,
        /// The timeout.
        after: Duration,
        /// The object as last seen (JSON, without managedFields) or that it did not exist; empty
        /// for [`until`](super::ManagerTask::until), which has no object.
        last_seen: String,
        /// A child process's output so far (empty in-process).
        logs: Logs,
    },
    /// The manager did not stop cleanly after its stop signal.
    #[error("stopping the manager: {exit}{logs}")]
    Stop {
        /// How it ended instead, or that it was still running at the timeout.
        exit: StopOutcome,
        /// A child process's output so far (empty in-process).
        logs: Logs,
    },
}

impl WaitError {
    /// How the manager ended, when it did.
    pub fn exit(&self) -> Option<&ManagerExit> {
        match self {
            WaitError::Exited { exit, .. } => Some(exit),
            WaitError::Stop {
                exit: StopOutcome::Exited(exit),
                ..
            } => Some(exit),
            WaitError::Timeout { .. } | WaitError::Stop { .. } => None,
        }
    }
}

fn seen_suffix(last_seen: &str) -> String {
    match last_seen.is_empty() {
        true => String::new(),
        false => format!("; last seen: {last_seen}"),
    }
}

impl fmt::Debug for WaitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// How a stop went wrong.
#[derive(Debug)]
pub enum StopOutcome {
    /// It ended, but not cleanly (or had already ended before the stop).
    Exited(ManagerExit),
    /// It was still running this long after the stop signal.
    StillRunning(Duration),
}

impl fmt::Display for StopOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StopOutcome::Exited(exit) => write!(f, "{exit}"),
            StopOutcome::StillRunning(after) => {
                write!(f, "still running {after:?} after the stop signal")
            }
        }
    }
}

/// A child process's output, shown after an error's message; empty in-process (the test's own
/// output has the manager's logs).
#[derive(Clone, Debug, Default)]
pub struct Logs(pub String);

impl fmt::Display for Logs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.is_empty() {
            true => Ok(()),
            false => write!(f, "\n--- manager logs ---\n{}", self.0),
        }
    }
}

/// A manager under test: something that can exit while a test waits for it.
pub(super) trait Supervised {
    /// Resolves once the manager has exited (at once if it already has); cancel-safe.
    fn exited(&mut self) -> impl Future<Output = ManagerExit> + Send;
    /// Its output so far, for error messages.
    fn logs(&self) -> Logs;
    /// How long a wait may take.
    fn timeout(&self) -> Duration;
}

pub(super) enum Raced<T> {
    Done(T),
    Exited(ManagerExit),
    TimedOut,
}

/// Runs `work` until it finishes, the manager exits or the timeout passes, whichever is first
/// (a finished `work` wins a tie: it happened).
pub(super) async fn race<T>(
    target: &mut impl Supervised,
    work: impl Future<Output = T>,
) -> Raced<T> {
    let timeout = target.timeout();
    tokio::select! {
        biased;
        value = work => Raced::Done(value),
        exit = target.exited() => Raced::Exited(exit),
        () = tokio::time::sleep(timeout) => Raced::TimedOut,
    }
}

/// The waits of a [`Supervised`] type, as inherent methods (so tests need no trait in scope),
/// written once for [`ManagerTask`](super::ManagerTask) and
/// [`ManagerProcess`](super::ManagerProcess).
macro_rules! supervised_waits {
    ($type:ty) => {
        impl $type {
            /// Waits until `cond` holds on the object `name` (kube's [`Condition`]s, or any
            /// `Fn(Option<&K>) -> bool`) and returns it (`None`: it matched being absent, e.g.
            /// [`is_deleted`](kube::runtime::wait::conditions::is_deleted)); fails as soon as
            /// the manager exits, or at the timeout with the object as last seen (and a child
            /// process's output).
            pub async fn wait_for<K>(
                &mut self,
                api: &kube::Api<K>,
                name: &str,
                what: &str,
                cond: impl kube::runtime::wait::Condition<K>,
            ) -> Result<Option<K>, super::WaitError>
            where
                K: kube::Resource
                    + Clone
                    + serde::de::DeserializeOwned
                    + serde::Serialize
                    + std::fmt::Debug
                    + Send
                    + 'static,
            {
                let mut seen = super::wait::Seen::default();
                let watched = super::wait::watch_until(api, name, &cond, &mut seen);
                let raced = super::wait::race(self, watched).await;
                super::wait::outcome(self, what, raced, || seen.describe(name))
            }

            /// Awaits any future (a store filling, a channel, a request) under the same rules.
            pub async fn until<T>(
                &mut self,
                what: &str,
                work: impl std::future::Future<Output = T>,
            ) -> Result<T, super::WaitError> {
                let raced = super::wait::race(self, work).await;
                super::wait::outcome(self, what, raced, String::new)
            }
        }
    };
}
pub(super) use supervised_waits;

/// What a raced wait comes to: its value, the manager's exit, or a timeout reporting
/// `last_seen()`.
pub(super) fn outcome<T>(
    target: &impl Supervised,
    what: &str,
    raced: Raced<T>,
    last_seen: impl FnOnce() -> String,
) -> Result<T, WaitError> {
    match raced {
        Raced::Done(value) => Ok(value),
        Raced::Exited(exit) => Err(exited(target, what, exit)),
        Raced::TimedOut => Err(WaitError::Timeout {
            what: what.to_string(),
            after: target.timeout(),
            last_seen: last_seen(),
            logs: target.logs(),
        }),
    }
}

fn exited(target: &impl Supervised, what: &str, exit: ManagerExit) -> WaitError {
    WaitError::Exited {
        what: what.to_string(),
        exit,
        logs: target.logs(),
    }
}

/// What a wait saw of its object so far.
pub(super) struct Seen<K> {
    /// `None` before the first answer; `Some(None)` while the object does not exist.
    object: Option<Option<K>>,
    /// The last watch error, retried with backoff.
    error: Option<String>,
}

impl<K> Default for Seen<K> {
    fn default() -> Self {
        Seen {
            object: None,
            error: None,
        }
    }
}

impl<K: kube::Resource + Clone + Serialize> Seen<K> {
    pub(super) fn describe(&self, name: &str) -> String {
        let object = match &self.object {
            None => "no answer from the API server yet".to_string(),
            Some(None) => format!("{name} does not exist"),
            Some(Some(object)) => {
                let mut object = object.clone();
                object.meta_mut().managed_fields = None;
                serde_json::to_string_pretty(&object).unwrap_or_else(|e| e.to_string())
            }
        };
        match &self.error {
            Some(error) => format!("{object} (last watch error: {error})"),
            None => object,
        }
    }
}

pub(super) async fn watch_until<K>(
    api: &Api<K>,
    name: &str,
    cond: &impl Condition<K>,
    seen: &mut Seen<K>,
) -> Option<K>
where
    K: kube::Resource + Clone + DeserializeOwned + fmt::Debug + Send + 'static,
{
    let mut changes = std::pin::pin!(watcher::watch_object(api.clone(), name).default_backoff());
    while let Some(change) = changes.next().await {
        match change {
            Ok(object) => {
                let holds = cond.matches_object(object.as_ref());
                seen.object = Some(object.clone());
                if holds {
                    return object;
                }
            }
            Err(error) => seen.error = Some(error.to_string()),
        }
    }
    // A watcher never ends; should it, the timeout reports what was seen.
    std::future::pending().await
}
