//! `ready-labeler`: the minimal controller of `embedding_examples::ready_labeler` as a process,
//! with the framework's generic flags (`--kubeconfig`, `--leader-elect`, `--secure-port`, `-v`, ...).

use clap::Parser;
use controller_manager::client::build_client;
use controller_manager::manager::{Initializers, Manager, ManagerConfig, shutdown_on_signals};
use controller_manager::options::GenericOptions;
use controller_manager::telemetry::{self, TelemetryOptions};
use embedding_examples::ready_labeler;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    generic: GenericOptions,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let (cli, name) = (Cli::parse(), ready_labeler::NAME);
    let errors = cli.generic.validate();
    anyhow::ensure!(errors.is_empty(), errors.join("\n"));
    let _logs = telemetry::init(name, &cli.generic.logging, &TelemetryOptions::default())?;
    let client = build_client(&cli.generic.client, name, None).await?;
    let config = ManagerConfig::from_options(name, &cli.generic);
    Manager::new(config, client, ())
        .with_initializers(Initializers::new().with(ready_labeler::initializer()))
        .run(shutdown_on_signals())
        .await?;
    Ok(())
}
