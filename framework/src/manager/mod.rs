//! Runs the selected controllers: which controllers are enabled (`--controllers`), in what order they
//! start, and how they shut down.

mod selection;
pub use selection::*;
