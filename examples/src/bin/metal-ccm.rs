//! `metal-ccm`: a bare-metal distro's cloud-controller-manager. The stock cloud controllers, the
//! `static-inventory` provider and the distro's own `node-inventory` controller share one
//! client, one informer cache, one metrics registry and one flag set.
//!
//! ```text
//! metal-ccm --cloud-provider=static-inventory --cloud-config=inventory.yaml \
//!           --controllers=*,-route,node-inventory --kubeconfig=...
//! ```

use std::process::ExitCode;

use clap::Parser;
use cloud_controllers::app::{self, CloudControllerManager, CloudManagerOptions};
use controller_manager::manager::shutdown_on_signals;
use embedding_examples::node_inventory::{self, NodeInventoryOptions};
use embedding_examples::static_inventory::{self, StaticInventory};

/// Every stock flag plus the distro's own.
#[derive(Parser)]
#[command(
    name = "metal-ccm",
    version,
    about = "Cloud controllers for bare-metal clusters."
)]
struct Cli {
    #[command(flatten)]
    ccm: CloudManagerOptions,
    #[command(flatten)]
    node_inventory: NodeInventoryOptions,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli: Cli = app::parse_args();
    let ccm = CloudControllerManager::new("metal-ccm", cli.ccm)
        .controller(node_inventory::initializer(cli.node_inventory))
        .provider(static_inventory::NAME, StaticInventory::factory);
    match ccm {
        Ok(ccm) => ccm.run_to_exit(shutdown_on_signals()).await,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
