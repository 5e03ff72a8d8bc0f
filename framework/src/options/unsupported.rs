//! Upstream flags this build does not implement yet. They are rejected by name with a clear
//! message instead of clap's generic "unexpected argument", and never silently ignored.

/// Flags of the Go cloud-controller-manager that are recognised but not supported yet.
pub const UNSUPPORTED_UPSTREAM_FLAGS: &[&str] = &[
    "authentication-kubeconfig",
    "authentication-skip-lookup",
    "authentication-token-webhook-cache-ttl",
    "authentication-tolerate-lookup-failure",
    "authorization-always-allow-paths",
    "authorization-kubeconfig",
    "authorization-webhook-cache-authorized-ttl",
    "authorization-webhook-cache-unauthorized-ttl",
    "client-ca-file",
    "disable-http2-serving",
    "http2-max-streams-per-connection",
    "permit-address-sharing",
    "permit-port-sharing",
    "requestheader-allowed-names",
    "requestheader-client-ca-file",
    "requestheader-extra-headers-prefix",
    "requestheader-group-headers",
    "requestheader-uid-headers",
    "requestheader-username-headers",
    "tls-cipher-suites",
    "tls-curve-preferences",
    "tls-min-version",
    "tls-sni-cert-key",
];

/// One message per upstream flag in `args` that this build does not support; empty when none.
pub fn reject_unsupported_flags<S: AsRef<str>>(args: &[S]) -> Vec<String> {
    args.iter()
        .filter_map(|arg| {
            let name = arg.as_ref().strip_prefix("--")?;
            let name = name.split_once('=').map_or(name, |(n, _)| n);
            UNSUPPORTED_UPSTREAM_FLAGS.contains(&name).then(|| {
                format!(
                    "flag --{name} is an upstream cloud-controller-manager flag that this build does not support yet; remove it (see docs/operating.md)"
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_each_unsupported_flag() {
        let errors = reject_unsupported_flags(&[
            "--tls-min-version=VersionTLS12",
            "--cloud-provider=fake",
            "--permit-port-sharing",
            "value",
        ]);
        assert_eq!(errors.len(), 2);
        assert!(errors[0].contains("--tls-min-version "));
        assert!(errors[1].contains("--permit-port-sharing "));
    }
}
