//! `label-copier`: the controllers of `embedding_examples::label_copier` as a process, over the
//! kinds `--kinds` names, with the framework's generic flags (`--kubeconfig`, `--leader-elect`,
//! `--secure-port`, `-v`, ...).
//!
//! ```text
//! label-copier --kinds=v1/Pod,apps/v1/ReplicaSet,example.com/v1/Widget --label=example.com/team
//! ```

use clap::Parser;
use controller_manager::client::build_client;
use controller_manager::manager::{Manager, ManagerConfig, shutdown_on_signals};
use controller_manager::options::GenericOptions;
use controller_manager::telemetry::{self, TelemetryOptions};
use embedding_examples::label_copier;

#[derive(Parser)]
struct Cli {
    /// The kinds whose objects' label is copied onto their owners, as `apiVersion/Kind`,
    /// comma-separated.
    #[arg(long, value_delimiter = ',', required = true)]
    kinds: Vec<String>,
    /// The label copied.
    #[arg(long, default_value = "example.com/team")]
    label: String,
    #[command(flatten)]
    generic: GenericOptions,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let (cli, name) = (Cli::parse(), label_copier::NAME);
    let mut errors = cli.generic.validate();
    let initializers = label_copier::initializers(&cli.kinds, &cli.label)
        .map_err(|e| errors.push(format!("--kinds: {e}")))
        .ok();
    anyhow::ensure!(errors.is_empty(), errors.join("\n"));
    let _logs = telemetry::init(name, &cli.generic.logging, &TelemetryOptions::default())?;
    let client = build_client(&cli.generic.client, name, None).await?;
    let config = ManagerConfig::from_options(name, &cli.generic);
    Manager::new(config, client, ())
        .with_initializers(initializers.unwrap_or_default())
        .run(shutdown_on_signals())
        .await?;
    Ok(())
}
