//! Upstream's webhook flags (`--webhooks`, `--webhook-*`), accepted with upstream's defaults.
//! Upstream serves cloud-provider webhooks only with the `CloudControllerManagerWebhook` gate
//! and a registered webhook; this build registers none, so `--webhook-secure-port=0` or no
//! webhooks mean "no webhook server", and a configuration that asks for one is a start-up error
//! naming what to change.

use std::net::IpAddr;
use std::path::PathBuf;

use clap::Args;
use controller_manager::options::FeatureGates;
use controller_manager::options::feature_gates::CLOUD_CONTROLLER_MANAGER_WEBHOOK;
use controller_manager::options::{EndHelpHeading, GoBoolArg};

/// Upstream's default `--webhook-secure-port`.
pub const DEFAULT_WEBHOOK_PORT: u16 = 10260;

/// Webhooks this build can serve (upstream's CCM registers none either).
const KNOWN_WEBHOOKS: &[&str] = &[];

/// The webhook flag group, as upstream's `WebhookOptions` and `WebhookServingOptions`.
#[derive(Args, Clone, Debug)]
#[command(next_help_heading = "Webhook serving flags", end_help_heading = true)]
pub struct WebhookOptions {
    /// Which webhooks run, with `--controllers`' syntax.
    #[arg(
        long,
        value_delimiter = ',',
        help_heading = "Webhook flags",
        help = "A list of webhooks to enable. '*' enables all on-by-default webhooks, 'foo' enables the webhook named 'foo', '-foo' disables the webhook named 'foo'.\nAll webhooks: \nDisabled-by-default webhooks: "
    )]
    pub webhooks: Vec<String>,

    /// Secure port to serve cloud provider webhooks. If 0, don't serve webhooks at all.
    #[arg(long, default_value_t = DEFAULT_WEBHOOK_PORT, verbatim_doc_comment)]
    pub webhook_secure_port: u16,

    /// The IP address on which to listen for the --webhook-secure-port port. The associated interface(s) must be reachable by the rest of the cluster, and by CLI/web clients. If set to an unspecified address (0.0.0.0 or ::), all interfaces will be used.
    #[arg(long, default_value = "0.0.0.0", verbatim_doc_comment)]
    pub webhook_bind_address: IpAddr,

    /// If true, HTTP2 serving will be disabled for the webhook server [default=false]
    #[arg(long, go_bool = false, verbatim_doc_comment)]
    pub webhook_disable_http2_serving: bool,

    /// The directory where the TLS certs are located. If --webhook-tls-cert-file and --webhook-tls-private-key-file are provided, this flag will be ignored.
    #[arg(long, verbatim_doc_comment)]
    pub webhook_cert_dir: Option<PathBuf>,

    /// File containing the default x509 Certificate for HTTPS. (CA cert, if any, concatenated after server cert). If HTTPS serving is enabled, and --webhook-tls-cert-file and --webhook-tls-private-key-file are not provided, a self-signed certificate and key are generated for the public address and saved to the directory specified by --webhook-cert-dir.
    #[arg(long, verbatim_doc_comment)]
    pub webhook_tls_cert_file: Option<PathBuf>,

    /// File containing the default x509 private key matching --webhook-tls-cert-file.
    #[arg(long, verbatim_doc_comment)]
    pub webhook_tls_private_key_file: Option<PathBuf>,

    /// Comma-separated list of cipher suites for the webhook server. If omitted, the default cipher suites will be used.
    #[arg(long, value_delimiter = ',', verbatim_doc_comment)]
    pub webhook_tls_cipher_suites: Vec<String>,

    /// Minimum TLS version supported for the webhook server. Possible values: VersionTLS10, VersionTLS11, VersionTLS12, VersionTLS13
    #[arg(long, verbatim_doc_comment)]
    pub webhook_tls_min_version: Option<String>,

    /// A pair of x509 certificate and private key file paths, optionally suffixed with a list of domain patterns which are fully qualified domain names, possibly with prefixed wildcard segments. For multiple key/certificate pairs, use the --webhook-tls-sni-cert-key multiple times. Examples: "example.crt,example.key" or "foo.crt,foo.key:*.foo.com,foo.com".
    #[arg(long, verbatim_doc_comment)]
    pub webhook_tls_sni_cert_key: Vec<String>,
}

impl WebhookOptions {
    /// Upstream's checks (known names; not the `--secure-port`), plus: a configuration that
    /// would start a webhook server is refused, since this build has no webhooks to serve.
    pub fn validate(&self, gates: &FeatureGates, secure_port: u16) -> Vec<String> {
        let mut errors: Vec<String> = self
            .webhooks
            .iter()
            .filter(|w| !w.is_empty() && w.as_str() != "*")
            .map(|w| w.strip_prefix('-').unwrap_or(w))
            .filter(|w| !KNOWN_WEBHOOKS.contains(w))
            .map(|w| format!("{w:?} is not in the list of known webhooks"))
            .collect();
        if self.webhook_secure_port != 0 && self.webhook_secure_port == secure_port {
            errors.push(format!(
                "--webhook-secure-port cannot be the same value as --secure-port ({secure_port})"
            ));
        }
        let asked = self
            .webhooks
            .iter()
            .any(|w| !w.is_empty() && !w.starts_with('-'));
        if errors.is_empty()
            && asked
            && self.webhook_secure_port != 0
            && gates.enabled(CLOUD_CONTROLLER_MANAGER_WEBHOOK)
        {
            errors.push(format!(
                "--feature-gates={CLOUD_CONTROLLER_MANAGER_WEBHOOK}=true with --webhooks={} asks for a webhook server on port {}, but this build has no webhooks to serve; remove --webhooks or set --webhook-secure-port=0",
                self.webhooks.join(","),
                self.webhook_secure_port
            ));
        }
        errors
    }
}

#[cfg(test)]
mod tests {
    use controller_manager::options::parse_group;

    use super::*;

    fn parse(args: &[&str]) -> WebhookOptions {
        parse_group(args).unwrap()
    }

    fn gates(on: bool) -> FeatureGates {
        let mut g = FeatureGates::default();
        g.set(CLOUD_CONTROLLER_MANAGER_WEBHOOK, on);
        g
    }

    #[test]
    fn defaults_are_upstreams_and_valid() {
        let o = parse(&[]);
        assert_eq!(o.webhook_secure_port, 10260);
        assert_eq!(o.webhook_bind_address.to_string(), "0.0.0.0");
        assert!(o.webhooks.is_empty());
        assert!(o.validate(&gates(true), 10258).is_empty());
    }

    #[test]
    fn unknown_webhooks_are_named() {
        let o = parse(&["--webhooks=*,-foo,bar"]);
        assert_eq!(
            o.validate(&gates(false), 10258),
            vec![
                "\"foo\" is not in the list of known webhooks",
                "\"bar\" is not in the list of known webhooks"
            ]
        );
    }

    #[test]
    fn a_webhook_server_this_build_cannot_serve_is_refused() {
        let o = parse(&["--webhooks=*"]);
        let errors = o.validate(&gates(true), 10258);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].contains("set --webhook-secure-port=0"),
            "{errors:?}"
        );
        // Gate off, or the port off: nothing would be served, as upstream.
        assert!(o.validate(&gates(false), 10258).is_empty());
        let off = parse(&["--webhooks=*", "--webhook-secure-port=0"]);
        assert!(off.validate(&gates(true), 10258).is_empty());
    }

    #[test]
    fn the_webhook_port_must_differ_from_the_secure_port() {
        let o = parse(&["--webhook-secure-port=10258"]);
        assert_eq!(
            o.validate(&gates(false), 10258),
            vec!["--webhook-secure-port cannot be the same value as --secure-port (10258)"]
        );
        assert!(o.validate(&gates(false), 0).is_empty());
    }
}
