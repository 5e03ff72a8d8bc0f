//! Watch reconnection and list backoff of the shared informer, deterministically on tokio's
//! paused clock (issue 9): the API server is an in-process stub (no sockets, so virtual time
//! never races real I/O) that fails LISTs with 500 or 429 and cuts WATCHes, and every request's
//! virtual time is recorded.
//!
//! client-go's reflector backs off 800 ms → 30 s on errors (`TestReflectorListAndWatchWithErrors`,
//! `TestBackoffOnTooManyRequests`) and treats a watch that closes at once without events as an
//! error ("very short watch"); the informer must not hammer the API server either way.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use controller_manager::informer::SharedInformerFactory;
use http_body_util::{BodyExt, Full, StreamBody};
use k8s_openapi::api::core::v1::Node;
use parking_lot::Mutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

#[derive(Default)]
struct Stub {
    /// Virtual times of LIST and WATCH requests.
    lists: Vec<Instant>,
    watches: Vec<Instant>,
    /// LISTs still to fail, and with which status.
    fail_lists: usize,
    fail_status: u16,
    /// Whether WATCHes end at once (a proxy cutting every stream) or stay open.
    cut_watches: bool,
}

type Body = http_body_util::combinators::UnsyncBoxBody<Bytes, Infallible>;

fn full(status: u16, json: &str) -> http::Response<Body> {
    http::Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(json.to_string())).boxed_unsync())
        .expect("response")
}

fn client(stub: Arc<Mutex<Stub>>) -> kube::Client {
    let svc = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let stub = stub.clone();
        async move {
            let watch = req
                .uri()
                .query()
                .is_some_and(|q| q.contains("watch=true") || q.contains("watch=1"));
            let mut s = stub.lock();
            let resp = if watch {
                s.watches.push(Instant::now());
                if s.cut_watches {
                    full(200, "")
                } else {
                    let pending =
                        futures::stream::pending::<Result<hyper::body::Frame<Bytes>, Infallible>>();
                    http::Response::builder()
                        .status(200)
                        .header("content-type", "application/json")
                        .body(StreamBody::new(pending).boxed_unsync())
                        .expect("response")
                }
            } else {
                s.lists.push(Instant::now());
                if s.fail_lists > 0 {
                    s.fail_lists -= 1;
                    let code = s.fail_status;
                    full(
                        code,
                        &format!(
                            r#"{{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected","code":{code}}}"#
                        ),
                    )
                } else {
                    full(
                        200,
                        r#"{"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[]}"#,
                    )
                }
            };
            Ok::<_, Infallible>(resp)
        }
    });
    kube::Client::new(svc, "default")
}

fn gaps(times: &[Instant]) -> Vec<Duration> {
    times.windows(2).map(|w| w[1] - w[0]).collect()
}

/// A factory with a Node informer on `stub`, synced within `within` (else the test fails); it runs until the
/// token is cancelled.
async fn synced_nodes(
    stub: &Arc<Mutex<Stub>>,
    within: Duration,
) -> (SharedInformerFactory, CancellationToken) {
    // The stub serves LIST + WATCH only (no streaming lists).
    let factory = SharedInformerFactory::new(client(stub.clone())).with_watch_list(false);
    let _nodes = factory.informer::<Node>();
    let stop = CancellationToken::new();
    factory.start(stop.clone());
    let synced = factory.wait_for_sync(within).await;
    synced.expect("the informer syncs");
    (factory, stop)
}

async fn failing_lists_back_off(status: u16) {
    let stub = Arc::new(Mutex::new(Stub {
        fail_lists: 6,
        fail_status: status,
        ..Stub::default()
    }));
    let started = Instant::now();
    let (_factory, stop) = synced_nodes(&stub, Duration::from_secs(600)).await;
    let took = started.elapsed();
    let lists = stub.lock().lists.clone();
    println!("watch_backoff: {status} gaps {:?}", gaps(&lists));
    assert_eq!(lists.len(), 7, "6 failures then success");
    // kube-runtime's default backoff: 800 ms doubling to 30 s, with jitter up to 100 %.
    for (i, gap) in gaps(&lists).iter().enumerate() {
        let base = Duration::from_millis(800 * (1 << i)).min(Duration::from_secs(30));
        assert!(
            *gap >= base && *gap <= base * 2,
            "{status}: retry {i} after {gap:?}, want {base:?}..{:?}",
            base * 2
        );
    }
    println!(
        "watch_backoff: {status} x6 then ok: synced after {took:?}, gaps {:?}",
        gaps(&lists)
    );
    stop.cancel();
}

#[tokio::test(start_paused = true)]
async fn failing_lists_are_retried_with_exponential_backoff_on_500() {
    failing_lists_back_off(500).await;
}

#[tokio::test(start_paused = true)]
async fn failing_lists_are_retried_with_exponential_backoff_on_429() {
    failing_lists_back_off(429).await;
}

#[tokio::test(start_paused = true)]
async fn an_open_watch_is_not_reconnected() {
    let stub = Arc::new(Mutex::new(Stub::default()));
    let (_factory, stop) = synced_nodes(&stub, Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_secs(60)).await;
    let s = stub.lock();
    assert_eq!((s.lists.len(), s.watches.len()), (1, 1));
    drop(s);
    stop.cancel();
}

#[tokio::test(start_paused = true)]
async fn watches_cut_at_once_do_not_hot_loop_the_api_server() {
    let stub = Arc::new(Mutex::new(Stub {
        cut_watches: true,
        ..Stub::default()
    }));
    let (_factory, stop) = synced_nodes(&stub, Duration::from_secs(10)).await;
    // Step the clock by hand: a hot loop never lets the runtime idle, so auto-advance would
    // never fire and the test would hang instead of failing.
    for _ in 0..600 {
        tokio::time::advance(Duration::from_millis(100)).await;
        tokio::task::yield_now().await;
        if stub.lock().watches.len() > 1000 {
            break;
        }
    }
    let s = stub.lock();
    println!(
        "watch_backoff: watches cut at once: {} WATCH requests in 60 s virtual, gaps {:?}",
        s.watches.len(),
        gaps(&s.watches).iter().take(10).collect::<Vec<_>>()
    );
    assert!(
        s.watches.len() <= 60,
        "{} re-watches in a minute",
        s.watches.len()
    );
    drop(s);
    stop.cancel();
}
