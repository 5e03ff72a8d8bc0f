//! The macro benchmark: our shared cache against K independent kube-runtime controllers, watch →
//! reconcile latency, memory per cached object, and metadata-only caching, all against
//! kube-testenv over HTTP.
//!
//! `cargo bench -p controller-manager --bench cache [-- shared latency memory views --nodes N ...]`
//!
//! The parent process serves kube-testenv and re-executes this binary once per scenario with
//! `--child <scenario> ...`, so each scenario's RSS, heap and CPU figures are its own and never
//! include the server's. See docs/benchmarks.md for the figures and how to read them.

mod alloc;
mod fixtures;
mod latency;
mod memory;
mod parent;
mod procfs;
mod progress;
mod report;
mod shared_cache;
mod views;

#[global_allocator]
static HEAP: alloc::Counting = alloc::Counting;

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
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    match args.split_first() {
        Some((flag, rest)) if flag == "--child" => runtime.block_on(child(rest)),
        _ => runtime.block_on(parent::run(parent::Options::parse(&args)?)),
    }
}

/// Runs one scenario in this (child) process and prints its result line.
async fn child(args: &[String]) -> anyhow::Result<()> {
    let arg = |i: usize| args.get(i).map(String::as_str).unwrap_or_default();
    let client = || -> anyhow::Result<kube::Client> {
        Ok(kube::Client::try_from(kube::Config::new(
            args.last()
                .map(String::as_str)
                .unwrap_or_default()
                .parse()?,
        ))?)
    };
    let figures = match (arg(0), arg(1)) {
        ("shared", "ours") => shared_cache::ours(client()?, arg(2).parse()?).await?,
        ("shared", "kube-runtime") => {
            shared_cache::kube_runtime(client()?, arg(2).parse()?).await?
        }
        ("queue-retained", n) => shared_cache::queue_retained(n.parse()?).await?,
        ("latency", "ours") => latency::ours(client()?, 4).await?,
        ("latency", "kube-runtime") => latency::kube_runtime(client()?).await?,
        ("lists", mode) => memory::lists(client()?, mode).await?,
        ("transform", mode) => memory::transform(arg(2).parse()?, mode == "drop")?,
        ("wire-transform", mode) => memory::wire_transform(client()?, mode == "drop").await?,
        ("views", mode) => views::views(client()?, mode).await?,
        (scenario, variant) => anyhow::bail!("unknown scenario {scenario} {variant}"),
    };
    figures.emit()
}
