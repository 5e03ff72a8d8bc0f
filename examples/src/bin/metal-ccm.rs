//! `metal-ccm`: a bare-metal distro's cloud-controller-manager. The stock cloud controllers, the
//! `static-inventory` provider and the distro's own controllers (`node-inventory`, and
//! `address-pool`, which hands LoadBalancer addresses out of `AddressPool` resources) share one
//! client, one informer cache, one metrics registry and one flag set. Its webhooks (the
//! `AddressPool` defaults, overlap check and `v1alpha1` ⇄ `v1` conversion) are selected with
//! `--webhooks` and served on every replica.
//!
//! ```text
//! metal-ccm --cloud-provider=static-inventory --cloud-config=inventory.yaml \
//!           --controllers=*,-route,node-inventory,address-pool --kubeconfig=...
//! metal-ccm --dev   # all of it on an embedded API server, no cluster needed
//! ```

use std::process::ExitCode;

use clap::Parser;
use cloud_controllers::app::{self, CloudControllerManager, CloudManagerOptions};
use controller_manager::manager::shutdown_on_signals;
use embedding_examples::address_pool::{self, AddressPools};
use embedding_examples::metal_dev::{self, DevOptions};
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
    #[command(flatten)]
    dev: DevOptions,
}

#[tokio::main]
async fn main() -> ExitCode {
    let mut cli: Cli = app::parse_args();
    let conflicts = cli.dev.conflicts(&cli.ccm);
    if !conflicts.is_empty() {
        for e in &conflicts {
            eprintln!("error: {e}");
        }
        return ExitCode::from(2);
    }
    // Kept alive until the manager stops: dropping it stops the embedded API server.
    let dev = match cli.dev.dev {
        true => match metal_dev::start(&cli.dev, &mut cli.ccm).await {
            Ok(env) => Some(env),
            Err(e) => {
                eprintln!("error: cannot start the --dev environment: {e:#}");
                return ExitCode::FAILURE;
            }
        },
        false => None,
    };
    let pools = AddressPools::default();
    let mut ccm = CloudControllerManager::new("metal-ccm", cli.ccm)
        .controller(node_inventory::initializer(cli.node_inventory))
        .controller(address_pool::initializer(pools.clone()))
        .provider(static_inventory::NAME, StaticInventory::factory_with(pools));
    for webhook in address_pool::webhooks().iter() {
        ccm = ccm.webhook(webhook.clone());
    }
    if let Some(env) = &dev {
        ccm = ccm.with_client_config(env.config());
    }
    ccm.run_to_exit(shutdown_on_signals()).await
}
