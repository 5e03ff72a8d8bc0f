//! The secure-port flag groups, with k8s.io/apiserver's names, defaults and help: secure serving
//! (`--secure-port`, `--tls-*`, listener options), delegated authentication (`--authentication-*`,
//! `--client-ca-file`, `--requestheader-*`) and delegated authorization (`--authorization-*`).
//!
//! They only parse and validate here (the TLS values by [`TlsSettings`] of the serving layer, the
//! always-allowed paths by [`AllowPaths`]); [`crate::manager::ManagerConfig::from_options`] turns
//! them into the admin server's settings, and the admin server does the work.

use std::net::IpAddr;
use std::path::PathBuf;

use super::{EndHelpHeading, GoBoolArg};
use clap::{ArgAction, Args};

use super::{AllowPaths, GoDuration};
use crate::serving::TlsSettings;

/// Where and how `/healthz`, `/metrics`, `/configz` are served, and who may read them.
#[derive(Args, Clone, Debug)]
#[command(next_help_heading = "Secure serving flags", end_help_heading = true)]
pub struct ServingOptions {
    /// The port on which to serve HTTPS with authentication and authorization. If 0, don't serve HTTPS at all.
    #[arg(long, default_value_t = 10258, verbatim_doc_comment)]
    pub secure_port: u16,

    /// The IP address on which to listen for the --secure-port port. The associated interface(s) must be reachable by the rest of the cluster, and by CLI/web clients. If blank or an unspecified address (0.0.0.0 or ::), all interfaces will be used.
    #[arg(long, default_value = "0.0.0.0", verbatim_doc_comment)]
    pub bind_address: IpAddr,

    /// The directory where the TLS certs are located. If --tls-cert-file and --tls-private-key-file are provided, this flag will be ignored.
    #[arg(long, verbatim_doc_comment)]
    pub cert_dir: Option<PathBuf>,

    /// File containing the default x509 Certificate for HTTPS. (CA cert, if any, concatenated after server cert). If HTTPS serving is enabled, and --tls-cert-file and --tls-private-key-file are not provided, a self-signed certificate and key are generated for the public address and saved to the directory specified by --cert-dir.
    #[arg(long, verbatim_doc_comment)]
    pub tls_cert_file: Option<PathBuf>,

    /// File containing the default x509 private key matching --tls-cert-file.
    #[arg(long, verbatim_doc_comment)]
    pub tls_private_key_file: Option<PathBuf>,

    /// Comma-separated list of cipher suites for the server. If omitted, the default cipher suites will be used. Values this build's TLS library (rustls) offers: TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256 (TLS 1.3 suites TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384, TLS_CHACHA20_POLY1305_SHA256 are always enabled). Other Go names are refused at start.
    #[arg(long, value_delimiter = ',', verbatim_doc_comment)]
    pub tls_cipher_suites: Vec<String>,

    /// Minimum TLS version supported. Possible values: VersionTLS12, VersionTLS13 (VersionTLS10 and VersionTLS11 are refused: rustls speaks TLS 1.2 and 1.3 only).
    #[arg(long, verbatim_doc_comment)]
    pub tls_min_version: Option<String>,

    /// A pair of x509 certificate and private key file paths, optionally suffixed with a list of domain patterns which are fully qualified domain names, possibly with prefixed wildcard segments. The domain patterns also allow IP addresses, but IPs should only be used if the apiserver has visibility to the IP address requested by a client. If no domain patterns are provided, the names of the certificate are extracted. Non-wildcard matches trump over wildcard matches, explicit domain patterns trump over extracted names. For multiple key/certificate pairs, use the --tls-sni-cert-key multiple times. Examples: "example.crt,example.key" or "foo.crt,foo.key:*.foo.com,foo.com".
    #[arg(long, action = ArgAction::Append, verbatim_doc_comment)]
    pub tls_sni_cert_key: Vec<String>,

    /// Comma-separated list of elliptic curves for key exchange, by Go name or number. Values this build offers: X25519 (29), CurveP256 (23), CurveP384 (24). CurveP521 and X25519MLKEM768 are refused at start. If omitted, the TLS library's defaults are used.
    #[arg(long, value_delimiter = ',', verbatim_doc_comment)]
    pub tls_curve_preferences: Vec<String>,

    /// The limit that the server gives to clients for the maximum number of streams in an HTTP/2 connection. Zero means to use golang's default.
    #[arg(long, default_value_t = 0, verbatim_doc_comment)]
    pub http2_max_streams_per_connection: u32,

    /// If true, HTTP2 serving will be disabled [default=false]
    #[arg(long, go_bool = false, verbatim_doc_comment)]
    pub disable_http2_serving: bool,

    /// If true, SO_REUSEPORT will be used when binding the port, which allows more than one instance to bind on the same address and port. [default=false]
    #[arg(long, go_bool = false, verbatim_doc_comment)]
    pub permit_port_sharing: bool,

    /// If true, SO_REUSEADDR will be used when binding the port. This allows binding to wildcard IPs like 0.0.0.0 and specific IPs in parallel, and it avoids waiting for the kernel to release sockets in TIME_WAIT state. [default=false]
    #[arg(long, go_bool = false, verbatim_doc_comment)]
    pub permit_address_sharing: bool,

    /// Who the callers are.
    #[command(flatten)]
    pub authentication: AuthenticationOptions,

    /// What they may read.
    #[command(flatten)]
    pub authorization: AuthorizationOptions,
}

/// Upstream's `DelegatingAuthenticationOptions` with the kubeconfig optional, as the CCM sets it.
#[derive(Args, Clone, Debug)]
#[command(next_help_heading = "Authentication flags", end_help_heading = true)]
pub struct AuthenticationOptions {
    /// kubeconfig file pointing at the 'core' kubernetes server with enough rights to create tokenreviews.authentication.k8s.io. This is optional. If empty, all token requests are considered to be anonymous and no client CA is looked up in the cluster.
    #[arg(long, verbatim_doc_comment)]
    pub authentication_kubeconfig: Option<PathBuf>,

    /// If false, the authentication-kubeconfig will be used to lookup missing authentication configuration from the cluster.
    #[arg(long, go_bool = false, verbatim_doc_comment)]
    pub authentication_skip_lookup: bool,

    /// The duration to cache responses from the webhook token authenticator.
    #[arg(long, default_value = "10s", verbatim_doc_comment)]
    pub authentication_token_webhook_cache_ttl: GoDuration,

    /// If true, failures to look up missing authentication configuration from the cluster are not considered fatal. Note that this can result in authentication that treats all requests as anonymous.
    #[arg(long, go_bool = false, verbatim_doc_comment)]
    pub authentication_tolerate_lookup_failure: bool,

    /// If set, any request presenting a client certificate signed by one of the authorities in the client-ca-file is authenticated with an identity corresponding to the CommonName of the client certificate.
    #[arg(long, verbatim_doc_comment)]
    pub client_ca_file: Option<PathBuf>,

    /// Root certificate bundle to use to verify client certificates on incoming requests before trusting usernames in headers specified by --requestheader-username-headers. WARNING: generally do not depend on authorization being already done for incoming requests.
    #[arg(long, verbatim_doc_comment)]
    pub requestheader_client_ca_file: Option<PathBuf>,

    /// List of client certificate common names to allow to provide usernames in headers specified by --requestheader-username-headers. If empty, any client certificate validated by the authorities in --requestheader-client-ca-file is allowed.
    #[arg(long, value_delimiter = ',', verbatim_doc_comment)]
    pub requestheader_allowed_names: Vec<String>,

    /// List of request headers to inspect for usernames. X-Remote-User is common.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "x-remote-user",
        verbatim_doc_comment
    )]
    pub requestheader_username_headers: Vec<String>,

    /// List of request headers to inspect for UIDs. X-Remote-Uid is suggested.
    #[arg(long, value_delimiter = ',', verbatim_doc_comment)]
    pub requestheader_uid_headers: Vec<String>,

    /// List of request headers to inspect for groups. X-Remote-Group is suggested.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "x-remote-group",
        verbatim_doc_comment
    )]
    pub requestheader_group_headers: Vec<String>,

    /// List of request header prefixes to inspect. X-Remote-Extra- is suggested.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "x-remote-extra-",
        verbatim_doc_comment
    )]
    pub requestheader_extra_headers_prefix: Vec<String>,
}

/// Upstream's `DelegatingAuthorizationOptions` with the kubeconfig optional, as the CCM sets it.
#[derive(Args, Clone, Debug)]
#[command(next_help_heading = "Authorization flags", end_help_heading = true)]
pub struct AuthorizationOptions {
    /// kubeconfig file pointing at the 'core' kubernetes server with enough rights to create subjectaccessreviews.authorization.k8s.io. This is optional. If empty, all requests not skipped by authorization are forbidden.
    #[arg(long, verbatim_doc_comment)]
    pub authorization_kubeconfig: Option<PathBuf>,

    /// A list of HTTP paths to skip during authorization, i.e. these are authorized without contacting the 'core' kubernetes server.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "/healthz,/readyz,/livez",
        verbatim_doc_comment
    )]
    pub authorization_always_allow_paths: Vec<String>,

    /// The duration to cache 'authorized' responses from the webhook authorizer.
    #[arg(long, default_value = "10s", verbatim_doc_comment)]
    pub authorization_webhook_cache_authorized_ttl: GoDuration,

    /// The duration to cache 'unauthorized' responses from the webhook authorizer.
    #[arg(long, default_value = "10s", verbatim_doc_comment)]
    pub authorization_webhook_cache_unauthorized_ttl: GoDuration,
}

/// Drops the empty entries a flag like `--requestheader-allowed-names=` leaves, as pflag does.
pub(crate) fn non_empty(values: &[String]) -> Vec<String> {
    values
        .iter()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect()
}

impl ServingOptions {
    /// The TLS settings the `--tls-*` and HTTP/2 flags ask for, or every flag value this build
    /// cannot honour, each named.
    pub fn tls_settings(&self) -> Result<TlsSettings, Vec<String>> {
        TlsSettings::from_flags(
            self.tls_min_version.as_deref(),
            &non_empty(&self.tls_cipher_suites),
            &non_empty(&self.tls_curve_preferences),
            &self.tls_sni_cert_key,
            !self.disable_http2_serving,
            self.http2_max_streams_per_connection,
        )
    }

    /// Every problem with these flags, each saying what to change; empty means valid.
    pub fn validate(&self) -> Vec<String> {
        let mut errors = Vec::new();
        if self.tls_cert_file.is_some() != self.tls_private_key_file.is_some() {
            errors.push(
                "--tls-cert-file and --tls-private-key-file must be given together".to_string(),
            );
        }
        if let Err(tls) = self.tls_settings() {
            errors.extend(tls);
        }
        if cfg!(not(unix)) && self.permit_port_sharing {
            errors.push(
                "--permit-port-sharing needs SO_REUSEPORT, which this platform lacks; remove it"
                    .to_string(),
            );
        }
        if let Err(e) = AllowPaths::parse(&non_empty(
            &self.authorization.authorization_always_allow_paths,
        )) {
            errors.push(format!("--authorization-always-allow-paths: {e}"));
        }
        errors
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::options::parse_group;

    fn parse(args: &[&str]) -> ServingOptions {
        parse_group(args).unwrap()
    }

    #[test]
    fn defaults_match_upstream() {
        let o = parse(&[]);
        let a = &o.authentication;
        assert_eq!(
            a.authentication_token_webhook_cache_ttl.get(),
            Duration::from_secs(10)
        );
        assert_eq!(a.requestheader_username_headers, vec!["x-remote-user"]);
        assert_eq!(a.requestheader_group_headers, vec!["x-remote-group"]);
        assert_eq!(
            a.requestheader_extra_headers_prefix,
            vec!["x-remote-extra-"]
        );
        assert!(a.requestheader_uid_headers.is_empty());
        assert!(!a.authentication_skip_lookup && !a.authentication_tolerate_lookup_failure);
        let z = &o.authorization;
        assert_eq!(
            z.authorization_always_allow_paths,
            vec!["/healthz", "/readyz", "/livez"]
        );
        assert_eq!(
            (
                z.authorization_webhook_cache_authorized_ttl.get(),
                z.authorization_webhook_cache_unauthorized_ttl.get()
            ),
            (Duration::from_secs(10), Duration::from_secs(10))
        );
        assert_eq!(o.http2_max_streams_per_connection, 0);
        assert!(!o.disable_http2_serving && !o.permit_port_sharing && !o.permit_address_sharing);
        assert!(o.validate().is_empty(), "{:?}", o.validate());
    }

    #[test]
    fn an_empty_always_allow_list_allows_nothing() {
        let o = parse(&["--authorization-always-allow-paths="]);
        assert!(non_empty(&o.authorization.authorization_always_allow_paths).is_empty());
    }

    #[test]
    fn sni_pairs_keep_their_commas_and_repeat() {
        let o = parse(&[
            "--tls-sni-cert-key=a.crt,a.key",
            "--tls-sni-cert-key=b.crt,b.key:*.b.com,b.com",
        ]);
        assert_eq!(
            o.tls_sni_cert_key,
            vec!["a.crt,a.key", "b.crt,b.key:*.b.com,b.com"]
        );
    }

    #[test]
    fn every_value_this_build_cannot_honour_is_named() {
        let o = parse(&[
            "--tls-min-version=VersionTLS10",
            "--tls-cipher-suites=TLS_RSA_WITH_AES_128_CBC_SHA,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            "--tls-curve-preferences=CurveP521",
            "--authorization-always-allow-paths=/a*b",
            "--tls-cert-file=/x",
        ]);
        let errors = o.validate();
        assert_eq!(errors.len(), 5, "{errors:#?}");
        for needle in [
            "VersionTLS10",
            "TLS_RSA_WITH_AES_128_CBC_SHA",
            "CurveP521",
            "only trailing * allowed",
            "given together",
        ] {
            assert!(
                errors.iter().any(|e| e.contains(needle)),
                "{needle}: {errors:#?}"
            );
        }
    }
}
