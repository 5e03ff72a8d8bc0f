//! The factory: one informer per (kind, scope), start-up and sync reporting.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;

use super::*;
use crate::informer::{SharedInformerFactory, SyncError};

/// A client whose every request fails, as against an unreachable API server.
fn unreachable_client() -> kube::Client {
    let svc = tower::service_fn(|_req: http::Request<kube::client::Body>| async {
        Err::<http::Response<http_body_util::Full<bytes::Bytes>>, _>(std::io::Error::other(
            "connection refused",
        ))
    });
    kube::Client::new(svc, "default")
}

#[tokio::test]
async fn the_same_kind_and_scope_share_one_informer() {
    let factory = SharedInformerFactory::new(unreachable_client());
    let nodes = factory.informer::<Node>();
    assert!(Arc::ptr_eq(
        &nodes.shared,
        &factory.informer::<Node>().shared
    ));
    // A namespace means nothing for a cluster-scoped kind: still the one Node informer.
    let ns_nodes = factory.informer_for::<Node>(InformerScope::all().in_namespace("x"));
    assert!(Arc::ptr_eq(&nodes.shared, &ns_nodes.shared));

    let services = factory.informer::<Service>();
    let empty_selector = factory.informer_for::<Service>(InformerScope::all().with_labels(""));
    assert!(Arc::ptr_eq(&services.shared, &empty_selector.shared));
    let system = factory.informer_for::<Service>(InformerScope::all().in_namespace("kube-system"));
    assert!(!Arc::ptr_eq(&services.shared, &system.shared));
    let system_again =
        factory.informer_for::<Service>(InformerScope::all().in_namespace("kube-system"));
    assert!(Arc::ptr_eq(&system.shared, &system_again.shared));

    let status = factory.informers_status();
    let kinds: Vec<_> = status
        .iter()
        .map(|s| (s.kind.as_str(), s.scope.to_string()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("Node", "all".to_string()),
            ("Service", "all".to_string()),
            ("Service", "namespace=kube-system".to_string()),
        ]
    );
    assert!(status.iter().all(|s| !s.started && !s.synced));
    // Nothing started yet: nothing to wait for, as client-go's WaitForCacheSync.
    factory
        .wait_for_sync(Duration::from_secs(1))
        .await
        .expect("nothing to wait for");
}

#[tokio::test(start_paused = true)]
async fn wait_for_sync_times_out_naming_the_unsynced_kinds_and_counts_errors() {
    let factory = SharedInformerFactory::new(unreachable_client());
    let nodes = factory.informer::<Node>();
    let shutdown = CancellationToken::new();
    factory.start(shutdown.clone());
    let err = factory
        .wait_for_sync(Duration::from_secs(10))
        .await
        .expect_err("cannot sync");
    match &err {
        SyncError::Timeout { unsynced, .. } => assert_eq!(unsynced, &["Node".to_string()]),
        other => panic!("unexpected {other:?}"),
    }
    assert!(err.to_string().contains("Node"));
    let status = &factory.informers_status()[0];
    assert!(status.started && !status.synced);
    assert!(status.watch_errors >= 2, "retried with backoff: {status:?}");
    assert_eq!(status.watch_errors, nodes.watch_errors());

    // Informers requested after start are started by the next start() only.
    let services = factory.informer::<Service>();
    assert!(!services.is_started());
    factory.start(shutdown.clone());
    assert!(services.is_started());

    shutdown.cancel();
    let err = factory
        .wait_for_sync(Duration::from_secs(10))
        .await
        .expect_err("stopped");
    assert!(matches!(err, SyncError::Stopped { .. }), "{err:?}");
}
