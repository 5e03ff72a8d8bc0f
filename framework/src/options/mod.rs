//! Command-line options shared by every controller manager built on this framework.
//!
//! Flags keep kube-controller-manager's names and defaults so manifests carry over. They parse into
//! plain structs (clap derive, flattenable into an embedder's own parser); `validate()` collects
//! every error so the operator sees all of them at once, before anything is built.

mod allow_paths;
mod clap_support;
mod compat;
mod debugging;
mod duration;
pub mod feature_gates;
mod generic;
mod serving;

pub use allow_paths::AllowPaths;
pub use clap_support::{EndHelpHeading, GoBoolArg, group_command, parse_group};
pub use compat::CompatOptions;
pub use debugging::DebuggingOptions;
pub use duration::{DurationParseError, GoDuration};
pub use feature_gates::{FeatureGates, KNOWN_FEATURES};
pub use generic::{
    ClientOptions, GenericOptions, LeaderElectionOptions, LogFormat, LoggingOptions,
};
pub(crate) use serving::non_empty;
pub use serving::{AuthenticationOptions, AuthorizationOptions, ServingOptions};
