//! Embedding the controller manager in your own binary; see `docs/embedding.md`.
//!
//! - `metal-ccm` (`src/bin/metal-ccm.rs`): a bare-metal distro's cloud-controller-manager: the
//!   stock cloud controllers, its own provider ([`static_inventory`]) and its own controller
//!   ([`node_inventory`]) on one shared cache and one flag set, and a CRD controller
//!   ([`address_pool`]) whose `AddressPool` resources the provider's load balancers allocate from,
//!   with its webhooks; `--dev` ([`metal_dev`]) runs it all on the embedded API server.
//! - `ready-labeler` (`src/bin/ready-labeler.rs`, [`ready_labeler`]): a minimal controller on the
//!   framework alone, wired with the controller builder.
//! - `label-copier` (`src/bin/label-copier.rs`, [`label_copier`]): controllers over kinds named
//!   at run time (`--kinds`), caching only their metadata, copying a label onto each object's
//!   owner.

pub mod address_pool;
pub mod ip_balancer;
pub mod label_copier;
pub mod metal_dev;
pub mod node_inventory;
pub mod ready_labeler;
pub mod static_inventory;
