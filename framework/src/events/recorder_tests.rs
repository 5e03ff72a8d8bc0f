//! The recorder's buffer and retry loop against a scripted writer, on tokio's paused clock.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::FutureExt;
use futures::future::BoxFuture;
use kube::core::Status;
use parking_lot::Mutex;
use tokio::sync::Notify;

use super::*;

#[derive(Clone, Debug, PartialEq)]
enum Call {
    Create {
        at: Instant,
        event: Box<Event>,
    },
    Patch {
        at: Instant,
        name: String,
        patch: serde_json::Value,
    },
}

/// Answers each call with the next scripted error, or success (echo with a resourceVersion).
#[derive(Default)]
struct ScriptedWriter {
    calls: Mutex<Vec<Call>>,
    errors: Mutex<VecDeque<u16>>,
    block: AtomicBool,
    /// Lets blocked calls through once set.
    released: tokio::sync::watch::Sender<bool>,
    entered: Notify,
}

fn status(code: u16) -> kube::Error {
    let reason = match code {
        404 => "NotFound",
        409 => "AlreadyExists",
        422 => "Invalid",
        _ => "InternalError",
    };
    kube::Error::Api(Status::failure(reason, reason).with_code(code).boxed())
}

impl ScriptedWriter {
    fn answer(&self, mut event: Event) -> BoxFuture<'_, Result<Event, kube::Error>> {
        let err = self.errors.lock().pop_front();
        let block = self.block.load(Ordering::SeqCst);
        self.entered.notify_one();
        let mut released = self.released.subscribe();
        async move {
            if block {
                let _ = released.wait_for(|r| *r).await;
            }
            match err {
                Some(code) => Err(status(code)),
                None => {
                    event.metadata.resource_version = Some("1".into());
                    Ok(event)
                }
            }
        }
        .boxed()
    }

    fn calls(&self) -> Vec<Call> {
        self.calls.lock().clone()
    }
}

impl EventWriter for ScriptedWriter {
    fn create(&self, event: Event) -> BoxFuture<'_, Result<Event, kube::Error>> {
        self.calls.lock().push(Call::Create {
            at: Instant::now(),
            event: Box::new(event.clone()),
        });
        self.answer(event)
    }

    fn patch(
        &self,
        namespace: String,
        name: String,
        patch: serde_json::Value,
    ) -> BoxFuture<'_, Result<Event, kube::Error>> {
        self.calls.lock().push(Call::Patch {
            at: Instant::now(),
            name: name.clone(),
            patch: patch.clone(),
        });
        let event = Event {
            metadata: ObjectMeta {
                name: Some(name),
                namespace: Some(namespace),
                ..ObjectMeta::default()
            },
            ..Event::default()
        };
        self.answer(event)
    }
}

fn node(name: &str) -> ObjectReference {
    ObjectReference {
        kind: Some("Node".into()),
        name: Some(name.into()),
        api_version: Some("v1".into()),
        ..ObjectReference::default()
    }
}

fn recorder(writer: &Arc<ScriptedWriter>) -> EventRecorder {
    EventRecorder::with_writer(
        writer.clone(),
        "cloud-node-controller",
        Some("host-a".into()),
        Default::default(),
    )
}

#[tokio::test(start_paused = true)]
async fn writes_upstream_fields_in_the_objects_namespace_or_default() {
    let writer = Arc::new(ScriptedWriter::default());
    let rec = recorder(&writer);
    rec.event(
        &node("n1"),
        EventType::Normal,
        "Synced",
        "Node synced successfully",
    );
    let mut svc = node("web");
    svc.kind = Some("Service".into());
    svc.namespace = Some("shop".into());
    rec.for_component("service-controller").event(
        &svc,
        EventType::Warning,
        "SyncLoadBalancerFailed",
        "boom",
    );
    rec.flush().await;

    let calls = writer.calls();
    assert_eq!(calls.len(), 2);
    let Call::Create { event: e, .. } = &calls[0] else {
        panic!("{calls:?}")
    };
    assert_eq!(e.metadata.namespace.as_deref(), Some("default"));
    assert!(e.metadata.name.as_deref().unwrap().starts_with("n1."));
    assert_eq!(e.type_.as_deref(), Some("Normal"));
    assert_eq!(e.count, Some(1));
    let source = e.source.clone().unwrap();
    assert_eq!(source.component.as_deref(), Some("cloud-node-controller"));
    assert_eq!(source.host.as_deref(), Some("host-a"));
    let Call::Create { event: e, .. } = &calls[1] else {
        panic!("{calls:?}")
    };
    assert_eq!(e.metadata.namespace.as_deref(), Some("shop"));
    assert_eq!(
        e.source.clone().unwrap().component.as_deref(),
        Some("service-controller")
    );
}

#[tokio::test(start_paused = true)]
async fn a_repeat_is_patched_and_recreated_if_the_event_is_gone() {
    let writer = Arc::new(ScriptedWriter::default());
    let rec = recorder(&writer);
    rec.event(&node("n1"), EventType::Normal, "Synced", "same");
    rec.flush().await;
    writer.errors.lock().push_back(404);
    rec.event(&node("n1"), EventType::Normal, "Synced", "same");
    rec.flush().await;
    let calls = writer.calls();
    assert_eq!(calls.len(), 3, "{calls:?}");
    let Call::Create { event: first, .. } = &calls[0] else {
        panic!()
    };
    let Call::Patch { name, patch, .. } = &calls[1] else {
        panic!("{calls:?}")
    };
    assert_eq!(Some(name), first.metadata.name.as_ref());
    assert_eq!(patch["count"], 2);
    let Call::Create { event: again, .. } = &calls[2] else {
        panic!("{calls:?}")
    };
    assert_eq!(again.count, Some(2));
    assert_eq!(again.metadata.resource_version, None);
}

#[tokio::test(start_paused = true)]
async fn server_errors_are_retried_twelve_times_ten_seconds_apart() {
    let writer = Arc::new(ScriptedWriter::default());
    writer.errors.lock().extend([500; 20]);
    let rec = recorder(&writer);
    let start = Instant::now();
    rec.event(&node("n1"), EventType::Warning, "DeletingNodeFailed", "x");
    rec.flush().await;
    let at: Vec<Instant> = writer
        .calls()
        .into_iter()
        .map(|c| match c {
            Call::Create { at, .. } | Call::Patch { at, .. } => at,
        })
        .collect();
    assert_eq!(at.len(), MAX_TRIES as usize);
    assert!(
        at[1] - at[0] <= RETRY_SLEEP,
        "first wait is randomised below 10 s"
    );
    for pair in at[1..].windows(2) {
        assert_eq!(pair[1] - pair[0], RETRY_SLEEP);
    }
    assert!(at[0] - start < Duration::from_millis(1));
}

#[tokio::test(start_paused = true)]
async fn a_rejected_event_is_not_retried() {
    let writer = Arc::new(ScriptedWriter::default());
    writer.errors.lock().push_back(422);
    let rec = recorder(&writer);
    rec.event(&node("n1"), EventType::Normal, "Synced", "x");
    rec.flush().await;
    assert_eq!(writer.calls().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn thousands_of_distinct_events_wait_for_a_slow_server_instead_of_being_dropped() {
    let writer = Arc::new(ScriptedWriter::default());
    writer.block.store(true, Ordering::SeqCst);
    let rec = recorder(&writer);
    rec.event(&node("first"), EventType::Normal, "R", "in flight");
    writer.entered.notified().await;
    // A scale-up under 1,000 load balancers: 3,000 Nodes synced, 1,000 Services updated,
    // recorded while the server takes nothing. client-go's queue of 1,000 drops 3,000 of them.
    for i in 0..3000 {
        rec.event(
            &node(&format!("n{i}")),
            EventType::Normal,
            "Synced",
            "Node synced successfully",
        );
    }
    for i in 0..1000 {
        rec.event(
            &service(&format!("s{i}")),
            EventType::Normal,
            "UpdatedLoadBalancer",
            "Updated load balancer with new hosts",
        );
    }
    assert_eq!(rec.dropped(), 0);
    writer.block.store(false, Ordering::SeqCst);
    writer.released.send_replace(true);
    rec.flush().await;
    assert_eq!(writer.calls().len(), 1 + 4000);
    assert_eq!(rec.dropped() + rec.spam_filtered(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_full_buffer_drops_and_counts_without_blocking() {
    let writer = Arc::new(ScriptedWriter::default());
    writer.block.store(true, Ordering::SeqCst);
    let rec = recorder(&writer);
    let mut registry = Registry::default();
    rec.register_metrics(&mut registry);
    rec.event(&node("first"), EventType::Normal, "R", "in flight");
    writer.entered.notified().await;
    // 64 KiB messages: the 8 MiB buffer holds fewer than 128 of them.
    let big = "x".repeat(64 << 10);
    for i in 0..130 {
        rec.event(&node(&format!("n{i}")), EventType::Normal, "R", big.clone());
    }
    let one = make_event(
        &rec.source,
        &node("n100"),
        EventType::Normal,
        "R",
        big.clone(),
        Timestamp::now(),
    );
    let fit = BUFFER_BYTES / event_bytes(&one);
    let dropped = rec.dropped();
    assert!(
        fit < 130 && dropped == (130 - fit) as u64,
        "{fit} fit, {dropped} dropped"
    );
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    assert!(
        text.contains(&format!(
            "events_dropped_total{{component=\"cloud-node-controller\"}} {dropped}"
        )),
        "{text}"
    );
    assert!(
        text.contains("events_spam_filtered_total{component=\"cloud-node-controller\"} 0"),
        "{text}"
    );
    // Written space is free again.
    writer.block.store(false, Ordering::SeqCst);
    writer.released.send_replace(true);
    rec.flush().await;
    rec.event(&node("after"), EventType::Normal, "R", big);
    rec.flush().await;
    assert_eq!(rec.dropped(), dropped);
}

#[tokio::test(start_paused = true)]
async fn a_flush_deadline_gives_up_on_what_is_still_waiting_and_counts_it() {
    let writer = Arc::new(ScriptedWriter::default());
    writer.block.store(true, Ordering::SeqCst);
    let rec = recorder(&writer);
    rec.event(&node("first"), EventType::Normal, "R", "in flight");
    writer.entered.notified().await;
    for i in 0..10 {
        rec.event(&node(&format!("n{i}")), EventType::Normal, "R", "waiting");
    }
    rec.event(&node("n0"), EventType::Normal, "R", "waiting");
    assert_eq!(rec.flush_within(Duration::from_secs(5)).await, 10);
    assert_eq!(rec.dropped(), 11, "ten events, one of them twice");
    // Nothing is left to wait for: a later flush returns once the in-flight write ends.
    writer.block.store(false, Ordering::SeqCst);
    writer.released.send_replace(true);
    rec.flush().await;
    assert_eq!(writer.calls().len(), 1);
}

fn service(name: &str) -> ObjectReference {
    ObjectReference {
        kind: Some("Service".into()),
        namespace: Some("default".into()),
        name: Some(name.into()),
        api_version: Some("v1".into()),
        ..ObjectReference::default()
    }
}

#[tokio::test(start_paused = true)]
async fn repeats_waiting_in_the_queue_are_one_write_with_their_count() {
    let writer = Arc::new(ScriptedWriter::default());
    writer.block.store(true, Ordering::SeqCst);
    let rec = recorder(&writer);
    rec.event(&node("first"), EventType::Normal, "R", "in flight");
    writer.entered.notified().await;
    // 5,000 repeats and 900 distinct events: the repeats take one place.
    let updated = |rec: &EventRecorder| {
        rec.event(
            &service("web"),
            EventType::Normal,
            "UpdatedLoadBalancer",
            "Updated load balancer with new hosts",
        )
    };
    for _ in 0..5000 {
        updated(&rec);
    }
    for i in 0..900 {
        rec.event(&node(&format!("n{i}")), EventType::Normal, "Synced", "ok");
    }
    assert_eq!(rec.dropped(), 0);
    writer.block.store(false, Ordering::SeqCst);
    writer.released.send_replace(true);
    rec.flush().await;

    let calls = writer.calls();
    assert_eq!(calls.len(), 2 + 900, "one write for 5,000 repeats");
    let Call::Create { event: e, .. } = &calls[1] else {
        panic!("{:?}", calls[1])
    };
    assert_eq!(e.reason.as_deref(), Some("UpdatedLoadBalancer"));
    assert_eq!(e.count, Some(5000));

    // A repeat after the write patches the count on.
    updated(&rec);
    rec.flush().await;
    let Some(Call::Patch { patch, .. }) = writer.calls().pop() else {
        panic!("{:?}", writer.calls().pop())
    };
    assert_eq!(patch["count"], 5001);
    assert_eq!(rec.dropped() + rec.spam_filtered(), 0);
}

#[tokio::test(start_paused = true)]
async fn spam_filtered_and_given_up_events_are_counted() {
    let writer = Arc::new(ScriptedWriter::default());
    let rec = recorder(&writer);
    // 30 distinct events about one object, written one by one: the spam filter lets 25 through.
    for i in 0..30 {
        rec.event(&node("n1"), EventType::Normal, "R", format!("m{i}"));
        rec.flush().await;
    }
    assert_eq!(rec.spam_filtered(), 5);
    // A rejected event is lost, and counted.
    writer.errors.lock().push_back(422);
    rec.event(&node("n2"), EventType::Normal, "R", "x");
    rec.flush().await;
    assert_eq!(rec.dropped(), 1);
}
