//! Watch connections that never read (issue 36 item 3): 2,000 of them and 20 ConfigMaps of
//! 100 KB took kube-testenv to 2 GB and an abort, and memory stayed held after they closed. Each
//! watcher now has a bounded backlog of shared events; one that falls behind is closed as
//! kube-apiserver closes it (the stream ends, no ERROR event; the client resumes), other clients
//! are served meanwhile, and the memory comes back when the watchers go. The binary's allocator
//! counts what it holds, so the bounds below are heap bytes, not RSS.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use kube_testenv::TestEnv;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

static HELD: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, counting what the binary holds and its high-water mark.
struct Counting;

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let now = HELD.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(now, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        HELD.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const MIB: usize = 1 << 20;

fn rss_mib() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<usize>().ok());
    kb.unwrap_or(0) / 1024
}

/// A watch on ConfigMaps in `default` from the current resourceVersion, over a connection with
/// a 4 KiB receive buffer that is never read.
async fn stalled_watch(env: &TestEnv) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut conn = socket.connect(env.addr()).await.unwrap();
    let rv = env.resource_version();
    let request = format!(
        "GET /api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv} HTTP/1.1\r\n\
         Host: kube\r\nAuthorization: Bearer {}\r\n\r\n",
        env.admin_token()
    );
    conn.write_all(request.as_bytes()).await.unwrap();
    conn
}

async fn configmap(env: &TestEnv, name: &str, kib: usize) {
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    let cm = json!({"metadata": {"name": name}, "data": {"blob": "x".repeat(kib << 10)}});
    let cm: ConfigMap = serde_json::from_value(cm).unwrap();
    let pp = PostParams::default();
    let created = tokio::time::timeout(Duration::from_secs(60), api.create(&pp, &cm));
    created.await.expect("a write waited a minute").unwrap();
}

async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..1200 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

/// The probe's repro, then enough more writes that every stalled watcher falls behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_stalled_watchers_stay_bounded_and_others_are_served() {
    let env = TestEnv::start().await.unwrap();
    let start = HELD.load(Ordering::Relaxed);
    PEAK.store(start, Ordering::Relaxed);
    let mut stalled = Vec::new();
    for _ in 0..2_000 {
        stalled.push(stalled_watch(&env).await);
    }
    wait_for("2,000 open watches", || env.open_watches() == 2_000).await;
    // A client reading as it should, all along.
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    let rv = env.resource_version().to_string();
    let mut healthy = api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    let seen = std::sync::Arc::new(AtomicUsize::new(0));
    let reader = {
        let seen = seen.clone();
        tokio::spawn(async move {
            while let Ok(Some(event)) = healthy.try_next().await {
                let WatchEvent::Added(cm) = event else {
                    panic!("{event:?}")
                };
                let i = seen.fetch_add(1, Ordering::SeqCst);
                assert_eq!(cm.metadata.name.unwrap(), format!("cm-{i}"));
            }
        })
    };
    for i in 0..20 {
        configmap(&env, &format!("cm-{i}"), 100).await;
    }
    wait_for("the healthy watcher's 20 events", || {
        seen.load(Ordering::SeqCst) == 20
    })
    .await;
    let repro = PEAK.load(Ordering::Relaxed) - start;
    eprintln!(
        "2,000 stalled watchers, 20 x 100 KiB: heap peak +{} MiB, RSS {} MiB",
        repro / MIB,
        rss_mib()
    );
    assert!(repro < 256 * MIB, "heap peak +{} MiB", repro / MIB);
    // 200 more: 20 MB of events, past the 16 MiB backlog and the sockets' buffers: every stalled
    // watcher is closed; the healthy one keeps up.
    for i in 20..220 {
        configmap(&env, &format!("cm-{i}"), 100).await;
    }
    wait_for("the healthy watcher's 220 events", || {
        seen.load(Ordering::SeqCst) == 220
    })
    .await;
    wait_for("the stalled watches closed", || env.open_watches() == 1).await;
    let behind = PEAK.load(Ordering::Relaxed) - start;
    eprintln!(
        "... and 200 more: heap peak +{} MiB, RSS {} MiB",
        behind / MIB,
        rss_mib()
    );
    assert!(behind < 256 * MIB, "heap peak +{} MiB", behind / MIB);
    reader.abort();
    drop(stalled);
    // What stays is the store's: 220 objects of 100 KiB, each held as stored (shared with its
    // event in the history) and as that event's watch frame; then nothing once the server goes.
    let bound = 128 * MIB;
    let mut after = 0;
    for _ in 0..1200 {
        after = HELD.load(Ordering::Relaxed).saturating_sub(start);
        if after < bound {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!(
        "after the clients closed: heap +{} MiB, RSS {} MiB",
        after / MIB,
        rss_mib()
    );
    assert!(after < bound, "heap +{} MiB held", after / MIB);
    drop(env);
    let mut left = 0;
    for _ in 0..200 {
        left = HELD.load(Ordering::Relaxed).saturating_sub(start);
        if left < 8 * MIB {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!("after the server stopped: heap +{} MiB", left / MIB);
    assert!(left < 8 * MIB, "heap +{} MiB held", left / MIB);
}

/// A watcher past its backlog is closed as kube-apiserver closes it: the stream ends with no
/// ERROR event, and a watch from the last resourceVersion it got resumes.
#[tokio::test]
async fn a_watcher_that_falls_behind_is_closed_and_resumes() {
    let env = TestEnv::builder()
        .watch_buffer_bytes(256 << 10)
        .start()
        .await
        .unwrap();
    let mut conn = stalled_watch(&env).await;
    wait_for("the watch", || env.open_watches() == 1).await;
    // 6 MB: past the backlog, and past what the sockets' buffers take on loopback (4 MiB).
    for i in 0..60 {
        configmap(&env, &format!("cm-{i}"), 100).await;
    }
    wait_for("the watch closed", || env.open_watches() == 0).await;
    // The response ends (the connection stays open, as HTTP/1.1 keeps it).
    let mut got = Vec::new();
    let read = async {
        while !got.ends_with(b"\r\n0\r\n\r\n") {
            let mut buf = [0u8; 64 << 10];
            let n = conn.read(&mut buf).await.unwrap();
            assert!(n > 0, "the connection closed before the response ended");
            got.extend_from_slice(&buf[..n]);
        }
    };
    tokio::time::timeout(Duration::from_secs(60), read)
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&got);
    assert!(
        text.starts_with("HTTP/1.1 200 OK"),
        "{}",
        &text[..200.min(text.len())]
    );
    assert!(!text.contains(r#""type":"ERROR""#));
    let events: Vec<&str> = text.matches(r#"{"type":"ADDED""#).collect();
    assert!(
        !events.is_empty() && events.len() < 60,
        "{} events",
        events.len()
    );
    // The last resourceVersion it saw, and the watch a client opens from it.
    let last = text
        .rmatch_indices(r#""resourceVersion":""#)
        .next()
        .unwrap()
        .0;
    let rv: String = text[last + 19..]
        .chars()
        .take_while(|c| *c != '"')
        .collect();
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    let rest: Vec<_> = api
        .watch(&WatchParams::default().timeout(1), &rv)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(events.len() + rest.len(), 60, "resumed where it stopped");
}
