//! `cloud-controller-manager`: the stock cloud controllers over a provider picked with
//! `--cloud-provider`, with upstream flags, leader election, health and metrics.
//! `--dev` runs everything against an embedded API server and the fake cloud, no cluster needed.

mod cli;
mod dev;

use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use cloud_controllers::cloud::{
    CloudMetrics, CloudProvider, CloudProviderRegistry, InitializeContext, InstrumentedCloud,
};
use cloud_controllers::{CloudContext, cloud_initializers};
use controller_manager::client::{ClientMetrics, build_client, client_from_config};
use controller_manager::manager::{Manager, ManagerError, shutdown_on_signals};
use controller_manager::telemetry;
use parking_lot::Mutex;
use prometheus_client::registry::Registry;
use tracing::{error, info, warn};

use crate::cli::Cli;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let unsupported = controller_manager::options::reject_unsupported_flags(&args[1..]);
    if !unsupported.is_empty() {
        for e in &unsupported {
            eprintln!("error: {e}");
        }
        return ExitCode::from(2);
    }
    let cli = Cli::parse_from(&args);
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
    runtime.block_on(run(cli))
}

async fn run(mut cli: Cli) -> ExitCode {
    if cli.dev.dev {
        cli.apply_dev_defaults();
    }
    let providers = CloudProviderRegistry::with_builtin();
    let initializers = cloud_initializers();
    let errors = cli.validate(&initializers, &providers);
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

    let _telemetry = match telemetry::init(
        "cloud-controller-manager",
        &cli.generic.logging,
        &cli.telemetry,
    ) {
        Ok(guard) => guard,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };

    let shutdown = shutdown_on_signals();
    let dev_env = if cli.dev.dev {
        match dev::start(&cli).await {
            Ok(env) => Some(env),
            Err(e) => {
                error!("cannot start the --dev environment: {e:#}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        None
    };

    let registry = Arc::new(Mutex::new(Registry::default()));
    let client_metrics = ClientMetrics::new(&mut registry.lock());
    let opts = &cli.generic.client;
    let client = match &dev_env {
        Some(env) => client_from_config(
            env.config(),
            opts.kube_api_qps,
            opts.kube_api_burst,
            cli::NAME,
            Some(&client_metrics),
        ),
        None => build_client(opts, cli::NAME, Some(&client_metrics)).await,
    };
    let client = match client {
        Ok(c) => c,
        Err(e) => {
            error!("cannot build the API client: {e}");
            return ExitCode::FAILURE;
        }
    };

    let cloud = match &dev_env {
        Some(env) => env.cloud(),
        None => {
            match providers.init(&cli.cloud.cloud_provider, cli.cloud.cloud_config.as_deref()) {
                Ok(c) => c,
                Err(e) => {
                    error!("{e}");
                    return ExitCode::FAILURE;
                }
            }
        }
    };
    if !cloud.has_cluster_id() {
        if cli.cloud.allow_untagged_cloud {
            warn!(
                "detected a cluster without a ClusterID; a ClusterID will be required in the future"
            );
        } else {
            error!(
                "no ClusterID found; a ClusterID is required for the cloud provider to function properly. \
                 This check can be bypassed by setting --allow-untagged-cloud=true"
            );
            return ExitCode::FAILURE;
        }
    }

    let cloud_metrics = CloudMetrics::new(&mut registry.lock());
    let cloud: Arc<dyn CloudProvider> =
        Arc::new(InstrumentedCloud::new(cloud, Some(cloud_metrics)));
    let cloud_for_init = cloud.clone();
    let client_for_init = client.clone();
    let config = cli.manager_config();
    let manager = Manager::new(config, client, CloudContext::new(cloud, cli.cloud.clone()))
        .with_registry(registry)
        .with_initializers(initializers)
        .on_leading({
            // As upstream: the provider is initialized once leadership is won, before any
            // controller starts, and its background work ends with leadership.
            let cloud = cloud_for_init;
            let client = client_for_init;
            move |shutdown| {
                let cloud = cloud.clone();
                let ctx = InitializeContext {
                    client: client.clone(),
                    shutdown,
                };
                async move {
                    cloud
                        .initialize(ctx)
                        .await
                        .map_err(|e| format!("cloud provider failed to initialize: {e}").into())
                }
            }
        });
    info!(provider = %cli.cloud.cloud_provider, "starting cloud-controller-manager");
    match manager.run(shutdown).await {
        Ok(()) => {
            info!("stopped");
            ExitCode::SUCCESS
        }
        Err(ManagerError::Leader(e)) => {
            error!("leaderelection lost: {e}");
            ExitCode::FAILURE
        }
        Err(e) => {
            error!("{e}");
            ExitCode::FAILURE
        }
    }
}
