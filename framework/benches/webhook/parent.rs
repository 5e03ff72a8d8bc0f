//! The parent: kube-testenv with the seeded ConfigMaps, the certificate pair, both servers as
//! pinned children, the runs in turn, and the table.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use bytes::Bytes;
use controller_manager::serving::SelfSignedPair;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, PostParams};
use kube_testenv::TestEnv;
use serde_json::json;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_rustls::rustls::pki_types::CertificateDer;
use tokio_rustls::rustls::pki_types::pem::PemObject;

use crate::load::{self, Outcome, Proto, Run, Target};
use crate::rule::{NAMESPACE, WIDTH};

/// The bench's settings.
pub struct Options {
    objects: u64,
    seconds: u64,
    rate: f64,
    connections: usize,
    rounds: usize,
}

impl Options {
    pub fn parse(args: &[String]) -> anyhow::Result<Self> {
        let mut o = Options {
            objects: 1_000,
            seconds: 10,
            rate: 1_000.0,
            connections: 16,
            rounds: 2,
        };
        let mut args = args.iter();
        while let Some(flag) = args.next() {
            let mut value = || {
                args.next()
                    .ok_or_else(|| anyhow::anyhow!("{flag} needs a value"))
            };
            match flag.as_str() {
                "--objects" => o.objects = value()?.parse()?,
                "--seconds" => o.seconds = value()?.parse()?,
                "--rate" => o.rate = value()?.parse()?,
                "--connections" => o.connections = value()?.parse()?,
                "--rounds" => o.rounds = value()?.parse()?,
                other => anyhow::bail!("unknown argument {other}"),
            }
        }
        Ok(o)
    }
}

/// Pins this process (and every thread it starts later) to `cpu`.
pub fn pin_to_cpu(cpu: usize) -> anyhow::Result<()> {
    // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET and sched_setaffinity only read and
    // write the set we own.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            anyhow::bail!(
                "cannot pin to CPU {cpu}: {}",
                std::io::Error::last_os_error()
            );
        }
    }
    Ok(())
}

/// A server child pinned to core 0.
struct Server {
    name: &'static str,
    process: std::process::Child,
    lines: UnboundedReceiver<String>,
    target: Target,
}

impl Server {
    fn spawn(name: &'static str, args: &[String], target: Target) -> anyhow::Result<Self> {
        let mut process = Command::new("taskset")
            .args(["-c", "0"])
            .arg(std::env::current_exe()?)
            .args(["--child", name])
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
        Ok(Server {
            name,
            process,
            lines,
            target,
        })
    }

    async fn ready(&mut self) -> anyhow::Result<()> {
        while let Some(line) = self.lines.recv().await {
            if line == "READY" {
                return Ok(());
            }
        }
        anyhow::bail!("{} exited before it was ready", self.name)
    }

    fn pid(&self) -> u32 {
        self.process.id()
    }

    fn stop(mut self) -> anyhow::Result<()> {
        if let Some(mut stdin) = self.process.stdin.take() {
            let _ = writeln!(stdin, "STOP");
        }
        self.process.wait()?;
        Ok(())
    }
}

/// `VmRSS` of `pid` in bytes; 0 if unreadable.
fn rss(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// User + system CPU seconds of `pid` (and its threads) so far.
fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (ticks(11) + ticks(12)) as f64 / 100.0
}

/// The AdmissionReview kube-apiserver sends for a CREATE of `name` with `first..=last`, shaped
/// as the captured `wh-validating-allow-create` review.
fn review(name: &str, first: u64, last: u64) -> Bytes {
    let object = json!({
        "kind": "ConfigMap", "apiVersion": "v1",
        "metadata": {
            "name": name, "namespace": NAMESPACE,
            "uid": "365a2519-448d-4a7a-bbbb-c1db37ef7dbf",
            "creationTimestamp": "2026-12-03T07:56:38Z",
            "labels": {"app": "bench"},
            "managedFields": [{
                "manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "v1",
                "time": "2026-12-03T07:56:38Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:data": {".": {}, "f:first": {}, "f:last": {}},
                             "f:metadata": {"f:labels": {".": {}, "f:app": {}}}}
            }]
        },
        "data": {"first": first.to_string(), "last": last.to_string()}
    });
    let gvk = json!({"group": "", "version": "v1", "kind": "ConfigMap"});
    let gvr = json!({"group": "", "version": "v1", "resource": "configmaps"});
    let body = json!({
        "kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": "6346a947-50bd-46ed-8fc7-590e8346f235",
            "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
            "name": name, "namespace": NAMESPACE, "operation": "CREATE",
            "userInfo": {"username": "admin", "uid": "admin-uid",
                         "groups": ["system:masters", "system:authenticated"]},
            "object": object, "oldObject": null, "dryRun": false,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1",
                        "fieldManager": "kubectl-client-side-apply"}
        }
    });
    Bytes::from(body.to_string())
}

/// Creates the namespace and `n` ConfigMaps with disjoint ranges, 16 creates in flight.
async fn seed(env: &TestEnv, n: u64) -> anyhow::Result<()> {
    let namespaces: Api<Namespace> = Api::all(env.client());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?;
    namespaces.create(&PostParams::default(), &ns).await?;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), NAMESPACE);
    let results: Vec<_> = futures::stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            async move {
                let cm: ConfigMap = serde_json::from_value(json!({
                    "metadata": {"name": format!("pool-{i:05}")},
                    "data": {"first": (i * WIDTH).to_string(),
                             "last": (i * WIDTH + WIDTH - 1).to_string()}
                }))?;
                api.create(&PostParams::default(), &cm).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    results.into_iter().collect()
}

/// A free loopback port.
fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// One row of the table.
struct Row {
    scenario: String,
    server: &'static str,
    round: usize,
    outcome: Outcome,
    rss: u64,
    cpu: f64,
}

/// Runs `run` against `server`, sampling its RSS every 100 ms and its CPU time around it.
async fn measure(server: &Server, run: Run) -> anyhow::Result<(Outcome, u64, f64)> {
    let pid = server.pid();
    let cpu_before = cpu_seconds(pid);
    let sampling = tokio_util::sync::CancellationToken::new();
    let stop = sampling.clone();
    let sampler = tokio::spawn(async move {
        let mut peak = 0;
        while !stop.is_cancelled() {
            peak = peak.max(rss(pid));
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        peak
    });
    let outcome = load::drive(&server.target, run).await?;
    sampling.cancel();
    let peak = sampler.await?;
    let cpu = cpu_seconds(pid) - cpu_before;
    Ok((outcome, peak, cpu))
}

/// Runs the bench and prints its tables.
pub async fn run(o: Options) -> anyhow::Result<()> {
    let env = TestEnv::start().await?;
    seed(&env, o.objects).await?;
    let dir = std::env::temp_dir().join(format!("webhook-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let pair = SelfSignedPair::generate()?;
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    pair.write(&cert, &key)?;
    let chain =
        CertificateDer::pem_slice_iter(pair.cert_pem.as_bytes()).collect::<Result<Vec<_>, _>>()?;
    let ca = chain
        .last()
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("no CA in the pair"))?;
    let next = o.objects * WIDTH;
    let allowed = review("candidate", next, next + WIDTH - 1);
    let refused = review("candidate", next - 3, next + 3);

    let mut servers = Vec::new();
    for name in ["ours", "axum"] {
        let port = free_port()?;
        let target = Target {
            addr: format!("127.0.0.1:{port}").parse()?,
            ca: ca.clone(),
            body: allowed.clone(),
        };
        let args = [
            env.url(),
            cert.display().to_string(),
            key.display().to_string(),
            port.to_string(),
        ];
        let mut server = Server::spawn(name, &args, target)?;
        server.ready().await?;
        let (status, answer) = load::once(&server.target, refused.clone()).await?;
        anyhow::ensure!(
            status == 200 && answer.contains("\"allowed\":false") && answer.contains("overlaps"),
            "{name} did not refuse an overlapping ConfigMap: {status} {answer}"
        );
        servers.push(server);
    }
    let idle: Vec<u64> = servers.iter().map(|s| rss(s.pid())).collect();

    let duration = Duration::from_secs(o.seconds);
    let c = o.connections;
    let scenarios = [
        (
            format!("HTTP/1.1, {} req/s fixed, {c} connections", o.rate),
            Run {
                proto: Proto::Http1,
                concurrency: c,
                rate: Some(o.rate),
                duration,
            },
        ),
        (
            format!("HTTP/1.1, max, {c} connections"),
            Run {
                proto: Proto::Http1,
                concurrency: c,
                rate: None,
                duration,
            },
        ),
        (
            format!("HTTP/2, max, 1 connection, {c} streams"),
            Run {
                proto: Proto::Http2,
                concurrency: c,
                rate: None,
                duration,
            },
        ),
    ];
    let mut rows = Vec::new();
    let mut tls = Vec::new();
    for (scenario, run) in &scenarios {
        for round in 0..o.rounds {
            // Alternate who goes first, so drift on the shared machine falls on both.
            let order: Vec<usize> = if round % 2 == 0 {
                vec![0, 1]
            } else {
                vec![1, 0]
            };
            for i in order {
                let server = &servers[i];
                let (outcome, rss, cpu) = measure(server, *run).await?;
                eprintln!(
                    "{scenario} {} round {}: p50 {:?} p99 {:?} {:.0}/s failed {}",
                    server.name,
                    round + 1,
                    outcome.percentile(0.50),
                    outcome.percentile(0.99),
                    outcome.per_second(),
                    outcome.failed
                );
                tls.push(format!("{} {:?}: {}", server.name, run.proto, outcome.tls));
                rows.push(Row {
                    scenario: scenario.clone(),
                    server: server.name,
                    round: round + 1,
                    outcome,
                    rss,
                    cpu,
                });
            }
        }
    }
    for server in servers {
        server.stop()?;
    }
    let _ = std::fs::remove_dir_all(&dir);

    tls.sort();
    tls.dedup();
    println!(
        "{} ConfigMaps cached; each review is a CREATE that overlaps none (a full scan); {} s per run after a 1 s warm-up; servers on core 0, load on core 1.\n",
        o.objects, o.seconds
    );
    println!("TLS: {}\n", tls.join("; "));
    println!(
        "Idle RSS after sync: ours {:.1} MiB, axum {:.1} MiB.\n",
        idle[0] as f64 / 1048576.0,
        idle[1] as f64 / 1048576.0
    );
    println!(
        "| scenario | server | round | p50 ms | p99 ms | reviews/s | failed | server CPU µs/review | peak RSS MiB |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        let n = r.outcome.latencies.len().max(1) as f64;
        println!(
            "| {} | {} | {} | {:.3} | {:.3} | {:.0} | {} | {:.0} | {:.1} |",
            r.scenario,
            r.server,
            r.round,
            r.outcome.percentile(0.50).as_secs_f64() * 1e3,
            r.outcome.percentile(0.99).as_secs_f64() * 1e3,
            r.outcome.per_second(),
            r.outcome.failed,
            r.cpu / n * 1e6,
            r.rss as f64 / 1048576.0
        );
    }
    Ok(())
}
