//! End-to-end tests of the service (LoadBalancer) controller's per-Service sync: a real
//! `kube::Client` against kube-testenv and the fake cloud (harness in `service_support`).

mod service_support;

use std::time::Duration;

use cloud_controllers::event_sink::EventType;
use cloud_controllers::service::predicates::LOAD_BALANCER_CLEANUP_FINALIZER;
use cloud_controllers::service::{ServiceController, ServiceLister, ServiceSyncError};
use cloud_controllers::wiring::RetryHint;
use fake_cloud::{FaultSpec, Method};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use service_support::*;

/// Deletes Service web through the API.
async fn delete_web(h: &Harness) {
    let services = h.services();
    services
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
}

/// Merge-patches Service web through the API.
async fn merge_web(h: &Harness, patch: &serde_json::Value) {
    let services = h.services();
    services
        .patch("web", &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap();
}

#[tokio::test]
async fn creates_lb_with_finalizer_first_then_ingress_status() {
    let h = harness(&["n1", "n2"]).await;
    h.create(&lb_service("web")).await;
    let new = h.cache.get("default", "web").unwrap();
    assert_eq!(
        ServiceController::service_event_keys(None, &new),
        Some(KEY.to_string())
    );

    h.ctl.sync_service(KEY).await.unwrap();

    let svc = h.get("web").await.unwrap();
    assert_eq!(finalizers(&svc), [LOAD_BALANCER_CLEANUP_FINALIZER]);
    let lb = h.cloud.lb_for(KEY).expect("load balancer created");
    assert_eq!(ingress_ips(&svc), [lb.ip.to_string()]);
    assert_eq!(lb.nodes, ["n1", "n2"]);
    assert_eq!(lb.cluster_name, CLUSTER);
    // One patch for the finalizer, one for the status, both on the status subresource.
    assert_eq!(status_patches(&h.env), 2);
    assert_eq!(
        h.events.reasons(),
        ["EnsuringLoadBalancer", "EnsuredLoadBalancer"]
    );
    assert!(h.events.all().iter().all(|e| e.object == KEY));

    // A second sync with nothing changed writes nothing.
    h.clear();
    h.sync().await.unwrap();
    assert_eq!(status_patches(&h.env), 0);
    assert_eq!(h.calls(Method::EnsureLoadBalancer), 1);
}

#[tokio::test]
async fn cloud_error_leaves_finalizer_and_reports_event() {
    let h = harness(&["n1"]).await;
    h.cloud.fail(
        Method::EnsureLoadBalancer,
        FaultSpec::other("quota exceeded"),
    );
    h.create(&lb_service("web")).await;
    let err = h.ctl.sync_service(KEY).await.unwrap_err();
    assert!(
        matches!(err, ServiceSyncError::EnsureLoadBalancer(_)),
        "{err}"
    );
    assert_eq!(err.retry_after(), None);
    let svc = h.get("web").await.unwrap();
    // The finalizer went on before the cloud was called.
    assert_eq!(finalizers(&svc), [LOAD_BALANCER_CLEANUP_FINALIZER]);
    assert!(ingress_ips(&svc).is_empty());
    assert_eq!(
        h.events.reasons(),
        ["EnsuringLoadBalancer", "SyncLoadBalancerFailed"]
    );
    let failed = &h.events.all()[1];
    assert_eq!(failed.type_, EventType::Warning);
    assert!(
        failed.message.starts_with(
            "Error syncing load balancer: failed to ensure load balancer: quota exceeded"
        ),
        "{}",
        failed.message
    );
}

#[tokio::test]
async fn retry_after_from_the_cloud_is_detectable() {
    let h = harness(&["n1"]).await;
    h.cloud.fail(
        Method::EnsureLoadBalancer,
        FaultSpec::retry("busy", Duration::from_secs(42)),
    );
    h.create(&lb_service("web")).await;
    let err = h.ctl.sync_service(KEY).await.unwrap_err();
    assert_eq!(err.retry_after(), Some(Duration::from_secs(42)));
}

#[tokio::test]
async fn implemented_elsewhere_keeps_finalizer_and_skips_status() {
    let h = harness(&["n1"]).await;
    h.cloud.fail(
        Method::EnsureLoadBalancer,
        FaultSpec::implemented_elsewhere(),
    );
    h.create(&lb_service("web")).await;
    h.ctl.sync_service(KEY).await.unwrap();
    let svc = h.get("web").await.unwrap();
    assert_eq!(finalizers(&svc), [LOAD_BALANCER_CLEANUP_FINALIZER]);
    assert!(ingress_ips(&svc).is_empty());
    assert_eq!(h.events.reasons(), ["EnsuringLoadBalancer"]);
    assert_eq!(status_patches(&h.env), 1, "only the finalizer patch");
}

#[tokio::test]
async fn no_eligible_nodes_warns_but_still_ensures() {
    let h = harness(&[]).await;
    h.create(&lb_service("web")).await;
    h.ctl.sync_service(KEY).await.unwrap();
    assert_eq!(
        h.events.reasons(),
        [
            "EnsuringLoadBalancer",
            "UnAvailableLoadBalancer",
            "EnsuredLoadBalancer"
        ]
    );
    assert!(h.cloud.lb_for(KEY).unwrap().nodes.is_empty());
}

#[tokio::test]
async fn delete_runs_cloud_delete_then_removes_finalizer() {
    let h = harness(&["n1"]).await;
    let old = h.provision().await;
    delete_web(&h).await;
    let deleting = h.get("web").await.expect("held by the finalizer");
    assert!(deleting.metadata.deletion_timestamp.is_some());
    assert_eq!(
        ServiceController::service_event_keys(Some(&old), &deleting),
        Some(KEY.to_string())
    );
    h.clear();
    let mark = h.events.reasons().len();

    h.sync().await.unwrap();

    assert!(
        h.get("web").await.is_none(),
        "finalizer removed, object gone"
    );
    assert!(h.cloud.lb_for(KEY).is_none());
    assert_eq!(h.calls(Method::EnsureLoadBalancerDeleted), 1);
    assert_eq!(h.calls(Method::EnsureLoadBalancer), 0);
    assert_eq!(
        h.events.reasons()[mark..],
        ["DeletingLoadBalancer", "DeletedLoadBalancer"]
    );
    // The lister no longer has it and the cache forgot it: nothing more to do.
    h.clear();
    h.sync().await.unwrap();
    assert!(h.cloud.calls().is_empty());
}

/// A sync from a stale cache after the cleanup already finished: the Service is gone, so its
/// finalizer is too. The 404 on removing it is success, not a `SyncLoadBalancerFailed` warning
/// (seen in 2 of 14 deletes of a Service whose load balancer was still being provisioned).
#[tokio::test]
async fn removing_the_finalizer_of_a_service_already_gone_is_success() {
    let h = harness(&["n1"]).await;
    h.provision().await;
    delete_web(&h).await;
    h.sync().await.unwrap();
    assert!(h.get("web").await.is_none(), "cleaned up");
    // The informer has not caught up: the cache still holds the deleting Service.
    let web = ("default".to_string(), "web".to_string());
    assert!(h.cache.services.lock().contains_key(&web), "stale cache");
    let mark = h.events.reasons().len();

    h.ctl
        .sync_service(KEY)
        .await
        .expect("a 404 on the finalizer is success");
    assert!(
        !h.events.reasons()[mark..].contains(&"SyncLoadBalancerFailed".to_string()),
        "{:?}",
        h.events.reasons()
    );
}

#[tokio::test]
async fn delete_cloud_errors_keep_the_finalizer() {
    let h = harness(&["n1"]).await;
    h.provision().await;
    delete_web(&h).await;

    h.cloud.fail(
        Method::GetLoadBalancer,
        FaultSpec::other("Internal Server Error").times(1),
    );
    let err = h.sync().await.unwrap_err();
    assert!(
        err.to_string()
            .starts_with("failed to check if load balancer exists before cleanup"),
        "{err}"
    );
    assert_eq!(
        finalizers(&h.get("web").await.unwrap()),
        [LOAD_BALANCER_CLEANUP_FINALIZER]
    );

    h.cloud.fail(
        Method::EnsureLoadBalancerDeleted,
        FaultSpec::retry("deleting", Duration::from_secs(9)).times(1),
    );
    let err = h.sync().await.unwrap_err();
    assert!(
        matches!(err, ServiceSyncError::DeleteLoadBalancer(_)),
        "{err}"
    );
    assert_eq!(err.retry_after(), Some(Duration::from_secs(9)));
    assert_eq!(
        finalizers(&h.get("web").await.unwrap()),
        [LOAD_BALANCER_CLEANUP_FINALIZER]
    );
    assert!(h.cloud.lb_for(KEY).is_some());

    h.sync().await.unwrap();
    assert!(h.get("web").await.is_none());
    assert!(h.cloud.lb_for(KEY).is_none());
}

#[tokio::test]
async fn type_change_deletes_lb_and_clears_status() {
    let h = harness(&["n1"]).await;
    let old = h.provision().await;
    let patch = json!({"spec": {"type": "ClusterIP", "ports": [{"name": "http", "port": 80, "protocol": "TCP", "nodePort": null}]}});
    merge_web(&h, &patch).await;
    h.cache.refresh(&h.client).await;
    let new = h.cache.get("default", "web").unwrap();
    assert_eq!(
        ServiceController::service_event_keys(Some(&old), &new),
        Some(KEY.to_string())
    );

    h.ctl.sync_service(KEY).await.unwrap();

    let svc = h.get("web").await.unwrap();
    assert!(finalizers(&svc).is_empty());
    assert!(ingress_ips(&svc).is_empty());
    assert!(h.cloud.lb_for(KEY).is_none());
    let reasons = h.events.reasons();
    assert_eq!(
        reasons[reasons.len() - 2..],
        ["DeletingLoadBalancer", "DeletedLoadBalancer"]
    );
}

#[tokio::test]
async fn deleting_service_never_regains_the_finalizer() {
    // cloud-provider-gcp #981: another finalizer holds a deleting Service whose cleanup
    // finalizer is already gone; a retry must not re-add it nor re-create the load balancer.
    let h = harness(&["n1"]).await;
    let mut svc = lb_service("web");
    svc.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    h.create(&svc).await;
    h.ctl.sync_service(KEY).await.unwrap();
    let remove_ours = json!({"metadata": {"finalizers": ["example.com/hold"]}});
    merge_web(&h, &remove_ours).await;
    delete_web(&h).await;
    h.clear();

    h.sync().await.unwrap();

    let svc = h.get("web").await.unwrap();
    assert_eq!(finalizers(&svc), ["example.com/hold"]);
    assert_eq!(h.calls(Method::EnsureLoadBalancer), 0);
    assert_eq!(h.calls(Method::EnsureLoadBalancerDeleted), 1);
    assert!(h.cloud.lb_for(KEY).is_none());
}

#[tokio::test]
async fn service_deleted_mid_reconcile_cleans_up_from_the_cache() {
    let h = harness(&["n1"]).await;
    h.create(&lb_service("web")).await; // the cache sees it...
    delete_web(&h).await; // ...but it is gone before the controller acts.

    let err = h.ctl.sync_service(KEY).await.unwrap_err();
    assert!(matches!(err, ServiceSyncError::AddFinalizer(_)), "{err}");
    assert_eq!(
        h.calls(Method::EnsureLoadBalancer),
        0,
        "no LB without a finalizer"
    );

    // The informer catches up: the cached object drives the non-finalizer delete.
    h.sync().await.unwrap();
    assert_eq!(h.calls(Method::EnsureLoadBalancerDeleted), 1);
    let reasons = h.events.reasons();
    assert_eq!(
        reasons[reasons.len() - 2..],
        ["DeletingLoadBalancer", "DeletedLoadBalancer"]
    );
    h.clear();
    h.sync().await.unwrap();
    assert!(h.cloud.calls().is_empty(), "cache entry dropped");
}

#[tokio::test]
async fn recreated_service_deletes_the_old_load_balancer_first() {
    let h = harness(&["n1"]).await;
    h.provision().await;
    let old_uid = h.cloud.lb_for(KEY).unwrap().service_uid;
    // Strip the finalizer so delete + create happen before the controller notices.
    let strip = json!({"metadata": {"finalizers": null}});
    merge_web(&h, &strip).await;
    delete_web(&h).await;
    h.services()
        .create(&PostParams::default(), &lb_service("web"))
        .await
        .unwrap();

    h.sync().await.unwrap();

    let lbs = h.cloud.load_balancers();
    assert_eq!(lbs.len(), 1);
    assert_ne!(lbs[0].service_uid, old_uid, "old LB deleted, new one made");
    assert_eq!(h.calls(Method::EnsureLoadBalancerDeleted), 1);
}

#[tokio::test]
async fn api_conflict_on_finalizer_patch_stops_before_the_cloud() {
    let h = harness(&["n1"]).await;
    h.create(&lb_service("web")).await;
    h.env.faults().fail_next(1, 409, None);
    let err = h.ctl.sync_service(KEY).await.unwrap_err();
    assert!(matches!(err, ServiceSyncError::AddFinalizer(_)), "{err}");
    assert_eq!(h.calls(Method::EnsureLoadBalancer), 0);
    h.ctl.sync_service(KEY).await.unwrap();
    assert_eq!(
        finalizers(&h.get("web").await.unwrap()),
        [LOAD_BALANCER_CLEANUP_FINALIZER]
    );
}

#[tokio::test]
async fn failed_status_write_is_retried_without_a_second_load_balancer() {
    let h = harness(&["n1"]).await;
    let mut svc = lb_service("web");
    svc.metadata.finalizers = Some(vec![LOAD_BALANCER_CLEANUP_FINALIZER.into()]);
    h.create(&svc).await;
    // The finalizer is already there, so the first request is the status patch.
    h.env.faults().fail_next(1, 500, None);
    let err = h.ctl.sync_service(KEY).await.unwrap_err();
    assert!(matches!(err, ServiceSyncError::UpdateStatus(_)), "{err}");
    assert!(ingress_ips(&h.get("web").await.unwrap()).is_empty());

    h.ctl.sync_service(KEY).await.unwrap();
    assert_eq!(h.cloud.load_balancers().len(), 1);
    let ip = h.cloud.lb_for(KEY).unwrap().ip.to_string();
    assert_eq!(ingress_ips(&h.get("web").await.unwrap()), [ip]);
}
