//! The parent process: serves kube-testenv, loads it, runs every scenario in a fresh child
//! process (this same binary re-executed with `--child ...`), counts the LIST and WATCH requests
//! each child sent, and prints the markdown tables for docs/benchmarks.md.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kube_testenv::TestEnv;
use tokio::sync::mpsc::UnboundedReceiver;

use crate::fixtures;
use crate::latency::{self, READY};
use crate::memory::LIST_MODES;
use crate::report::{Figures, RESULT_PREFIX, mb};

/// What to run, from the command line after `--`.
#[derive(Debug)]
pub struct Options {
    /// Which tables to produce: `shared`, `latency`, `memory`.
    pub sections: Vec<String>,
    /// Nodes loaded into the server (the scale target: 5,000).
    pub nodes: usize,
    /// Services loaded into the server (the scale target: 10,000).
    pub services: usize,
    /// Controller counts compared in table 1.
    pub ks: Vec<usize>,
    /// ConfigMaps the latency writer cycles through.
    pub config_maps: usize,
    /// Writes per second in the latency benchmark.
    pub rate: u32,
    /// How long the latency writer runs.
    pub seconds: u64,
    /// Nodes decoded for table 4b.
    pub transform_objects: usize,
    /// Secrets cached for table 4c.
    pub secrets: usize,
    /// KB of data per Secret in table 4c.
    pub secret_kb: usize,
}

impl Options {
    /// `[shared] [latency] [memory] [views]` (default: all) and `--nodes N --services N --ks
    /// 1,2,4,8 --rate N --seconds N --config-maps N --transform-objects N --secrets N
    /// --secret-kb N`.
    pub fn parse(args: &[String]) -> anyhow::Result<Self> {
        let mut o = Options {
            sections: Vec::new(),
            nodes: 5_000,
            services: 10_000,
            ks: vec![1, 2, 4, 8],
            config_maps: 1_000,
            rate: 1_000,
            seconds: 20,
            transform_objects: 10_000,
            secrets: 10_000,
            secret_kb: 10,
        };
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let mut num = || -> anyhow::Result<usize> {
                Ok(it
                    .next()
                    .ok_or_else(|| anyhow::anyhow!("{a} needs a value"))?
                    .parse()?)
            };
            match a.as_str() {
                "--nodes" => o.nodes = num()?,
                "--services" => o.services = num()?,
                "--config-maps" => o.config_maps = num()?,
                "--rate" => o.rate = u32::try_from(num()?)?,
                "--seconds" => o.seconds = num()? as u64,
                "--transform-objects" => o.transform_objects = num()?,
                "--secrets" => o.secrets = num()?,
                "--secret-kb" => o.secret_kb = num()?,
                "--ks" => {
                    let v = it
                        .next()
                        .ok_or_else(|| anyhow::anyhow!("--ks needs a value"))?;
                    o.ks = v.split(',').map(str::parse).collect::<Result<_, _>>()?;
                }
                s @ ("shared" | "latency" | "memory" | "views") => o.sections.push(s.to_string()),
                other => anyhow::bail!("unknown argument {other}"),
            }
        }
        if o.sections.is_empty() {
            o.sections = ["shared", "latency", "memory", "views"]
                .map(String::from)
                .to_vec();
        }
        Ok(o)
    }

    fn wants(&self, section: &str) -> bool {
        self.sections.iter().any(|s| s == section)
    }
}

/// A running scenario process.
struct Child {
    process: std::process::Child,
    lines: UnboundedReceiver<String>,
}

impl Child {
    fn spawn(args: &[String]) -> anyhow::Result<Self> {
        let mut process = Command::new(std::env::current_exe()?)
            .arg("--child")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let stdout = process
            .stdout
            .take()
            .ok_or_else(|| anyhow::anyhow!("no child stdout"))?;
        let (tx, lines) = tokio::sync::mpsc::unbounded_channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Self { process, lines })
    }

    /// Waits for a line equal to `want`.
    async fn expect(&mut self, want: &str) -> anyhow::Result<()> {
        while let Some(line) = self.lines.recv().await {
            if line == want {
                return Ok(());
            }
        }
        anyhow::bail!("child exited before printing {want}")
    }

    /// Tells a child waiting on stdin to finish.
    fn stop(&mut self) -> anyhow::Result<()> {
        if let Some(stdin) = self.process.stdin.as_mut() {
            writeln!(stdin, "STOP")?;
        }
        Ok(())
    }

    /// Waits for the result line and the exit.
    async fn result(mut self) -> anyhow::Result<Figures> {
        let mut figures = None;
        while let Some(line) = self.lines.recv().await {
            if let Some(json) = line.strip_prefix(RESULT_PREFIX) {
                figures = Some(serde_json::from_str(json)?);
            }
        }
        let status = tokio::task::spawn_blocking(move || self.process.wait()).await??;
        match figures {
            Some(f) if status.success() => Ok(f),
            _ => anyhow::bail!("scenario failed: {status}"),
        }
    }
}

/// LIST and WATCH requests the server saw since the last clear, for the benchmark's kinds.
fn list_watch(env: &TestEnv) -> (usize, usize) {
    let requests = env.requests();
    let ours = |r: &&kube_testenv::RequestRecord| {
        matches!(
            r.resource.as_str(),
            "nodes" | "services" | "configmaps" | "secrets"
        )
    };
    let lists = requests
        .iter()
        .filter(ours)
        .filter(|r| r.verb == "list")
        .count();
    let watches = requests
        .iter()
        .filter(ours)
        .filter(|r| r.verb == "watch")
        .count();
    (lists, watches)
}

async fn run_child(env: &TestEnv, args: &[String]) -> anyhow::Result<(Figures, (usize, usize))> {
    env.clear_requests();
    let figures = Child::spawn(args)?.result().await?;
    Ok((figures, list_watch(env)))
}

fn s(v: impl ToString) -> String {
    v.to_string()
}

/// Runs the selected sections and prints their tables.
pub async fn run(o: Options) -> anyhow::Result<()> {
    let env = TestEnv::builder()
        .history_window(1_000_000)
        .watch_buffer(1_000_000)
        .start()
        .await?;
    let started = Instant::now();
    let seeded = fixtures::seed(env.client(), o.nodes, o.services, o.config_maps).await?;
    println!("## Server load (kube-testenv, in the parent process)\n");
    println!(
        "Seeded {} Nodes in {:.1} s ({:.0}/s), {} Services in {:.1} s ({:.0}/s) and {} ConfigMaps, 16 creates in flight; total set-up {:.1} s.\n",
        seeded.nodes,
        seeded.nodes_took.as_secs_f64(),
        seeded.nodes as f64 / seeded.nodes_took.as_secs_f64(),
        seeded.services,
        seeded.services_took.as_secs_f64(),
        seeded.services as f64 / seeded.services_took.as_secs_f64(),
        seeded.config_maps,
        started.elapsed().as_secs_f64(),
    );

    if o.wants("shared") {
        shared_table(&env, &o).await?;
    }
    if o.wants("latency") {
        latency_table(&env, &o).await?;
    }
    if o.wants("memory") {
        memory_tables(&env, &o).await?;
    }
    if o.wants("views") {
        views_table(&o).await?;
    }
    env.shutdown().await;
    Ok(())
}

/// Table 1: K controllers on our shared informers vs K kube-runtime controller pairs, then the
/// heap one drained work queue keeps.
async fn shared_table(env: &TestEnv, o: &Options) -> anyhow::Result<()> {
    let url = env.url();
    println!(
        "## 1. Shared cache vs separate controllers ({} Nodes + {} Services)\n",
        o.nodes, o.services
    );
    println!(
        "| K | implementation | LISTs | WATCHes | cache sync s | all reconciled s | peak RSS MB | steady RSS MB | peak heap MB | steady heap MB | CPU s |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for &k in &o.ks {
        for imp in ["ours", "kube-runtime"] {
            let (f, (lists, watches)) =
                run_child(env, &[s("shared"), s(imp), s(k), url.clone()]).await?;
            println!(
                "| {k} | {imp} | {lists} | {watches} | {:.2} | {:.2} | {} | {} | {} | {} | {:.2} |",
                f.sync_s.unwrap_or_default(),
                f.first_pass_s.unwrap_or_default(),
                mb(f.rss_peak),
                mb(f.rss_steady),
                mb(f.heap_peak as u64),
                mb(f.heap_steady as u64),
                f.cpu_s
            );
        }
    }
    println!();
    let keys = o.nodes + o.services + 1;
    let (f, _) = run_child(env, &[s("queue-retained"), s(keys), url.clone()]).await?;
    println!(
        "A drained `WorkQueue` that held {keys} keys once still holds {} MB of heap (peak {} MB while full).\n",
        mb(f.heap_steady.saturating_sub(f.heap_base) as u64),
        mb(f.heap_peak.saturating_sub(f.heap_base) as u64),
    );
    Ok(())
}

/// Table 3: watch event → reconcile start while the parent writes at a fixed rate.
async fn latency_table(env: &TestEnv, o: &Options) -> anyhow::Result<()> {
    let url = env.url();
    println!(
        "## 3. Watch event → reconcile start ({} ConfigMaps patched round-robin, target {}/s for {} s)\n",
        o.config_maps, o.rate, o.seconds
    );
    println!(
        "| implementation | writes | achieved writes/s | samples | p50 ms | p90 ms | p99 ms | max ms | patch round trip p50 / p99 ms |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for imp in ["ours", "kube-runtime"] {
        env.clear_requests();
        let mut child = Child::spawn(&[s("latency"), s(imp), url.clone()])?;
        child.expect(READY).await?;
        let patched = latency::patch_at_rate(
            env.client(),
            o.config_maps,
            o.rate,
            Duration::from_secs(o.seconds),
        )
        .await;
        // Let the last events arrive before the child stops counting.
        tokio::time::sleep(Duration::from_secs(2)).await;
        child.stop()?;
        let f = child.result().await?;
        let l = f.latency_us.unwrap_or_default();
        println!(
            "| {imp} | {} | {:.0} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} / {:.2} |",
            patched.writes,
            patched.rate,
            f.samples.unwrap_or_default(),
            l[0] / 1e3,
            l[1] / 1e3,
            l[2] / 1e3,
            l[3] / 1e3,
            patched.round_trip_us[0] / 1e3,
            patched.round_trip_us[2] / 1e3,
        );
    }
    println!();
    Ok(())
}

/// Tables 4a (list strategies) and 4b (managedFields transform).
async fn memory_tables(env: &TestEnv, o: &Options) -> anyhow::Result<()> {
    let url = env.url();
    println!(
        "## 4a. List strategies at {} Services (one informer, one handler)\n",
        o.services
    );
    println!(
        "| list strategy | LISTs | WATCHes | objects | sync s | peak heap MB | steady heap MB | steady heap B/object | peak RSS MB | steady RSS MB |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for mode in LIST_MODES {
        let (f, (lists, watches)) = run_child(env, &[s("lists"), s(mode), url.clone()]).await?;
        println!(
            "| {mode} | {lists} | {watches} | {} | {:.2} | {} | {} | {:.0} | {} | {} |",
            f.objects,
            f.sync_s.unwrap_or_default(),
            mb(f.heap_peak as u64),
            mb(f.heap_steady as u64),
            (f.heap_steady.saturating_sub(f.heap_base)) as f64 / f.objects.max(1) as f64,
            mb(f.rss_peak),
            mb(f.rss_steady),
        );
    }
    println!();
    // Over the wire: a server of its own whose Nodes two field managers wrote.
    let managed = TestEnv::builder()
        .history_window(1_000_000)
        .watch_buffer(1_000_000)
        .start()
        .await?;
    let wire_bytes = fixtures::seed_managed_nodes(managed.client(), o.transform_objects).await?;
    println!(
        "## 4b. Heap per cached Node, with and without the managedFields transform ({} Nodes)\n",
        o.transform_objects
    );
    println!(
        "| managedFields | measured | JSON B/object | heap B/object (steady) | peak heap MB | steady RSS MB |"
    );
    println!("|---|---|---|---|---|---|");
    let rows = [
        ("kept (no transform)", "off the wire", "transform", "keep"),
        (
            "dropped (default transform)",
            "off the wire",
            "transform",
            "drop",
        ),
        ("kept (no transform)", "over HTTP", "wire-transform", "keep"),
        (
            "dropped (default transform)",
            "over HTTP",
            "wire-transform",
            "drop",
        ),
    ];
    for (label, how, scenario, mode) in rows {
        let args = if scenario == "transform" {
            vec![s(scenario), s(mode), s(o.transform_objects)]
        } else {
            vec![s(scenario), s(mode), managed.url()]
        };
        let (f, _) = run_child(env, &args).await?;
        println!(
            "| {label} | {how} | {} | {:.0} | {} | {} |",
            f.wire_bytes.unwrap_or(wire_bytes),
            (f.heap_steady.saturating_sub(f.heap_base)) as f64 / f.objects.max(1) as f64,
            mb(f.heap_peak as u64),
            mb(f.rss_steady),
        );
    }
    println!();
    managed.shutdown().await;
    Ok(())
}

/// Table 4c: metadata-only and mixed controllers over large Secrets, on a server of their own.
async fn views_table(o: &Options) -> anyhow::Result<()> {
    let env = TestEnv::builder()
        .history_window(1_000_000)
        .watch_buffer(1_000_000)
        .start()
        .await?;
    let took = fixtures::seed_secrets(env.client(), o.secrets, o.secret_kb).await?;
    println!(
        "## 4c. Metadata-only caching ({} Secrets of {} KB, seeded in {:.1} s)\n",
        o.secrets,
        o.secret_kb,
        took.as_secs_f64()
    );
    println!(
        "| mode | LISTs | WATCHes | objects | sync s | steady heap B/object | peak heap MB | peak RSS MB | steady RSS MB |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for mode in crate::views::MODES {
        let (f, (lists, watches)) = run_child(&env, &[s("views"), s(mode), env.url()]).await?;
        println!(
            "| {mode} | {lists} | {watches} | {} | {:.2} | {:.0} | {} | {} | {} |",
            f.objects,
            f.sync_s.unwrap_or_default(),
            (f.heap_steady.saturating_sub(f.heap_base)) as f64 / f.objects.max(1) as f64,
            mb(f.heap_peak as u64),
            mb(f.rss_peak),
            mb(f.rss_steady),
        );
    }
    println!();
    env.shutdown().await;
    Ok(())
}
