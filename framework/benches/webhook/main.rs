//! Admission webhook bench (docs/benchmarks.md §10): our webhook server against the hand-written
//! axum server kube-rs documents, both validating ConfigMaps against ~1,000 cached ones.
//!
//! `cargo bench -p controller-manager --bench webhook -- [--objects N] [--seconds S]
//! [--rate R] [--connections C] [--rounds K]`
//!
//! The parent serves kube-testenv, seeds the ConfigMaps, writes one certificate pair and starts
//! both servers as children pinned to core 0 (`taskset -c 0 <this binary> --child ours|axum`),
//! then drives them in turn from core 1 (the parent pins itself there) over keep-alive TLS
//! connections with the same review bodies: HTTP/1.1 at a fixed rate and at full speed, and
//! HTTP/2 at full speed. Each child's RSS is sampled from /proc while it serves.

mod axum_server;
mod load;
mod ours;
mod parent;
mod rule;

fn main() -> anyhow::Result<()> {
    // `cargo bench` passes `--bench` to harness = false targets.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let child = args.first().is_some_and(|a| a == "--child");
    if !child {
        parent::pin_to_cpu(1)?;
    }
    // One worker per core the process may use: one for the pinned servers.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    match args.split_first() {
        Some((flag, rest)) if flag == "--child" => runtime.block_on(run_child(rest)),
        _ => runtime.block_on(parent::run(parent::Options::parse(&args)?)),
    }
}

/// Serves as `ours` or `axum` with the testenv URL, certificate, key and port given.
async fn run_child(args: &[String]) -> anyhow::Result<()> {
    let [server, url, cert, key, port] = args else {
        anyhow::bail!("usage: --child ours|axum URL CERT KEY PORT");
    };
    let client = kube::Client::try_from(kube::Config::new(url.parse()?))?;
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse()?;
    match server.as_str() {
        "ours" => ours::serve(client, addr, cert.into(), key.into()).await,
        "axum" => axum_server::serve(client, addr, cert.into(), key.into()).await,
        other => anyhow::bail!("unknown server {other}"),
    }
}

/// Tells the parent the child is serving with a synced cache, then serves until stdin closes.
async fn ready_until_stdin_closes() {
    println!("READY");
    let _ = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        while std::io::stdin().read_line(&mut line).is_ok_and(|n| n > 0) {
            line.clear();
        }
    })
    .await;
}
