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

#[tokio::test]
async fn every_view_of_a_kind_is_one_informer_watching_what_its_users_need() {
    use kube::core::{DynamicObject, PartialObjectMeta};

    use crate::informer::dynamic_type;

    let factory = SharedInformerFactory::new(unreachable_client());
    // Services: one controller wants metadata, another the whole objects, a third a dynamic view.
    let meta = factory.informer::<PartialObjectMeta<Service>>();
    let full = factory.informer::<Service>();
    let dynamic = factory.informer_with::<DynamicObject>(
        &dynamic_type("v1/Service").expect("valid"),
        InformerScope::all(),
    );
    assert!(Arc::ptr_eq(&meta.shared, &full.shared));
    assert!(Arc::ptr_eq(&meta.shared, &dynamic.shared));
    // Nodes: metadata only.
    let node_meta = factory.informer::<PartialObjectMeta<Node>>();
    let shutdown = CancellationToken::new();
    factory.start(shutdown.clone());
    let watches: Vec<_> = factory
        .informers_status()
        .into_iter()
        .map(|s| (s.kind, s.metadata_only))
        .collect();
    assert_eq!(
        watches,
        [
            ("Service".to_string(), Some(false)),
            ("Node".to_string(), Some(true))
        ]
    );
    // Late views: another metadata view shares the running informer; whole Nodes cannot be
    // served by a metadata watch, so they get one of their own.
    assert!(Arc::ptr_eq(
        &node_meta.shared,
        &factory.informer::<PartialObjectMeta<Node>>().shared
    ));
    let late_full = factory.informer::<Node>();
    assert!(!Arc::ptr_eq(&node_meta.shared, &late_full.shared));
    assert!(Arc::ptr_eq(
        &late_full.shared,
        &factory.informer::<Node>().shared
    ));
    shutdown.cancel();
}

#[tokio::test]
async fn cache_options_restrict_every_informer_of_their_kind() {
    use crate::informer::{CacheOptions, KindOptions};

    let options = CacheOptions::new()
        .kind::<Service>(KindOptions::new().labels("team=a").namespaces(["x", "y"]))
        .kind::<Node>(KindOptions::new().uncached());
    let factory = SharedInformerFactory::new(unreachable_client()).with_cache_options(options);
    let all = factory.informer::<Service>();
    assert_eq!(all.shared.scope.label_selector.as_deref(), Some("team=a"));
    let narrowed = factory.informer_for::<Service>(InformerScope::all().with_labels("app=web"));
    assert_eq!(
        narrowed.shared.scope.label_selector.as_deref(),
        Some("team=a,app=web")
    );
    let outside = factory.informer_for::<Service>(InformerScope::all().in_namespace("z"));
    // Uncached reads open no informer.
    assert!(!factory.reader::<Node>().is_cached());
    assert!(factory.reader::<Service>().is_cached());
    assert_eq!(factory.informers_status().len(), 3);

    let shutdown = CancellationToken::new();
    factory.start(shutdown.clone());
    let err = factory
        .wait_for_sync(Duration::from_secs(1))
        .await
        .expect_err("namespace z is not cached");
    let message = err.to_string();
    assert!(
        message.contains(
            "namespace z is not among the namespaces the process caches Service in (x, y)"
        ),
        "{message}"
    );
    assert!(outside.shared.sync_state.borrow().failed.is_some());
    shutdown.cancel();
}

#[tokio::test]
async fn two_full_views_with_transforms_of_their_own_cannot_share_a_store() {
    use kube::core::DynamicObject;

    use crate::informer::dynamic_type;

    let factory = SharedInformerFactory::new(unreachable_client());
    factory
        .informer::<Service>()
        .set_transform(|s: &mut Service| s.status = None)
        .expect("before start");
    factory
        .informer_with::<DynamicObject>(
            &dynamic_type("v1/Service").expect("valid"),
            InformerScope::all(),
        )
        .set_transform(|d: &mut DynamicObject| d.data = serde_json::Value::Null)
        .expect("before start");
    factory.start(CancellationToken::new());
    let status = &factory.informers_status()[0];
    let failed = status.failed.as_deref().unwrap_or_default();
    assert!(
        failed.contains("a transform is set for kube_core::dynamic::DynamicObject"),
        "{failed}"
    );
    assert!(
        status.to_string().starts_with("Service cannot start: "),
        "{status}"
    );
}
