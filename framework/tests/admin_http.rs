//! The admin server over real HTTP/1.1, with a raw TCP client so the bytes on the wire are checked;
//! `/debug/pprof` without a heap profiler and across shutdown.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use controller_manager::admin::{
    AdminError, AdminServer, ConnectionLimits, HealthChecks, Profiling,
};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

struct Reply {
    status: u16,
    headers: String,
    body: String,
}

async fn get(addr: SocketAddr, path: &str) -> Reply {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes).await.unwrap();
    // A profile's body is binary; only the head and text bodies are compared.
    let raw = String::from_utf8_lossy(&bytes);
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    Reply {
        status,
        headers: head.to_ascii_lowercase(),
        body: body.to_string(),
    }
}

struct Running {
    addr: SocketAddr,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<Result<(), AdminError>>,
}

fn start(health: HealthChecks, ready: HealthChecks, live: HealthChecks) -> Running {
    start_with(health, ready, live, ConnectionLimits::default())
}

fn start_with(
    health: HealthChecks,
    ready: HealthChecks,
    live: HealthChecks,
    limits: ConnectionLimits,
) -> Running {
    let mut registry = Registry::default();
    let counter = Counter::<u64>::default();
    registry.register("reconcile", "Reconciles run", counter.clone());
    counter.inc_by(3);
    let server = AdminServer::new(
        "127.0.0.1:0".parse().unwrap(),
        health,
        ready,
        live,
        Arc::new(parking_lot::Mutex::new(registry)),
    )
    .unwrap()
    .with_connection_limits(limits);
    let running = serve(server);
    assert_ne!(running.addr.port(), 0);
    running
}

/// Serves `server` until the returned handle's `shutdown` is cancelled.
fn serve(server: AdminServer) -> Running {
    let addr = server.local_addr();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(server.serve(shutdown.clone()));
    Running {
        addr,
        shutdown,
        task,
    }
}

#[tokio::test]
async fn healthz_is_plain_ok_when_everything_passes() {
    let s = start(
        HealthChecks::new(),
        HealthChecks::new(),
        HealthChecks::new(),
    );
    let r = get(s.addr, "/healthz").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body, "ok");
    assert!(
        r.headers
            .contains("content-type: text/plain; charset=utf-8"),
        "{}",
        r.headers
    );
    assert!(r.headers.contains("x-content-type-options: nosniff"));
    let r = get(s.addr, "/healthz?verbose").await;
    assert_eq!(r.body, "[+]ping ok\nhealthz check passed\n");
    s.shutdown.cancel();
    s.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_failing_check_turns_healthz_500_and_can_be_excluded() {
    let health = HealthChecks::new();
    let broken = Arc::new(AtomicBool::new(true));
    let flag = broken.clone();
    health.add_check("leaderElection", || Ok(()));
    health.add_check("service-lb-controller", move || {
        if flag.load(Ordering::SeqCst) {
            Err("queue stalled".into())
        } else {
            Ok(())
        }
    });
    let s = start(health, HealthChecks::new(), HealthChecks::new());

    let r = get(s.addr, "/healthz").await;
    assert_eq!(r.status, 500);
    assert_eq!(
        r.body,
        "[+]leaderElection ok\n[-]service-lb-controller failed: reason withheld\nhealthz check failed\n"
    );

    let r = get(s.addr, "/healthz?exclude=service-lb-controller").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body, "ok");

    let r = get(s.addr, "/healthz/service-lb-controller").await;
    assert_eq!(r.status, 500);
    assert_eq!(r.body, "internal server error: queue stalled\n");
    let r = get(s.addr, "/healthz/leaderElection").await;
    assert_eq!((r.status, r.body.as_str()), (200, "ok"));
    let r = get(s.addr, "/healthz/nope").await;
    assert_eq!(r.status, 404);

    broken.store(false, Ordering::SeqCst);
    let r = get(s.addr, "/healthz").await;
    assert_eq!((r.status, r.body.as_str()), (200, "ok"));
    s.shutdown.cancel();
    s.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn readyz_and_livez_have_their_own_checks_added_after_start() {
    let ready = HealthChecks::new();
    let s = start(HealthChecks::new(), ready.clone(), HealthChecks::new());
    assert_eq!(get(s.addr, "/readyz").await.status, 200);
    ready.add_async_check("informer-sync", || async { Err("not synced".to_string()) });
    let r = get(s.addr, "/readyz?verbose").await;
    assert_eq!(r.status, 500);
    assert_eq!(
        r.body,
        "[-]informer-sync failed: reason withheld\nreadyz check failed\n"
    );
    let r = get(s.addr, "/livez?verbose").await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (200, "[+]ping ok\nlivez check passed\n")
    );
    s.shutdown.cancel();
    s.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn metrics_are_openmetrics_text() {
    let s = start(
        HealthChecks::new(),
        HealthChecks::new(),
        HealthChecks::new(),
    );
    let r = get(s.addr, "/metrics").await;
    assert_eq!(r.status, 200);
    assert!(
        r.headers
            .contains("content-type: application/openmetrics-text; version=1.0.0; charset=utf-8"),
        "{}",
        r.headers
    );
    assert!(r.body.contains("reconcile_total 3"), "{}", r.body);
    assert!(r.body.ends_with("# EOF\n"), "{}", r.body);
    s.shutdown.cancel();
    s.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn binding_a_taken_port_says_what_to_change() {
    let s = start(
        HealthChecks::new(),
        HealthChecks::new(),
        HealthChecks::new(),
    );
    let err = AdminServer::new(
        s.addr,
        HealthChecks::new(),
        HealthChecks::new(),
        HealthChecks::new(),
        Arc::new(parking_lot::Mutex::new(Registry::default())),
    )
    .unwrap_err();
    assert!(matches!(err, AdminError::Bind { .. }));
    assert!(
        err.to_string()
            .contains("choose another bind address or port")
    );
    s.shutdown.cancel();
    s.task.await.unwrap().unwrap();
}

/// A server with short limits, to see them act.
fn limited(read_header_timeout_ms: u64, idle_timeout_ms: u64, max_connections: usize) -> Running {
    let checks = HealthChecks::new;
    start_with(
        checks(),
        checks(),
        checks(),
        ConnectionLimits {
            read_header_timeout: std::time::Duration::from_millis(read_header_timeout_ms),
            idle_timeout: std::time::Duration::from_millis(idle_timeout_ms),
            max_connections,
        },
    )
}

/// Reads until the server closes the connection; fails the test if it has not within 10 s.
async fn closed_by_server(stream: &mut tokio::net::TcpStream) -> Vec<u8> {
    let mut seen = Vec::new();
    let read = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        let mut buf = [0u8; 1024];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(read.is_ok(), "the server kept the connection open");
    seen
}

#[tokio::test]
async fn a_client_that_sends_its_headers_a_byte_at_a_time_is_cut_off() {
    let s = limited(300, 60_000, 16);
    let mut slow = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    let dripping = async {
        for byte in b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: "
            .iter()
            .cycle()
        {
            if slow.write_all(&[*byte]).await.is_err() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    };
    let cut = tokio::time::timeout(std::time::Duration::from_secs(10), dripping).await;
    assert!(
        cut.is_ok(),
        "still connected after 10 s of dripping headers"
    );
    // Another client is served as usual.
    assert_eq!(get(s.addr, "/healthz").await.status, 200);
    s.shutdown.cancel();
    s.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed() {
    let s = limited(60_000, 300, 16);
    let mut stream = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    let seen = closed_by_server(&mut stream).await;
    let answer = String::from_utf8_lossy(&seen);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    s.shutdown.cancel();
    s.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn connections_past_the_cap_wait_until_one_is_free() {
    let s = limited(60_000, 60_000, 2);
    let first = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    let second = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    let third = tokio::spawn(get(s.addr, "/healthz"));
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(!third.is_finished(), "served past the cap of 2");
    drop(first);
    let answer = tokio::time::timeout(std::time::Duration::from_secs(10), third)
        .await
        .expect("served once a slot is free")
        .unwrap();
    assert_eq!(answer.status, 200);
    drop(second);
    s.shutdown.cancel();
    s.task.await.unwrap().unwrap();
}

/// An admin server serving `/debug/pprof` with no heap profiler plugged in.
fn profiling() -> Running {
    let server = AdminServer::new(
        "127.0.0.1:0".parse().unwrap(),
        HealthChecks::new(),
        HealthChecks::new(),
        HealthChecks::new(),
        Arc::default(),
    )
    .unwrap()
    .with_profiling(Profiling {
        enabled: true,
        heap: None,
    });
    serve(server)
}

#[tokio::test]
async fn without_a_heap_profiler_the_heap_profile_is_501_and_says_why() {
    let s = profiling();
    let heap = get(s.addr, "/debug/pprof/heap").await;
    assert_eq!(heap.status, 501);
    assert!(heap.body.starts_with("no heap profiler:"), "{}", heap.body);
    let index = get(s.addr, "/debug/pprof/").await;
    assert!(index.body.contains("heap: not available"), "{}", index.body);
    s.shutdown.cancel();
    s.task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_cuts_a_running_cpu_profile_short() {
    let s = profiling();
    let request = "GET /debug/pprof/profile?seconds=300 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    let open_long = || async {
        let mut stream = tokio::net::TcpStream::connect(s.addr).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        stream
    };
    let mut stream = open_long().await;
    // The long profile holds the profiler (a second one is refused) before the server is told
    // to stop. A probe that got in first makes the long request's own answer a 503: send it again.
    let busy = loop {
        let r = get(s.addr, "/debug/pprof/profile?seconds=1").await;
        if r.status == 503 {
            break r;
        }
        let mut first = [0u8; 1];
        let answered = tokio::time::timeout(
            std::time::Duration::from_millis(200),
            stream.read(&mut first),
        )
        .await;
        if answered.is_ok() {
            stream = open_long().await;
        }
    };
    assert!(busy.headers.contains("x-go-pprof: 1"), "{}", busy.headers);
    s.shutdown.cancel();
    let mut raw = Vec::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(20),
        stream.read_to_end(&mut raw),
    )
    .await
    .expect("the profile ends with the server, not after 300 s")
    .unwrap();
    let head = String::from_utf8_lossy(&raw[..raw.len().min(200)]).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(
        head.contains("content-type: application/octet-stream"),
        "{head}"
    );
    s.task.await.unwrap().unwrap();
}
