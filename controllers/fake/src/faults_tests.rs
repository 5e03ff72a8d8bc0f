//! Tests of the fault, latency and call-log bookkeeping.

use super::*;

#[test]
fn counted_fault_fires_n_times_then_stops() {
    let faults = Faults::default();
    faults.add_fault(Method::CreateRoute, FaultSpec::other("boom").times(2));
    assert!(faults.take_fault(Method::CreateRoute, "n1").is_some());
    assert!(faults.take_fault(Method::DeleteRoute, "n1").is_none());
    assert!(faults.take_fault(Method::CreateRoute, "n2").is_some());
    assert!(faults.take_fault(Method::CreateRoute, "n1").is_none());
}

#[test]
fn keyed_fault_only_hits_its_key_and_keeps_its_count() {
    let faults = Faults::default();
    faults.add_fault(
        Method::EnsureLoadBalancer,
        FaultSpec::instance_not_found().times(1).only_for("ns/a"),
    );
    assert!(
        faults
            .take_fault(Method::EnsureLoadBalancer, "ns/b")
            .is_none()
    );
    let err = faults.take_fault(Method::EnsureLoadBalancer, "ns/a");
    assert_eq!(err, Some(FaultError::InstanceNotFound));
    assert!(
        faults
            .take_fault(Method::EnsureLoadBalancer, "ns/a")
            .is_none()
    );
}

#[test]
fn unlimited_fault_persists_until_cleared() {
    let faults = Faults::default();
    faults.add_fault(
        Method::ListRoutes,
        FaultSpec::retry("busy", Duration::from_secs(7)),
    );
    for _ in 0..3 {
        let err = faults.take_fault(Method::ListRoutes, "c");
        assert_eq!(
            err,
            Some(FaultError::Retry {
                message: "busy".into(),
                after: Duration::from_secs(7)
            })
        );
    }
    faults.clear_faults(Some(Method::ListRoutes));
    assert!(faults.take_fault(Method::ListRoutes, "c").is_none());
}

#[tokio::test(start_paused = true)]
async fn hang_fault_never_returns_and_is_used_up() {
    let faults = Faults::default();
    faults.add_fault(Method::UpdateLoadBalancer, FaultSpec::hang().times(1));
    let fault = faults
        .take_fault(Method::UpdateLoadBalancer, "ns/a")
        .expect("a fault");
    let hung = tokio::time::timeout(Duration::from_secs(3600), fault.fire()).await;
    assert!(hung.is_err(), "still waiting after an hour");
    assert!(
        faults
            .take_fault(Method::UpdateLoadBalancer, "ns/a")
            .is_none()
    );
}

#[test]
fn panic_fault_panics_once_and_leaves_the_faults_usable() {
    let faults = Faults::default();
    faults.add_fault(
        Method::ListRoutes,
        FaultSpec::panic("provider bug").times(1),
    );
    // Taken under the lock, fired after it is released.
    let fault = faults.take_fault(Method::ListRoutes, "c").expect("a fault");
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        futures::executor::block_on(fault.fire())
    }));
    let payload = caught.expect_err("the fault panics");
    assert_eq!(
        payload.downcast_ref::<String>().map(String::as_str),
        Some("provider bug")
    );
    assert!(
        faults.take_fault(Method::ListRoutes, "c").is_none(),
        "used up"
    );
    faults.record(CloudCall {
        method: Method::ListRoutes,
        key: "c".into(),
        caller: None,
        outcome: CallOutcome::Ok,
        started: tokio::time::Instant::now(),
        finished: tokio::time::Instant::now(),
    });
    assert_eq!(
        faults.calls().len(),
        1,
        "the lock was not held across the panic"
    );
}

#[test]
fn zero_times_fault_is_ignored_and_zero_latency_clears() {
    let faults = Faults::default();
    faults.add_fault(Method::Master, FaultSpec::other("x").times(0));
    assert!(faults.take_fault(Method::Master, "c").is_none());
    faults.set_latency(Method::Master, Duration::from_secs(1));
    assert_eq!(faults.latency(Method::Master), Some(Duration::from_secs(1)));
    faults.set_latency(Method::Master, Duration::ZERO);
    assert_eq!(faults.latency(Method::Master), None);
}

#[test]
fn the_log_keeps_the_newest_calls_and_counts_every_one() {
    let faults = Faults::default();
    faults.set_call_log_capacity(3);
    for i in 0..5 {
        faults.record(CloudCall {
            method: Method::UpdateLoadBalancer,
            key: format!("ns/s{i}"),
            caller: None,
            outcome: CallOutcome::Ok,
            started: tokio::time::Instant::now(),
            finished: tokio::time::Instant::now(),
        });
    }
    let keys: Vec<_> = faults.calls().into_iter().map(|c| c.key).collect();
    assert_eq!(keys, ["ns/s2", "ns/s3", "ns/s4"]);
    assert_eq!(faults.count(Method::UpdateLoadBalancer), 5);
    assert_eq!(faults.count(Method::EnsureLoadBalancer), 0);
    faults.set_call_log_capacity(1);
    assert_eq!(faults.calls().len(), 1);
    faults.clear_calls();
    assert_eq!(faults.count(Method::UpdateLoadBalancer), 0);
    assert!(faults.calls().is_empty());
}

#[test]
fn call_displays_method_key_caller_and_outcome() {
    let call = CloudCall {
        method: Method::EnsureLoadBalancer,
        key: "default/web".into(),
        caller: Some("ccm-0".into()),
        outcome: CallOutcome::Err("boom".into()),
        started: tokio::time::Instant::now(),
        finished: tokio::time::Instant::now(),
    };
    assert_eq!(
        call.to_string(),
        "EnsureLoadBalancer(default/web) by ccm-0 -> error: boom"
    );
}
