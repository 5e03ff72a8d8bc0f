//! One process-wide shutdown token driven by SIGINT/SIGTERM, instead of a signal handler per
//! controller (kube-runtime's `shutdown_on_signal` per controller fights over signals).

use tokio_util::sync::CancellationToken;
use tracing::warn;

/// A token cancelled on the first SIGINT or SIGTERM; a second signal exits at once with status 1.
pub fn shutdown_on_signals() -> CancellationToken {
    let token = CancellationToken::new();
    let cancel = token.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        warn!("received shutdown signal; stopping (send again to exit immediately)");
        cancel.cancel();
        wait_for_signal().await;
        warn!("received second shutdown signal; exiting");
        std::process::exit(1);
    });
    token
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
