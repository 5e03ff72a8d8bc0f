//! The warm order of a manager: every selected controller registers and the caches sync before
//! any campaign; sharded controllers then start on every replica, and the rest start from the
//! warm cache on winning the Lease (or at once without leader election).

use std::collections::BTreeSet;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;
use tracing::info;

use super::phases::Registered;
use super::run::{Manager, ManagerError, WARM_STANDBY_CHECK};
use super::selection::ControllerSelection;
use crate::leader::LeaderElectionConfig;

impl<C: Send + Sync + 'static> Manager<C> {
    /// Warm standby and sharded controllers: registration and cache sync first, before any
    /// campaign. Then the sharded controllers start at once (after the start hook), each in its
    /// ring, and the others start from the synced cache (no new LIST) on winning the Lease, or
    /// at once without leader election. Everything runs under `stop`, a child of `shutdown`
    /// cancelled when leading ends, so a lost Lease stops the whole manager as in the cold path.
    pub(super) async fn run_warm(
        self: Arc<Self>,
        selection: ControllerSelection,
        sharded: BTreeSet<String>,
        cfg: Option<LeaderElectionConfig>,
        shutdown: CancellationToken,
    ) -> Result<(), ManagerError> {
        let stop = shutdown.child_token();
        let _stop_on_return = stop.clone().drop_guard();
        let registered = self.register(&selection, &sharded, &stop).await?;
        if !self.sync_caches(&registered.factory, &stop).await? {
            return Ok(());
        }
        let (sharded, leading) = registered.split();
        let hook_ran = !sharded.is_empty();
        if hook_ran {
            // Sharded controllers act on every replica, so every replica prepares for them.
            self.run_start_hook(&stop).await?;
        }
        let sharded_run = async {
            let r = self.start_workers(sharded, &stop, || false).await;
            stop.cancel();
            r
        };
        let leading_run = async {
            let r = match cfg {
                _ if leading.is_empty() => {
                    stop.cancelled().await;
                    Ok(())
                }
                None => self.start_workers(leading, &stop, || false).await,
                Some(cfg) => self.clone().lead_warm(leading, cfg, &stop, hook_ran).await,
            };
            stop.cancel();
            r
        };
        let (sharded, leading) = tokio::join!(sharded_run, leading_run);
        leading.and(sharded)
    }

    /// The Lease part of [`Self::run_warm`]: campaigns with `leading` registered and synced; on
    /// winning, runs the start hook (unless it ran already) and the workers.
    async fn lead_warm(
        self: Arc<Self>,
        leading: Registered,
        cfg: LeaderElectionConfig,
        stop: &CancellationToken,
        hook_ran: bool,
    ) -> Result<(), ManagerError> {
        let elector = self.elector(cfg)?;
        let status = elector.status();
        info!("warm standby: caches synced, not leading");
        self.ready.add_check(WARM_STANDBY_CHECK, || Ok(()));

        let outcome = Arc::new(Mutex::new(Ok(())));
        let slot = outcome.clone();
        let me = self.clone();
        let stop = stop.clone();
        let stop_leading = stop.clone();
        let led = elector
            .run(stop.clone(), move |leading_token| {
                Box::pin(async move {
                    me.ready.remove_check(WARM_STANDBY_CHECK);
                    let r = async {
                        if !hook_ran {
                            tokio::select! {
                                biased;
                                () = leading_token.cancelled() => return Ok(()),
                                r = me.run_start_hook(&stop) => r?,
                            }
                        }
                        let lost = move || !status.is_leader();
                        let run = me.start_workers(leading, &stop, lost);
                        tokio::pin!(run);
                        tokio::select! {
                            r = &mut run => r,
                            () = leading_token.cancelled() => {
                                stop.cancel();
                                run.await
                            }
                        }
                    }
                    .await;
                    *slot.lock() = r;
                    // As in the cold path: nothing is left to lead once the controllers ended.
                    stop_leading.cancel();
                })
            })
            .await;
        let ran = std::mem::replace(&mut *outcome.lock(), Ok(()));
        led.map_err(ManagerError::from).and(ran)
    }
}
