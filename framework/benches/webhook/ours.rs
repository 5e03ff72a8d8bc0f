//! Our server: a [`Validator`] over ConfigMaps reading the shared informer cache, registered in
//! a [`Webhooks`] map and served by a [`Manager`] as an embedder serves it (no leader election,
//! its admin server on a loopback port for `/readyz`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use controller_manager::informer::Store;
use controller_manager::manager::{Manager, ManagerConfig};
use controller_manager::webhook::{
    Review, Validator, Verdict, WebhookInitializer, WebhookServing, Webhooks,
};
use k8s_openapi::api::core::v1::ConfigMap;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use crate::rule;

/// Refuses a ConfigMap whose range overlaps another's in the cache.
struct NoOverlap {
    configmaps: Store<ConfigMap>,
}

impl Validator<ConfigMap> for NoOverlap {
    async fn validate(&self, review: &Review<ConfigMap>) -> Verdict {
        let Some(cm) = &review.object else {
            return Verdict::allow();
        };
        let cached = self.configmaps.list();
        match rule::overlapping(cm, &review.name, cached.iter().map(|c| &**c)) {
            Some(other) => Verdict::deny(rule::message(&other)).with_code(422),
            None => Verdict::allow(),
        }
    }
}

/// Serves `/validate` on `addr` until stdin closes.
pub async fn serve(
    client: kube::Client,
    addr: SocketAddr,
    cert: PathBuf,
    key: PathBuf,
) -> anyhow::Result<()> {
    let webhooks = Webhooks::new().with(WebhookInitializer::validating::<ConfigMap, _, _, _>(
        "no-overlap",
        "/validate",
        |ctx| async move {
            Ok(NoOverlap {
                configmaps: ctx.factory.informer::<ConfigMap>().store(),
            })
        },
    ));
    let admin = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let mut config = ManagerConfig::new("webhook-bench");
    config.admin_addr = Some(admin);
    config.admin_tls = None;
    let serving = WebhookServing::from_files(addr, cert, key);
    let manager = Manager::new(config, client, ()).with_webhooks(webhooks, Some(serving));
    let stop = CancellationToken::new();
    let run = tokio::spawn(manager.run(stop.clone()));
    while !ready(admin).await {
        anyhow::ensure!(!run.is_finished(), "the manager stopped");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    crate::ready_until_stdin_closes().await;
    stop.cancel();
    run.await??;
    Ok(())
}

/// Whether the admin server answers 200 on `/readyz`.
async fn ready(admin: SocketAddr) -> bool {
    let Ok(mut tcp) = tokio::net::TcpStream::connect(admin).await else {
        return false;
    };
    let request = "GET /readyz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    let mut answer = String::new();
    tcp.write_all(request.as_bytes()).await.is_ok()
        && tcp.read_to_string(&mut answer).await.is_ok()
        && answer.starts_with("HTTP/1.1 200")
}
