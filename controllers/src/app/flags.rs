//! [`CloudManagerOptions`]: every flag of a cloud-controller-manager, parsed and validated as one set.

use clap::{Args, Parser};
use controller_manager::manager::{ControllerSelection, Initializers};
use controller_manager::options::GenericOptions;
use controller_manager::telemetry::TelemetryOptions;

use super::args::try_parse_args_from;
use crate::CloudContext;
use crate::compat_options::CloudCompatOptions;
use crate::options::CloudOptions;
use crate::webhooks::WebhookOptions;
use controller_manager::webhook::Webhooks;

/// Every flag of a cloud-controller-manager, grouped as upstream; flatten it into a distro's
/// own `clap::Parser` next to the distro's flags so there is one flag set.
#[derive(Args, Clone, Debug)]
pub struct CloudManagerOptions {
    /// Provider and cloud controller flags.
    #[command(flatten)]
    pub cloud: CloudOptions,
    /// Controllers, API client, leader election, serving and log flags.
    #[command(flatten)]
    pub generic: GenericOptions,
    /// OTLP trace export flags.
    #[command(flatten)]
    pub telemetry: TelemetryOptions,
    /// Webhook flags (no stock webhook; a distro adds its own).
    #[command(flatten)]
    pub webhooks: WebhookOptions,
    /// Cloud flags kept for manifest compatibility.
    #[command(flatten)]
    pub cloud_compat: CloudCompatOptions,
}

/// The flag set alone, so [`CloudManagerOptions::from_args`] can parse it.
#[derive(Parser)]
#[command(name = "cloud-controller-manager")]
struct OptionsOnly {
    #[command(flatten)]
    options: CloudManagerOptions,
}

impl CloudManagerOptions {
    /// Parses flags without a program name, with the rules of [`parse_args`](super::parse_args), e.g.
    /// `from_args(["--cloud-provider=fake", "--leader-elect=false"])`: options for tests and for
    /// programs that build their arguments themselves.
    pub fn from_args<I, S>(args: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let argv = std::iter::once("cloud-controller-manager".to_string())
            .chain(args.into_iter().map(Into::into));
        try_parse_args_from::<OptionsOnly>(argv).map(|o| o.options)
    }

    /// Every flag problem at once, including `--controllers` names `initializers` does not know,
    /// `--webhooks` names `webhooks` does not know, and clashes in either map; empty means
    /// valid.
    pub fn validate(
        &self,
        initializers: &Initializers<CloudContext>,
        webhooks: &Webhooks<CloudContext>,
    ) -> Vec<String> {
        let mut errors = self.cloud.validate();
        errors.extend(self.generic.validate());
        errors.extend(self.telemetry.validate());
        let gates = self.generic.feature_gates().unwrap_or_default();
        errors.extend(
            self.webhooks
                .validate(&gates, self.generic.serving.secure_port, webhooks),
        );
        if let Err(e) = initializers.check() {
            errors.push(e.to_string());
        }
        if let Err(e) = ControllerSelection::parse(&self.generic.controllers, &initializers.known())
        {
            errors.push(e.to_string());
        }
        errors
    }
}
