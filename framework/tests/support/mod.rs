//! Helpers shared by the manager's end-to-end test targets.
#![allow(dead_code)] // each test binary uses a different subset

use std::fmt::Debug;
use std::net::SocketAddr;
use std::time::Duration;

use controller_manager::testing::Requests;
use kube_testenv::TestEnv;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Cancels `stop` and asserts that the manager task `run` then returns `Ok` within `wait`.
pub async fn shut_down<E: Debug>(
    stop: &CancellationToken,
    run: JoinHandle<Result<(), E>>,
    wait: Duration,
) {
    stop.cancel();
    let stopped = tokio::time::timeout(wait, run).await;
    stopped.unwrap().unwrap().unwrap();
}

/// How many `verb` requests on `resource` the API server has served.
pub fn count(env: &TestEnv, verb: &str, resource: &str) -> usize {
    Requests::of(env).verb(verb).resource(resource).count()
}

/// One plain-HTTP GET of the admin server: status and body, `None` while it does not answer.
pub async fn get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut raw = String::new();
    stream.read_to_string(&mut raw).await.ok()?;
    let (head, body) = raw.split_once("\r\n\r\n")?;
    Some((head.split(' ').nth(1)?.parse().ok()?, body.to_string()))
}

/// Polls an endpoint until `pred` holds on its reply (the admin server has no future to await).
pub async fn until(
    addr: SocketAddr,
    path: &str,
    pred: impl Fn(u16, &str) -> bool,
) -> (u16, String) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some((status, body)) = get(addr, path).await
            && pred(status, &body)
        {
            return (status, body);
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out on {path}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
