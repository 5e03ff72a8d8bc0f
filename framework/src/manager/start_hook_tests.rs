//! [`Manager::with_start_hook`]: the hook runs before any initializer, and its failure aborts
//! start-up before any initializer runs.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use kube_testenv::TestEnv;
use tokio_util::sync::CancellationToken;

use super::{InitOutcome, Initializer, Initializers, Manager, ManagerConfig, ManagerError};

/// Records whether the hook ran and whether the initializer saw it run first.
#[derive(Default)]
struct Probe {
    hook_ran: AtomicBool,
    init_saw_hook: AtomicBool,
    init_ran: AtomicBool,
}

fn manager(env: &TestEnv, probe: Arc<Probe>) -> Manager<Arc<Probe>> {
    let init = Initializer::new("probe", |ctx: super::InitContext<Arc<Probe>>| async move {
        let probe = &ctx.extra;
        probe.init_ran.store(true, Ordering::SeqCst);
        let saw = probe.hook_ran.load(Ordering::SeqCst);
        probe.init_saw_hook.store(saw, Ordering::SeqCst);
        // Nothing to watch: stop the manager as soon as start-up got this far.
        ctx.shutdown.cancel();
        Ok(InitOutcome::NotStarted("probe only".into()))
    });
    Manager::new(ManagerConfig::new("hook-test"), env.client(), probe)
        .with_initializers(Initializers::new().with(init))
}

#[tokio::test]
async fn hook_runs_before_the_first_initializer() {
    let env = TestEnv::start().await.unwrap();
    let probe = Arc::new(Probe::default());
    let result = manager(&env, probe.clone())
        .with_start_hook(|extra: Arc<Arc<Probe>>, _client, _stop| async move {
            extra.hook_ran.store(true, Ordering::SeqCst);
            Ok(())
        })
        .run(CancellationToken::new())
        .await;
    assert!(result.is_ok(), "{result:?}");
    assert!(probe.init_ran.load(Ordering::SeqCst));
    assert!(probe.init_saw_hook.load(Ordering::SeqCst));
}

#[tokio::test]
async fn hook_failure_aborts_before_any_initializer() {
    let env = TestEnv::start().await.unwrap();
    let probe = Arc::new(Probe::default());
    let result = manager(&env, probe.clone())
        .with_start_hook(|_extra, _client, _stop| async { Err("cloud unreachable".into()) })
        .run(CancellationToken::new())
        .await;
    match result {
        Err(ManagerError::StartHook(e)) => assert_eq!(e.to_string(), "cloud unreachable"),
        other => panic!("expected StartHook error, got {other:?}"),
    }
    assert!(!probe.init_ran.load(Ordering::SeqCst));
}
