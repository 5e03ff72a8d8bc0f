//! `kube-testenv --port N --kubeconfig FILE`: runs the embedded API server standalone so kubectl
//! and other programs can use it; serves until Ctrl-C.

use std::path::PathBuf;
use std::process::ExitCode;

fn usage() -> &'static str {
    "usage: kube-testenv [--port N] [--kubeconfig FILE] [--service-cluster-ip-range CIDR] [--history-window N]"
}

#[tokio::main]
async fn main() -> ExitCode {
    let mut builder = kube_testenv::TestEnv::builder();
    let mut kubeconfig: Option<PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) => (f.to_string(), Some(v.to_string())),
            None => (arg.clone(), None),
        };
        let mut value = || inline.clone().or_else(|| args.next());
        match flag.as_str() {
            "--port" => match value().and_then(|v| v.parse().ok()) {
                Some(p) => builder = builder.port(p),
                None => return fail("--port needs a number"),
            },
            "--kubeconfig" => match value() {
                Some(p) => kubeconfig = Some(PathBuf::from(p)),
                None => return fail("--kubeconfig needs a path"),
            },
            "--service-cluster-ip-range" => match value() {
                Some(c) => builder = builder.service_cluster_ip_range(&c),
                None => return fail("--service-cluster-ip-range needs a CIDR"),
            },
            "--history-window" => match value().and_then(|v| v.parse().ok()) {
                Some(n) => builder = builder.history_window(n),
                None => return fail("--history-window needs a number"),
            },
            "-h" | "--help" => {
                eprintln!("{}", usage());
                return ExitCode::SUCCESS;
            }
            other => return fail(&format!("unknown flag {other}")),
        }
    }
    let env = match builder.start().await {
        Ok(env) => env,
        Err(e) => return fail(&e.to_string()),
    };
    if let Some(path) = &kubeconfig {
        if let Err(e) = env.write_kubeconfig(path) {
            return fail(&format!("writing {}: {e}", path.display()));
        }
        eprintln!(
            "kube-testenv serving {} (kubeconfig: {})",
            env.url(),
            path.display()
        );
    } else {
        eprintln!("kube-testenv serving {}", env.url());
    }
    let _ = tokio::signal::ctrl_c().await;
    env.shutdown().await;
    ExitCode::SUCCESS
}

fn fail(msg: &str) -> ExitCode {
    eprintln!("kube-testenv: {msg}\n{}", usage());
    ExitCode::from(2)
}
