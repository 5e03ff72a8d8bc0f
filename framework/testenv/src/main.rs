//! `kube-testenv --port N --kubeconfig FILE`: runs the embedded API server standalone so kubectl
//! and other programs can use it; serves until Ctrl-C.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// An embedded Kubernetes API server on 127.0.0.1 (plain HTTP) for tests and no-cluster dev runs.
#[derive(Debug, Parser)]
#[command(name = "kube-testenv", version)]
struct Options {
    /// Port on 127.0.0.1 to serve on (0 = a random free port).
    #[arg(long, default_value_t = 6443)]
    port: u16,
    /// Write a kubeconfig for this server to FILE (for kubectl and client-go programs).
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// ClusterIP range for Services.
    #[arg(long, default_value = "10.96.0.0/12")]
    service_cluster_ip_range: String,
    /// Events (of all types) a watch can resume across before it gets 410 Gone.
    #[arg(long, default_value_t = 10_000)]
    history_window: usize,
}

#[tokio::main]
async fn main() -> ExitCode {
    let opts = Options::parse();
    let started = kube_testenv::TestEnv::builder()
        .port(opts.port)
        .service_cluster_ip_range(&opts.service_cluster_ip_range)
        .history_window(opts.history_window)
        .start()
        .await;
    let env = match started {
        Ok(env) => env,
        Err(e) => return fail(&e.to_string()),
    };
    match &opts.kubeconfig {
        Some(path) => {
            if let Err(e) = env.write_kubeconfig(path) {
                return fail(&format!("writing {}: {e}", path.display()));
            }
            eprintln!(
                "kube-testenv serving {} (kubeconfig: {})",
                env.url(),
                path.display()
            );
        }
        None => eprintln!("kube-testenv serving {}", env.url()),
    }
    if let Err(e) = tokio::signal::ctrl_c().await {
        return fail(&format!("waiting for Ctrl-C: {e}"));
    }
    env.shutdown().await;
    ExitCode::SUCCESS
}

fn fail(msg: &str) -> ExitCode {
    eprintln!("kube-testenv: {msg}");
    ExitCode::from(1)
}
