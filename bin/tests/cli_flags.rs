//! The binary's flag handling, run as an operator would: every error at once, exit status 2, and
//! nothing started.

use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cloud-controller-manager"))
        .args(args)
        .output()
        .expect("binary runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn help_groups_flags_as_upstream() {
    let out = run(&["--help"]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for heading in [
        "Generic flags:",
        "Misc flags:",
        "Leader-election flags:",
        "Secure serving flags:",
        "Service-lb-controller flags:",
        "Cloud-node-controller flags:",
        "Logs flags:",
        "Tracing flags:",
        "Development flags:",
    ] {
        assert!(
            help.contains(heading),
            "missing {heading} in --help:\n{help}"
        );
    }
    for flag in [
        "--cloud-provider",
        "--cloud-config",
        "--kubeconfig",
        "--master",
        "--controllers",
        "--leader-elect-lease-duration",
        "--node-monitor-period",
        "--node-status-update-frequency",
        "--concurrent-node-status-updates",
        "--route-reconciliation-period",
        "--configure-cloud-routes",
        "--allocate-node-cidrs",
        "--cluster-cidr",
        "--cluster-name",
        "--concurrent-service-syncs",
        "--concurrent-node-syncs",
        "--kube-api-qps",
        "--kube-api-burst",
        "--min-resync-period",
        "--secure-port",
        "--bind-address",
        "--cert-dir",
        "--tls-cert-file",
        "--tls-private-key-file",
    ] {
        assert!(help.contains(flag), "missing {flag} in --help");
    }
}

#[test]
fn every_validation_error_is_reported_together() {
    let out = run(&[
        "--controllers=cloud-node,nope,-also-nope",
        "--kube-api-qps=0",
        "--concurrent-service-syncs=0",
        "--leader-elect-lease-duration=5s",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    for expected in [
        "--cloud-provider cannot be empty",
        "--kube-api-qps must be greater than 0",
        "--concurrent-service-syncs must be at least 1",
        "must be greater than --leader-elect-renew-deadline",
        r#""nope" is not in the list of known controllers"#,
        r#""also-nope" is not in the list of known controllers"#,
        "known controllers: cloud-node-controller, cloud-node-lifecycle-controller, service-lb-controller, node-route-controller",
        "nothing was started",
    ] {
        assert!(err.contains(expected), "missing {expected:?} in:\n{err}");
    }
}

#[test]
fn unknown_provider_lists_the_registered_ones() {
    let out = run(&["--cloud-provider=aws"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("unknown cloud provider; registered providers are fake"),
        "{}",
        stderr(&out)
    );
    let out = run(&["--cloud-provider=external"]);
    assert!(
        stderr(&out).contains("this process is that manager"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_repeated_flag_takes_its_last_value_and_says_so() {
    // The last --cloud-provider wins (as pflag): "aws" is what is refused, and stderr says why.
    let out = run(&["--cloud-provider=fake", "--cloud-provider=aws"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains(
            "warning: --cloud-provider was given 2 times; the last value (\"aws\") is used"
        ),
        "{err}"
    );
    assert!(err.contains("unknown cloud provider"), "{err}");
}

#[test]
fn flag_values_this_build_cannot_honour_are_refused_by_name() {
    let out = run(&[
        "--cloud-provider=fake",
        "--feature-gates=CloudControllerManagerWebhook=true,Foo=true",
        "--contention-profiling=true",
        "--enable-leader-migration",
        "--vmodule=foo=4",
        "--webhooks=bar",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    for expected in [
        r#"invalid argument for "--feature-gates" flag: unrecognized feature gate: Foo"#,
        "--contention-profiling=true: tokio has no block profile",
        "--enable-leader-migration=true: this build has no leader migration",
        "--vmodule=foo=4",
        r#""bar" is not in the list of known webhooks"#,
    ] {
        assert!(err.contains(expected), "missing {expected:?} in:\n{err}");
    }
}

#[test]
fn help_lists_controllers_and_feature_gates_as_upstream() {
    let out = run(&["--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    for expected in [
        "All controllers: cloud-node-controller, cloud-node-lifecycle-controller, node-route-controller, service-lb-controller",
        "Disabled-by-default controllers:",
        "CloudControllerManagerWatchBasedRoutesReconciliation=true|false (ALPHA - default=false)",
        "CloudControllerManagerWebhook=true|false (ALPHA - default=false)",
        "AllAlpha=true|false (ALPHA - default=false)",
        "--use-service-account-credentials",
        "--webhook-secure-port",
    ] {
        assert!(
            help.contains(expected),
            "missing {expected:?} in --help:\n{help}"
        );
    }
}

#[test]
fn unknown_flags_and_bad_values_name_the_flag() {
    let out = run(&["--cloud-provider=fake", "--no-such-flag"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--no-such-flag"), "{}", stderr(&out));
    let out = run(&["--cloud-provider=fake", "--node-monitor-period=5"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("--node-monitor-period") && err.contains("missing unit"),
        "{err}"
    );
}

#[test]
fn missing_cluster_without_kubeconfig_fails_clearly() {
    // No --kubeconfig, no --master and not in a cluster: the client cannot be built.
    let out = Command::new(env!("CARGO_BIN_EXE_cloud-controller-manager"))
        .args(["--cloud-provider=fake", "--secure-port=0"])
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = format!("{}{}", stderr(&out), String::from_utf8_lossy(&out.stdout));
    assert!(
        text.contains("no API server configured") && text.contains("pass --kubeconfig or --master"),
        "{text}"
    );
}

/// Issue 36: nine `--feature-gates` flags of about 11,000 entries each (as many as one argument
/// of the kernel's 128 KiB holds) were still being parsed after 20 s. Each repeated list flag,
/// given so, is answered (refused, here: the names are unknown) within 5 s in a debug build
/// (1.0-1.5 s on an idle machine), and no error line quotes the flag's whole value
/// (`--controllers` made one line of 5 MB). `--tls-cipher-suites` and `--webhooks` print one
/// line per unknown entry (7.8 and 5.2 MB here, 1.3-2.1 s), so they get 10 s.
#[test]
fn nine_repeated_list_flags_of_eleven_thousand_entries_are_answered_at_once() {
    // (flag, entry i is `{prefix}{i:05}{suffix}`, bound in seconds)
    let cases = [
        ("--feature-gates", "G", "=t", 5),
        ("--controllers", "c", "", 5),
        ("--sharded-controllers", "c", "", 5),
        ("--tls-cipher-suites", "S", "", 10),
        ("--webhooks", "w", "", 10),
    ];
    for (flag, prefix, suffix, within) in cases {
        let args: Vec<String> = (0..9)
            .map(|r| {
                let entries: Vec<String> = (0..11_000)
                    .map(|i| format!("{prefix}{:05}{suffix}", r * 11_000 + i))
                    .collect();
                format!("{flag}={}", entries.join(","))
            })
            .collect();
        // --sharded-controllers is checked by the manager, once the client is configured.
        let mut argv = vec!["--cloud-provider=fake", "--master=http://127.0.0.1:1"];
        argv.extend(args.iter().map(String::as_str));
        let start = std::time::Instant::now();
        let out = run(&argv);
        let took = start.elapsed();
        let err = stderr(&out);
        let code = if flag == "--sharded-controllers" {
            1
        } else {
            2
        };
        assert_eq!(
            out.status.code(),
            Some(code),
            "{flag}: {}",
            &err[..err.len().min(500)]
        );
        assert!(
            took < std::time::Duration::from_secs(within),
            "{flag} took {took:?}"
        );
        let longest = err.lines().map(str::len).max().unwrap_or(0);
        println!(
            "{flag}: {took:?}, {} bytes of stderr, longest line {longest}",
            err.len()
        );
        assert!(longest < 10_000, "{flag}: an error line of {longest} bytes");
    }
}
