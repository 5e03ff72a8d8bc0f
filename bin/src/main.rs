//! `cloud-controller-manager`: the stock cloud controllers over a provider picked with
//! `--cloud-provider`, with upstream flags, leader election, health and metrics.
//! `--dev` runs everything against an embedded API server and the fake cloud, no cluster needed.

mod cli;
mod dev;
mod heap_profile;

use std::process::ExitCode;
use std::sync::Arc;

use cloud_controllers::app::{CloudControllerManager, parse_args};
use controller_manager::manager::shutdown_on_signals;

use crate::cli::{Cli, NAME};

fn main() -> ExitCode {
    let mut cli: Cli = parse_args();
    if cli.dev.dev {
        cli.apply_dev_defaults();
    }
    let debugging = &mut cli.options.generic.debugging;
    debugging.heap_profiler = Some(Arc::new(heap_profile::JemallocHeap));
    let profiling = debugging.profiling;
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        // The stock binary is the fake cloud's binary: a distro registers its own providers and,
        // never depending on the fake-cloud crate, does not compile it.
        let ccm = CloudControllerManager::new(NAME, cli.options.clone())
            .provider(fake_cloud::PROVIDER_NAME, fake_cloud::factory);
        let mut errors = ccm.validate();
        errors.extend(cli.dev_conflicts());
        if !errors.is_empty() {
            for e in &errors {
                eprintln!("error: {e}");
            }
            eprintln!(
                "{} invalid flag value(s); nothing was started",
                errors.len()
            );
            return ExitCode::from(2);
        }
        heap_profile::keep_sampling(profiling).await;
        let shutdown = shutdown_on_signals();
        // Kept alive until the manager stops: dropping it stops the embedded API server.
        let (ccm, _dev) = if cli.dev.dev {
            match dev::start(&cli).await {
                Ok(env) => {
                    let ccm = ccm.with_cloud(env.cloud()).with_client_config(env.config());
                    let ccm = match cli.dev_admin_over_http() {
                        true => ccm.with_plain_http_admin(),
                        false => ccm,
                    };
                    (ccm, Some(env))
                }
                Err(e) => {
                    eprintln!("error: cannot start the --dev environment: {e:#}");
                    return ExitCode::FAILURE;
                }
            }
        } else {
            (ccm, None)
        };
        ccm.run_to_exit(shutdown).await
    })
}
