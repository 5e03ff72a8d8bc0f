//! `label-copier`: the controllers of `embedding_examples::label_copier` as a process, over the
//! kinds `--kinds` names, with the framework's generic flags (`--kubeconfig`, `--leader-elect`,
//! `--secure-port`, `-v`, ...).
//!
//! ```text
//! label-copier --kinds=v1/Pod,apps/v1/ReplicaSet,example.com/v1/Widget --label=example.com/team \
//!     --selector='example.com/team,tier!=test'
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
    /// A label selector: only the objects it matches, of every kind in `--kinds`, are cached
    /// and copied from.
    #[arg(long)]
    selector: Option<String>,
    #[command(flatten)]
    generic: GenericOptions,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let (cli, name) = (Cli::parse(), label_copier::NAME);
    let mut errors = cli.generic.validate();
    let (initializers, cache) = label_copier::initializers(&cli.kinds, &cli.label)
        .and_then(|i| {
            Ok((
                i,
                label_copier::cache_options(&cli.kinds, cli.selector.as_deref())?,
            ))
        })
        .map_err(|e| errors.push(format!("--kinds: {e}")))
        .unwrap_or_default();
    anyhow::ensure!(errors.is_empty(), errors.join("\n"));
    let _logs = telemetry::init(name, &cli.generic.logging, &TelemetryOptions::default())?;
    let client = build_client(&cli.generic.client, name, None).await?;
    let mut config = ManagerConfig::from_options(name, &cli.generic);
    config.cache = cache;
    Manager::new(config, client, ())
        .with_initializers(initializers)
        .run(shutdown_on_signals())
        .await?;
    Ok(())
}
