//! Owns [`ManagerProcess`]: a manager binary (`env!("CARGO_BIN_EXE_<name>")`) started as a child
//! process against kube-testenv, as operators start it, whose exit ends every wait at once and
//! whose output every failure shows.

use std::ffi::OsStr;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use kube_testenv::TestEnv;
use tokio::process::{Child, Command};

use super::DEFAULT_TIMEOUT;
use super::exit::ManagerExit;
use super::wait::{Logs, StopOutcome, Supervised, WaitError, supervised_waits};

/// A manager binary running as a child process with `--kubeconfig` pointing at a kube-testenv,
/// its stdout and stderr in a log file. Killed on drop; its scratch directory (kubeconfig, log)
/// is removed then.
pub struct ManagerProcess {
    child: Child,
    dir: PathBuf,
    log: PathBuf,
    exit: Option<ManagerExit>,
    timeout: Duration,
}

impl fmt::Debug for ManagerProcess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManagerProcess")
            .field("pid", &self.child.id())
            .field("dir", &self.dir)
            .field("exit", &self.exit)
            .finish_non_exhaustive()
    }
}

impl ManagerProcess {
    /// Starts `exe --kubeconfig=<a kubeconfig for env> args..`.
    pub fn start<S: AsRef<OsStr>>(
        exe: impl AsRef<Path>,
        env: &TestEnv,
        args: impl IntoIterator<Item = S>,
    ) -> std::io::Result<Self> {
        static STARTED: AtomicU64 = AtomicU64::new(0);
        let exe = exe.as_ref();
        let stem = exe.file_name().unwrap_or(exe.as_os_str()).to_string_lossy();
        let n = STARTED.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("{stem}-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let kubeconfig = dir.join("kubeconfig");
        env.write_kubeconfig(&kubeconfig)?;
        let log = dir.join("manager.log");
        let out = std::fs::File::create(&log)?;
        let child = Command::new(exe)
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .args(args)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .kill_on_drop(true)
            .spawn()?;
        Ok(ManagerProcess {
            child,
            dir,
            log,
            exit: None,
            timeout: DEFAULT_TIMEOUT,
        })
    }

    /// How long each wait and the stop may take (default [`DEFAULT_TIMEOUT`]).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Its stdout and stderr so far.
    pub fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Kills it with SIGKILL, as `kill -9` does (no drain, no Lease released), and waits until
    /// it is gone.
    pub async fn kill(mut self) -> ManagerExit {
        if let Err(error) = self.child.start_kill() {
            tracing::warn!(%error, "cannot SIGKILL the manager; waiting for the exit anyway");
        }
        self.exited().await
    }

    /// Sends SIGTERM and waits for exit status 0 (drained controllers, released Lease).
    pub async fn stop(mut self) -> Result<(), WaitError> {
        if self.exit.is_none()
            && let Some(pid) = self.child.id()
        {
            // tokio can only SIGKILL; `kill` is on every Unix this runs on.
            let sent = std::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status();
            if let Err(error) = sent {
                tracing::warn!(%error, "cannot run kill -TERM; waiting for the exit anyway");
            }
        }
        let timeout = self.timeout;
        let exit = match tokio::time::timeout(timeout, self.exited()).await {
            Ok(exit) => exit,
            Err(_) => {
                return Err(WaitError::Stop {
                    exit: StopOutcome::StillRunning(timeout),
                    logs: self.logs(),
                });
            }
        };
        match exit.is_clean() {
            true => Ok(()),
            false => Err(WaitError::Stop {
                exit: StopOutcome::Exited(exit),
                logs: self.logs(),
            }),
        }
    }
}

impl Supervised for ManagerProcess {
    async fn exited(&mut self) -> ManagerExit {
        if let Some(exit) = &self.exit {
            return exit.clone();
        }
        let exit = match self.child.wait().await {
            Ok(status) => ManagerExit::Process(status),
            Err(error) => ManagerExit::Failed(std::sync::Arc::new(error)),
        };
        self.exit = Some(exit.clone());
        exit
    }

    fn logs(&self) -> Logs {
        Logs(self.output())
    }

    fn timeout(&self) -> Duration {
        self.timeout
    }
}

impl Drop for ManagerProcess {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

supervised_waits!(ManagerProcess);
