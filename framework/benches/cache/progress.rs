//! Counts reconciles across every controller of a scenario and wakes the scenario when a target
//! is reached, so "first pass done" is awaited rather than polled.

use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Notify;

/// Shared by every reconcile of a scenario.
pub struct Progress {
    done: AtomicUsize,
    target: AtomicUsize,
    reached: Notify,
}

impl Default for Progress {
    fn default() -> Self {
        Self {
            done: AtomicUsize::new(0),
            target: AtomicUsize::new(usize::MAX),
            reached: Notify::new(),
        }
    }
}

impl Progress {
    /// Records one reconcile.
    pub fn reconciled(&self) {
        let done = self.done.fetch_add(1, Ordering::AcqRel) + 1;
        if done >= self.target.load(Ordering::Acquire) {
            self.reached.notify_waiters();
        }
    }

    /// Sets how many reconciles count as done.
    pub fn set_target(&self, target: usize) {
        self.target.store(target, Ordering::Release);
    }

    /// Waits until the target is reached.
    pub async fn wait(&self) {
        loop {
            let notified = self.reached.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.done.load(Ordering::Acquire) >= self.target.load(Ordering::Acquire) {
                return;
            }
            if tokio::time::timeout(std::time::Duration::from_secs(10), notified)
                .await
                .is_err()
            {
                tracing::warn!(
                    done = self.done.load(Ordering::Acquire),
                    target = self.target.load(Ordering::Acquire),
                    "still waiting for reconciles"
                );
            }
        }
    }
}
