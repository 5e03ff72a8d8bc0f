//! One manager replica for the benches: its own runtime, so shutting that runtime down is
//! `kill -9` (no drain, no Lease released), and a Lease scaled down to 2 s / 1.5 s / 0.2 s so a
//! takeover takes seconds.

use controller_manager::manager::{Initializer, Initializers, Manager, ManagerConfig};
use kube_testenv::TestEnv;

pub use controller_manager::testing::fast_leader_election as fast_lease;

/// Runs `controller` in a manager with `config` against `env`, on a one-thread runtime of its
/// own, returned so the caller can kill it.
pub fn spawn<C: Clone + Send + Sync + 'static>(
    env: &TestEnv,
    config: ManagerConfig,
    controller: Initializer<C>,
    extra: &C,
) -> tokio::runtime::Runtime {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let (kube_config, extra) = (env.config(), extra.clone());
    runtime.spawn(async move {
        let client = kube::Client::try_from(kube_config).expect("client");
        let manager = Manager::new(config, client, extra)
            .with_initializers(Initializers::new().with(controller));
        let _ = manager
            .run(tokio_util::sync::CancellationToken::new())
            .await;
    });
    runtime
}

/// Creates `objects` through `api`, 16 at a time; a failure ends the bench.
pub async fn create_all<K>(api: &kube::Api<K>, objects: impl IntoIterator<Item = K>)
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    use futures::StreamExt;
    futures::stream::iter(objects)
        .map(|object| async move {
            api.create(&kube::api::PostParams::default(), &object)
                .await
                .expect("create");
        })
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;
}
