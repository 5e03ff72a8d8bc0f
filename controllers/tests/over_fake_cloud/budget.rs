//! The cloud call budget on a paused clock, through [`InstrumentedCloud`] over the fake cloud:
//! a 429 pauses its method for every caller, the rate and in-flight limits space calls out, and
//! the waiting is measured.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;
use tokio::time::Instant;

use cloud_controllers::cloud::{BudgetOptions, CloudMetrics, CloudProvider, InstrumentedCloud};
use fake_cloud::{FakeCloud, FaultSpec, Method};

fn svc(name: &str) -> Service {
    Service {
        metadata: ObjectMeta {
            namespace: Some("default".into()),
            name: Some(name.into()),
            uid: Some(format!("uid-{name}")),
            ..ObjectMeta::default()
        },
        ..Service::default()
    }
}

/// A fake cloud with load balancers for `a`..`d`, behind a budget; the registry holds its metrics.
async fn budgeted(options: BudgetOptions) -> (FakeCloud, InstrumentedCloud, Registry) {
    let fake = FakeCloud::new();
    for name in ["a", "b", "c", "d"] {
        cloud_controllers::cloud::LoadBalancer::ensure_load_balancer(&fake, "k", &svc(name), &[])
            .await
            .unwrap();
    }
    fake.clear_calls();
    let mut registry = Registry::default();
    let metrics = CloudMetrics::new(&mut registry);
    let cloud = InstrumentedCloud::new(Arc::new(fake.clone()), Some(metrics)).with_budget(&options);
    (fake, cloud, registry)
}

/// When each of `names`' `UpdateLoadBalancer` calls returned, started together now.
async fn update_all(cloud: &InstrumentedCloud, names: &[&str]) -> Vec<Duration> {
    let lb = cloud.load_balancer().unwrap();
    let start = Instant::now();
    let calls = names.iter().map(|name| async move {
        let _ = lb.update_load_balancer("k", &svc(name), &[]).await;
        start.elapsed()
    });
    futures::future::join_all(calls).await
}

fn metrics_text(registry: &Registry) -> String {
    let mut out = String::new();
    encode(&mut out, registry).unwrap();
    out
}

fn secs(s: &[u64]) -> Vec<Duration> {
    s.iter().map(|s| Duration::from_secs(*s)).collect()
}

#[tokio::test(start_paused = true)]
async fn a_cloud_429_pauses_the_method_for_every_caller() {
    let options = BudgetOptions {
        pause_on_retry: true,
        ..BudgetOptions::default()
    };
    let (fake, cloud, registry) = budgeted(options).await;
    fake.fail(
        Method::UpdateLoadBalancer,
        FaultSpec::retry("quota exceeded", Duration::from_secs(10))
            .times(1)
            .only_for("default/a"),
    );
    let lb = cloud.load_balancer().unwrap();
    let err = lb
        .update_load_balancer("k", &svc("a"), &[])
        .await
        .unwrap_err();
    assert_eq!(
        err.retry_after(),
        Some(Duration::from_secs(10)),
        "the caller still gets it"
    );

    // Other keys of the same method wait out the pause, then take turns (1 s apart at most);
    // other methods do not wait.
    let start = Instant::now();
    let (updates, get) = tokio::join!(update_all(&cloud, &["b", "c"]), async {
        lb.get_load_balancer("k", &svc("d")).await.unwrap();
        start.elapsed()
    });
    assert_eq!(updates, secs(&[10, 11]));
    assert_eq!(get, Duration::ZERO);
    let calls = fake.calls_to(Method::UpdateLoadBalancer);
    assert_eq!(calls.len(), 3);
    assert!(calls[1..].iter().all(|c| c.outcome.is_ok()));

    let text = metrics_text(&registry);
    assert!(
        text.contains(
            "cloud_provider_budget_wait_seconds_sum{provider=\"fake\",method=\"UpdateLoadBalancer\"} 21.0"
        ),
        "{text}"
    );

    // Once no caller waits for a turn, the turns run out and calls go at once again.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(update_all(&cloud, &["d"]).await, secs(&[0]));
}

#[tokio::test(start_paused = true)]
async fn without_pause_on_retry_a_429_holds_back_only_its_own_key() {
    let (fake, cloud, registry) = budgeted(BudgetOptions::default()).await;
    fake.fail(
        Method::UpdateLoadBalancer,
        FaultSpec::retry("quota exceeded", Duration::from_secs(10)).times(1),
    );
    assert_eq!(update_all(&cloud, &["a"]).await, secs(&[0]));
    assert_eq!(update_all(&cloud, &["b", "c"]).await, secs(&[0, 0]));
    // Without limits every call still counts, with a zero wait.
    let text = metrics_text(&registry);
    let series = "{provider=\"fake\",method=\"UpdateLoadBalancer\"}";
    assert!(
        text.contains(&format!(
            "cloud_provider_budget_wait_seconds_sum{series} 0.0"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "cloud_provider_budget_wait_seconds_count{series} 3"
        )),
        "{text}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_rate_limit_spaces_calls_out_across_methods() {
    let options = BudgetOptions {
        qps: 2.0,
        burst: 1,
        ..BudgetOptions::default()
    };
    let (_fake, cloud, _registry) = budgeted(options).await;
    let ms = |m: &[u64]| {
        m.iter()
            .map(|m| Duration::from_millis(*m))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        update_all(&cloud, &["a", "b", "c", "d"]).await,
        ms(&[0, 500, 1000, 1500])
    );
    // One bucket for all methods: a read waits behind the writes' tokens too.
    let lb = cloud.load_balancer().unwrap();
    let start = Instant::now();
    lb.get_load_balancer("k", &svc("a")).await.unwrap();
    assert_eq!(start.elapsed(), Duration::from_millis(500));
}

/// A rate given in code (the flag refuses it) below `MIN_QPS` is taken as `MIN_QPS`: a call
/// waits 1,000 s for its token, not forever (`1e-300` made `Duration::from_secs_f64` panic).
#[tokio::test(start_paused = true)]
async fn a_rate_below_the_minimum_waits_as_the_minimum() {
    let options = BudgetOptions {
        qps: 1e-300,
        burst: 1,
        ..BudgetOptions::default()
    };
    let (_fake, cloud, _registry) = budgeted(options).await;
    assert_eq!(
        update_all(&cloud, &["a", "b"]).await,
        secs(&[0, (1.0 / cloud_controllers::cloud::MIN_QPS) as u64])
    );
}

#[tokio::test(start_paused = true)]
async fn the_in_flight_limit_caps_concurrent_calls() {
    let options = BudgetOptions {
        max_in_flight: 2,
        ..BudgetOptions::default()
    };
    let (fake, cloud, registry) = budgeted(options).await;
    fake.set_latency(Method::UpdateLoadBalancer, Duration::from_secs(1));
    assert_eq!(
        update_all(&cloud, &["a", "b", "c", "d"]).await,
        secs(&[1, 1, 2, 2])
    );
    let text = metrics_text(&registry);
    assert!(
        text.contains(
            "cloud_provider_budget_wait_seconds_sum{provider=\"fake\",method=\"UpdateLoadBalancer\"} 2.0"
        ),
        "{text}"
    );
    // The cloud's own latency is not the budget's: the request histogram has the 1 s calls.
    assert!(
        text.contains(
            "cloud_provider_request_duration_seconds_sum{provider=\"fake\",method=\"UpdateLoadBalancer\"} 4.0"
        ),
        "{text}"
    );
}

/// 40 load balancers updated at once against a cloud quota of 5 calls/s, each caller retrying
/// after the `Retry-After` it gets: how many calls the cloud refuses, and when the last is done.
async fn storm_against_a_quota(options: BudgetOptions) -> (usize, Duration) {
    use fake_cloud::RateLimit;
    let fake = FakeCloud::new();
    let names: Vec<String> = (0..40).map(|i| format!("s{i}")).collect();
    for name in &names {
        cloud_controllers::cloud::LoadBalancer::ensure_load_balancer(&fake, "k", &svc(name), &[])
            .await
            .unwrap();
    }
    fake.set_rate_limit(Some(RateLimit::new(5.0, 5))).unwrap();
    fake.clear_calls();
    let cloud = InstrumentedCloud::new(Arc::new(fake.clone()), None).with_budget(&options);
    let lb = cloud.load_balancer().unwrap();
    let start = Instant::now();
    let callers = names.iter().map(|name| async move {
        loop {
            match lb.update_load_balancer("k", &svc(name), &[]).await {
                Ok(()) => return,
                Err(e) => tokio::time::sleep(e.retry_after().unwrap()).await,
            }
        }
    });
    futures::future::join_all(callers).await;
    let refused = fake
        .calls_to(Method::UpdateLoadBalancer)
        .iter()
        .filter(|c| !c.outcome.is_ok())
        .count();
    (refused, start.elapsed())
}

#[tokio::test(start_paused = true)]
async fn a_budget_matching_the_quota_turns_429_storms_into_waiting() {
    let (unbudgeted, took) = storm_against_a_quota(BudgetOptions::default()).await;
    let paused = BudgetOptions {
        pause_on_retry: true,
        ..BudgetOptions::default()
    };
    let (with_pause, took_paused) = storm_against_a_quota(paused).await;
    let rate = BudgetOptions {
        qps: 5.0,
        burst: 5,
        ..BudgetOptions::default()
    };
    let (with_rate, took_rate) = storm_against_a_quota(rate).await;
    eprintln!(
        "refused: none {unbudgeted} ({took:?}), pause-on-retry {with_pause} ({took_paused:?}), \
         qps {with_rate} ({took_rate:?})"
    );
    // Measured: 630 refusals without a budget (every waiter wakes for the same next token),
    // 35 with the pause (one per call over the burst), none with a rate at the quota.
    assert_eq!(with_rate, 0, "a budget at the quota is never refused");
    assert!(
        with_pause <= 40,
        "about one refusal per call over the burst: {with_pause}"
    );
    assert!(
        unbudgeted >= 10 * with_pause,
        "{unbudgeted} vs {with_pause}"
    );
    // Nobody is slower for it: 35 calls over the burst at 5/s.
    for took in [took, took_paused, took_rate] {
        assert_eq!(took, Duration::from_secs(7));
    }
}
