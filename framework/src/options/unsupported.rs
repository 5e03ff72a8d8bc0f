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
    "cidr-allocator-type",
    "client-ca-file",
    "contention-profiling",
    "disable-http2-serving",
    "enable-leader-migration",
    "external-cloud-volume-plugin",
    "feature-gates",
    "http2-max-streams-per-connection",
    "kube-api-content-type",
    "leader-migration-config",
    "log-flush-frequency",
    "node-sync-period",
    "permit-address-sharing",
    "permit-port-sharing",
    "profiling",
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
    "vmodule",
    "webhook-bind-address",
    "webhook-cert-dir",
    "webhook-disable-http2-serving",
    "webhook-secure-port",
    "webhooks",
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
            "--feature-gates=Foo=true",
            "--cloud-provider=fake",
            "--profiling",
            "value",
        ]);
        assert_eq!(errors.len(), 2);
        assert!(errors[0].contains("--feature-gates "));
        assert!(errors[1].contains("--profiling "));
    }
}
