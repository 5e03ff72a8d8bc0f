//! Owns [`ManagerTask`]: a [`Manager`] (or any manager's run future, such as a
//! `CloudControllerManager`'s) spawned in the test's runtime, whose exit ends every wait at once.

use std::error::Error;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::DEFAULT_TIMEOUT;
use super::exit::ManagerExit;
use super::wait::{Logs, StopOutcome, Supervised, WaitError, supervised_waits};
use crate::manager::Manager;
use crate::panic_guard::Panicked;

type RunResult = Result<(), Arc<dyn Error + Send + Sync + 'static>>;

/// A manager running in-process on its own task. Its error is never held unseen: each wait
/// ([`wait_for`](Self::wait_for), [`until`](Self::until)) fails with it as soon as the task
/// ends, and [`stop`](Self::stop) returns it. Dropping the handle stops the manager.
pub struct ManagerTask {
    stop: CancellationToken,
    task: Option<JoinHandle<RunResult>>,
    exit: Option<ManagerExit>,
    timeout: Duration,
}

impl fmt::Debug for ManagerTask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManagerTask")
            .field("exit", &self.exit)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl ManagerTask {
    /// Spawns [`Manager::run`] on the current Tokio runtime (a `#[tokio::test]`'s).
    pub fn start<C: Send + Sync + 'static>(manager: Manager<C>) -> Self {
        Self::spawn(|stop| manager.run(stop))
    }

    /// Spawns the run future `run` makes from the stop token, e.g.
    /// `|stop| CloudControllerManager::new(..).with_client_config(env.config()).run(stop)`.
    pub fn spawn<F, Fut, E>(run: F) -> Self
    where
        F: FnOnce(CancellationToken) -> Fut,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Error + Send + Sync + 'static,
    {
        let stop = CancellationToken::new();
        let running = run(stop.clone());
        let task = tokio::spawn(async move {
            running
                .await
                .map_err(|e| Arc::new(e) as Arc<dyn Error + Send + Sync>)
        });
        ManagerTask {
            stop,
            task: Some(task),
            exit: None,
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// How long each wait and the stop may take (default [`DEFAULT_TIMEOUT`]).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The manager's stop token, e.g. to stop it from elsewhere in the test.
    pub fn stop_token(&self) -> CancellationToken {
        self.stop.clone()
    }

    /// Waits for the manager to end on its own (e.g. a start-up error) and says how it did;
    /// `Err` if it still runs after the timeout.
    pub async fn exit(&mut self) -> Result<ManagerExit, WaitError> {
        let timeout = self.timeout;
        match tokio::time::timeout(timeout, self.exited()).await {
            Ok(exit) => Ok(exit),
            Err(_) => Err(WaitError::Stop {
                exit: StopOutcome::StillRunning(timeout),
                logs: Logs::default(),
            }),
        }
    }

    /// Cancels the stop token and waits for the manager to return `Ok` (drained controllers,
    /// released Lease); any other end, or none within the timeout, is the error.
    pub async fn stop(mut self) -> Result<(), WaitError> {
        self.stop.cancel();
        let exit = self.exit().await?;
        match exit.is_clean() {
            true => Ok(()),
            false => Err(WaitError::Stop {
                exit: StopOutcome::Exited(exit),
                logs: Logs::default(),
            }),
        }
    }
}

impl Supervised for ManagerTask {
    async fn exited(&mut self) -> ManagerExit {
        if let Some(exit) = &self.exit {
            return exit.clone();
        }
        let exit = match self.task.as_mut() {
            Some(task) => match task.await {
                Ok(Ok(())) => ManagerExit::Returned,
                Ok(Err(error)) => ManagerExit::Failed(error),
                Err(join) => ManagerExit::Panicked(panic_message(join)),
            },
            None => ManagerExit::Returned,
        };
        self.task = None;
        self.exit = Some(exit.clone());
        exit
    }

    fn logs(&self) -> Logs {
        Logs::default()
    }

    fn timeout(&self) -> Duration {
        self.timeout
    }
}

fn panic_message(join: tokio::task::JoinError) -> String {
    match join.try_into_panic() {
        Ok(payload) => Panicked::from_payload(payload.as_ref()).message,
        Err(join) => join.to_string(),
    }
}

impl Drop for ManagerTask {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

supervised_waits!(ManagerTask);
