//! A replica started with bad flags or a bad cloud-config must refuse to start — with every
//! problem named and what to write instead — rather than join the leader election half
//! configured (issue 9, hostile input). Runs the real binary.

use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cloud-controller-manager"))
        .args(args)
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .expect("binary runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A kubeconfig pointing at a closed port: start-up must fail on the input, before any API call.
fn kubeconfig(dir: &std::path::Path) -> String {
    let path = dir.join("kubeconfig");
    std::fs::write(&path, kube_testenv::kubeconfig_yaml("http://127.0.0.1:1")).expect("write");
    path.display().to_string()
}

#[test]
fn invalid_flag_values_are_all_reported_and_nothing_starts() {
    let out = run(&[
        "--controllers=bogus,-nope",
        "--leader-elect-lease-duration=1s",
        "--leader-elect-renew-deadline=2s",
        "--concurrent-service-syncs=0",
        "--cloud-api-qps=1e-300",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    for says in [
        "--cloud-provider cannot be empty",
        "\"bogus\" is not in the list of known controllers",
        "\"nope\" is not in the list of known controllers",
        "known controllers: cloud-node-controller",
        "--leader-elect-lease-duration (1s) must be greater than --leader-elect-renew-deadline (2s)",
        "--concurrent-service-syncs must be at least 1",
        "--cloud-api-qps must be 0 (unlimited) or from 0.001 to 1000000 calls per second, got 1e-300",
        "nothing was started",
    ] {
        assert!(err.contains(says), "missing {says:?} in:\n{err}");
    }
}

#[test]
fn unparsable_flag_values_are_rejected_by_the_parser() {
    for (arg, says) in [
        (
            "--leader-elect-lease-duration=abc",
            "missing number before unit",
        ),
        (
            "--leader-elect-retry-period=9999999999999999h",
            "number too large",
        ),
        ("--concurrent-service-syncs=-1", "invalid value"),
        ("--leader-elect=maybe", "invalid value"),
        ("--no-such-flag", "unexpected argument"),
    ] {
        let out = run(&[arg]);
        assert_eq!(out.status.code(), Some(2), "{arg}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{arg}: {}", stderr(&out));
    }
}

#[test]
fn a_bad_cloud_config_or_provider_stops_start_up_with_the_reason() {
    let dir = std::env::temp_dir().join(format!("ccm-bad-flags-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let kc = kubeconfig(&dir);
    let kc_flag = format!("--kubeconfig={kc}");
    let bad = dir.join("cloud.yaml");
    std::fs::write(&bad, "instances: [\n").expect("write");
    let bad_flag = format!("--cloud-config={}", bad.display());
    // An unregistered provider is a flag error (status 2, before anything starts); a provider
    // that fails on its config fails start-up (status 1).
    for (args, code, says) in [
        (
            vec![
                &kc_flag[..],
                "--cloud-provider=fake",
                "--cloud-config=/nonexistent",
            ],
            1,
            "could not read --cloud-config file /nonexistent: No such file",
        ),
        (
            vec![&kc_flag[..], "--cloud-provider=fake", &bad_flag[..]],
            1,
            "unclosed bracket",
        ),
        (
            vec![&kc_flag[..], "--cloud-provider=nosuch"],
            2,
            "--cloud-provider=nosuch: unknown cloud provider; registered providers are fake",
        ),
    ] {
        let out = run(&args);
        let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
        assert_eq!(out.status.code(), Some(code), "{args:?}: {all}");
        assert!(all.contains(says), "{args:?}: {all}");
        assert!(!all.contains("panicked"), "{args:?}: {all}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A provider's config holds credentials: a mistake next to one is reported with the file, key
/// and line, and the value never reaches stderr (the YAML library would quote the lines around).
#[test]
fn a_bad_cloud_config_never_echoes_its_values() {
    const SECRET: &str = "s3cr3t-value";
    let dir = std::env::temp_dir().join(format!("ccm-secret-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let kc = format!("--kubeconfig={}", kubeconfig(&dir));
    let path = dir.join("cloud.yaml");
    let config = format!("--cloud-config={}", path.display());
    for (yaml, says) in [
        (
            format!("providerName: acme\nhasClusterID: [ \"{SECRET}\" ]\n"),
            "invalid fake cloud config: key hasClusterID (line 2, column 15): expected string scalar",
        ),
        (
            format!("providerName: acme\ntoken: {SECRET}\n"),
            "invalid fake cloud config: key token (line 2, column 1): unknown field `token`, expected one of",
        ),
        (
            format!("providerName: acme\nhasClusterID: [{SECRET}]\npassword: hunter2\n"),
            "invalid fake cloud config: key hasClusterID (line 2, column 15): expected string scalar",
        ),
        (
            // Made the fake cloud answer "retry after 18,446,744,073 s" (584 years).
            format!("# {SECRET}\nrateLimit: {{qps: 1e-300}}\n"),
            "rateLimit.qps must be a number from 0.001 (one call per 1000 s) to 1000000 calls per second (line 2)",
        ),
    ] {
        std::fs::write(&path, &yaml).expect("write");
        let out = run(&[&kc[..], "--cloud-provider=fake", &config[..]]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{yaml:?}: {err}");
        let last = err.lines().last().unwrap_or_default();
        let from = format!(
            "could not init cloud provider \"fake\" from --cloud-config file {}: {says}",
            path.display()
        );
        assert!(last.contains(&from), "{yaml:?}: last line {last:?}");
        let all = format!("{}{err}", String::from_utf8_lossy(&out.stdout));
        assert!(!all.contains(SECRET), "{yaml:?} leaked: {all}");
        assert!(!all.contains("hunter2"), "{yaml:?} leaked: {all}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 36: a kubeconfig whose user line holds a token and a password next to a mistake
/// (`users: [{name: u, user: {token: ["s3cr3t"], password: hunter2}}]`) printed that whole line.
/// Given as `--kubeconfig`, `--authentication-kubeconfig` or `--authorization-kubeconfig`, and
/// a token and a password given as `--feature-gates` values: the last stderr line names the
/// file (or flag), the key path and the line, and neither secret is anywhere in the output.
#[test]
fn no_config_error_echoes_a_token_or_password() {
    let dir = std::env::temp_dir().join(format!("ccm-kubeconfig-secret-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let good = kubeconfig(&dir);
    let bad = dir.join("leaky-kubeconfig");
    std::fs::write(
        &bad,
        "apiVersion: v1\nkind: Config\n\
         clusters: [{name: c, cluster: {server: \"http://127.0.0.1:1\"}}]\n\
         contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n\
         users: [{name: u, user: {token: [\"s3cr3t\"], password: hunter2}}]\n",
    )
    .expect("write");
    let bad = bad.display().to_string();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let fault = format!(
        "cannot use kubeconfig {bad}: key users[0].user.token (line 6, column 33): expected string scalar"
    );
    let cases = [
        (format!("--kubeconfig={bad}"), None, 1, fault.clone()),
        (
            format!("--authentication-kubeconfig={bad}"),
            Some(&good),
            1,
            format!("failed to get delegated authentication kubeconfig: {fault} (check --authentication-kubeconfig)"),
        ),
        (
            format!("--authorization-kubeconfig={bad}"),
            Some(&good),
            1,
            format!("failed to get delegated authorization kubeconfig: {fault} (check --authorization-kubeconfig)"),
        ),
        (
            "--feature-gates=ContextualLogging=true,WatchListClient=s3cr3t,Token=hunter2".into(),
            Some(&good),
            2,
            "error: invalid argument for \"--feature-gates\" flag: invalid value of WatchListClient, err: strconv.ParseBool: invalid syntax".into(),
        ),
    ];
    for (flag, kubeconfig, code, says) in cases {
        let kubeconfig = kubeconfig.map(|k| format!("--kubeconfig={k}"));
        let port = format!("--secure-port={port}");
        let mut args = vec![
            "--cloud-provider=fake",
            "--controllers=service",
            &port[..],
            &flag[..],
        ];
        args.extend(kubeconfig.as_deref());
        let out = run(&args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(code), "{flag}: {err}");
        let last = err
            .lines()
            .rfind(|l| !l.contains("nothing was started"))
            .unwrap_or_default();
        assert!(last.ends_with(&says), "{flag}: last line {last:?}");
        let all = format!("{}{err}", String::from_utf8_lossy(&out.stdout));
        for secret in ["s3cr3t", "hunter2"] {
            assert!(!all.contains(secret), "{flag} leaked {secret}: {all}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// An endless file given as a config (or a runaway one) is refused at once with its name and
/// the limit, where it used to grow the process to 22.5 GB before the OOM killer, with SIGTERM
/// unheeded meanwhile.
#[test]
fn endless_config_files_are_refused_at_once() {
    let dir = std::env::temp_dir().join(format!("ccm-endless-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let kc = format!("--kubeconfig={}", kubeconfig(&dir));
    for (args, says) in [
        (
            vec![&kc[..], "--cloud-provider=fake", "--cloud-config=/dev/zero"],
            "could not read --cloud-config file /dev/zero: larger than 16777216 bytes",
        ),
        (
            vec!["--kubeconfig=/dev/zero", "--cloud-provider=fake"],
            "cannot read kubeconfig /dev/zero: larger than 16777216 bytes",
        ),
    ] {
        let started = std::time::Instant::now();
        let out = run(&args);
        let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
        assert_eq!(out.status.code(), Some(1), "{args:?}: {all}");
        assert!(all.contains(says), "{args:?}: {all}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "{args:?} took {:?}",
            started.elapsed()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
