//! What the manager hands the task that runs one controller: its health (the
//! `/healthz/<controller>` check) and the signal to drop in-flight work.
//!
//! The scope is a tokio task-local set by the manager around the controller's `run` future, so
//! the framework's building blocks running inside that future — [`Controller::run`]'s workers and
//! [`Periodic::run`] — report to it and obey it without any initializer passing it along.
//! Outside a manager (a unit test, an embedder's own task) there is no scope: panics are still
//! caught, logged and counted, and in-flight work is only dropped with its future.
//!
//! [`Controller::run`]: super::Controller::run
//! [`Periodic::run`]: super::Periodic::run

use std::future::Future;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

tokio::task_local! {
    static SCOPE: ControllerScope;
}

/// How a controller is doing, as far as its health check is concerned.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Health {
    /// Running normally.
    Running,
    /// Its last periodic run panicked; cleared by the next run that completes.
    LastRunPanicked(String),
    /// Its task is gone while the manager still runs; permanent.
    Exited(String),
}

struct Inner {
    name: String,
    health: Mutex<Health>,
    abandon: CancellationToken,
}

/// One running controller's link to its manager; cheap to clone.
#[derive(Clone)]
pub struct ControllerScope {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ControllerScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerScope")
            .field("name", &self.inner.name)
            .field("health", &*self.inner.health.lock())
            .finish_non_exhaustive()
    }
}

impl ControllerScope {
    /// A healthy scope for `name`; `abandon` is the token the manager cancels to drop in-flight
    /// work.
    pub(crate) fn new(name: &str, abandon: CancellationToken) -> Self {
        Self {
            inner: Arc::new(Inner {
                name: name.to_owned(),
                health: Mutex::new(Health::Running),
                abandon,
            }),
        }
    }

    /// The scope of the controller whose task is running this code, if any.
    pub fn current() -> Option<Self> {
        SCOPE.try_with(Clone::clone).ok()
    }

    /// Runs `future` with this scope as [`Self::current`]: a task a controller spawns (a loop of
    /// its own) re-enters its scope with this, so its panics and health count as the
    /// controller's.
    pub fn scope<F: Future>(self, future: F) -> impl Future<Output = F::Output> {
        SCOPE.scope(self, future)
    }

    /// The controller's canonical name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The health check: `Err(reason)` while the last periodic run panicked or after the task
    /// ended.
    pub fn check(&self) -> Result<(), String> {
        match &*self.inner.health.lock() {
            Health::Running => Ok(()),
            Health::LastRunPanicked(message) => Err(format!(
                "controller {}: its last periodic run panicked: {message}",
                self.inner.name
            )),
            Health::Exited(reason) => Err(format!("controller {} {reason}", self.inner.name)),
        }
    }

    /// Cancelled when the manager abandons in-flight work: leadership was lost, or the graceful
    /// shutdown deadline passed. Work in progress must be dropped, not finished.
    pub fn abandoned(&self) -> &CancellationToken {
        &self.inner.abandon
    }

    /// A periodic run panicked (the reconcile metrics counted it): the health check fails until a
    /// run completes.
    pub(crate) fn run_panicked(&self, message: &str) {
        let mut health = self.inner.health.lock();
        if !matches!(*health, Health::Exited(_)) {
            *health = Health::LastRunPanicked(message.to_owned());
        }
    }

    /// A periodic run completed: clears an earlier panic.
    pub(crate) fn run_completed(&self) {
        let mut health = self.inner.health.lock();
        if matches!(*health, Health::LastRunPanicked(_)) {
            *health = Health::Running;
        }
    }

    /// The controller's task ended (`reason` says how); the health check fails from now on.
    pub(crate) fn exited(&self, reason: &str) {
        *self.inner.health.lock() = Health::Exited(reason.to_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn health_follows_runs_and_exit_is_final() {
        let scope = ControllerScope::new("c", CancellationToken::new());
        assert_eq!(scope.check(), Ok(()));
        assert!(ControllerScope::current().is_none());
        let inner = scope.clone();
        scope
            .clone()
            .scope(async move {
                let current = ControllerScope::current().unwrap();
                assert_eq!(current.name(), "c");
                current.run_panicked("boom");
            })
            .await;
        assert_eq!(
            inner.check(),
            Err("controller c: its last periodic run panicked: boom".into())
        );
        scope.run_completed();
        assert_eq!(scope.check(), Ok(()));
        scope.exited("ended while the manager was running");
        scope.run_completed();
        assert_eq!(
            scope.check(),
            Err("controller c ended while the manager was running".into())
        );
    }
}
