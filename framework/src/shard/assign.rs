//! Label mode, the moving part: the informer of a sharded controller's primary kind (this
//! member's own label only) and the loop that writes the labels under the settled view: claim
//! every object labelled to no live member, move the ones the view gives to another member.
//!
//! "Labelled to no live member" is one label selector, `<key> notin (<live values>)`: unlabelled
//! objects, those of members that left, and those whose label anyone set to a value no member
//! has (a typo, another cluster's member in a restored backup). Each member watches it while its
//! view is settled (the watch starts again with each settled view, its first list covering what
//! is there), so such an object is claimed by its owner as soon as the watch delivers it,
//! however the label got there, and whether or not the view changed since.
//!
//! Every write is a merge patch of the label alone with the object's resourceVersion as a
//! precondition, so of two members writing one object at once only one wins; a conflict is
//! retried on the object's next event. The labels only decide what each member caches: the ring
//! gate in front of the reconciler still decides what it reconciles.

use std::sync::Arc;

use futures::{StreamExt, stream};
use kube::ResourceExt;
use kube::api::{ListParams, Patch, PatchParams};
use kube_runtime::watcher;
use serde_json::json;
use tokio::sync::{Notify, watch as tokio_watch};
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::handover::Ring;
use super::label::{ShardLabel, member_value};
use super::metrics::LabelWrite;
use super::presence::Presence;
use super::ring::View;
use crate::informer::{
    Event, Informer, InformerResource, InformerScope, ObjectKey, ScopedApi, SharedInformerFactory,
    Store, with_backoff,
};

/// Label writes in flight at once.
const WRITES_AT_ONCE: usize = 16;
/// Every this many retry periods the move pass runs again without a change (a safety net for
/// failed writes), and the watch of unassigned objects starts again if a claim had failed.
const SWEEP_EVERY: u32 = 10;

/// The informer of a sharded controller's primary kind `K` in `scope`. In label mode (see
/// [`Ring::label`]) it is narrowed to this member's label, and the label loop starts beside it
/// (until `stop`), writing through `client`; with hash mode or no ring it is the shared informer
/// of `scope`. Call it from the initializer, before the factory starts; later calls for the same
/// ring start nothing more.
pub fn sharded_informer<K: InformerResource>(
    ring: Option<&Ring>,
    factory: &SharedInformerFactory,
    client: kube::Client,
    scope: InformerScope,
    stop: CancellationToken,
) -> Informer<K> {
    let Some((ring, label)) = ring.and_then(|r| r.label().map(|l| (r, l))) else {
        return factory.informer_for::<K>(scope);
    };
    let own = factory.informer_for::<K>(InformerScope {
        label_selector: Some(ShardLabel::narrow(
            scope.label_selector.as_deref(),
            &label.own_selector(),
        )),
        ..scope.clone()
    });
    let cached = own.store();
    let getter = client.clone();
    let first = ring.set_presence(Presence::new(
        move |key| cached.get(key).is_some(),
        // A LIST by name rather than a GET: the informers' `list` is granted already.
        move |key: ObjectKey| {
            let api = <K::Scope as ScopedApi>::api::<K>(getter.clone(), key.namespace.as_deref());
            let lp = ListParams::default().fields(&format!("metadata.name={}", key.name));
            Box::pin(async move { Ok(!api.list(&lp).await?.items.is_empty()) })
        },
    ));
    if !first {
        return own;
    }
    // An object labelled here that this member does not own under its settled view (a label
    // someone set to this member's value) is moved on at once, not at the next sweep.
    let misplaced = Arc::new(Notify::new());
    let (woken, owner) = (misplaced.clone(), ring.clone());
    own.add_handler(move |event: &Event<K>| {
        if !matches!(event, Event::Deleted(_))
            && owner.settled_view().is_some()
            && !owner.owns(&ObjectKey::from_object(&**event.object()))
        {
            woken.notify_one();
        }
    })
    .detach();
    let labeler = Labeler {
        ring: ring.clone(),
        label,
        scope,
        client,
        own: own.store(),
    };
    tokio::spawn(labeler.run(misplaced, stop));
    own
}

/// One member's label loop for one ring and kind.
struct Labeler<K: InformerResource> {
    ring: Ring,
    label: ShardLabel,
    /// The controller's own scope, which the watch of unassigned objects keeps to.
    scope: InformerScope,
    client: kube::Client,
    own: Store<K>,
}

impl<K: InformerResource> Labeler<K> {
    /// Until `stop`: under each settled view, claims what is labelled to no live member and
    /// moves what the view gives to others, until the view is no longer the settled one.
    async fn run(self, misplaced: Arc<Notify>, stop: CancellationToken) {
        let mut changes = self.ring.changes();
        loop {
            let Some(view) = self.ring.settled_view() else {
                tokio::select! {
                    biased;
                    () = stop.cancelled() => return,
                    changed = changes.changed() => if changed.is_err() { return },
                }
                continue;
            };
            let settled = view.id();
            let ended = until_unsettled(&self.ring, &mut changes, &settled);
            tokio::select! {
                biased;
                () = stop.cancelled() => return,
                open = ended => if !open { return },
                () = self.claim_unassigned(&view) => {}
                () = self.keep_moving(&view, &misplaced) => {}
            }
        }
    }

    fn sweep_period(&self) -> std::time::Duration {
        self.ring.retry_period() * SWEEP_EVERY
    }

    fn owned_here(&self, view: &View, obj: &K) -> bool {
        view.owner(&ObjectKey::from_object(obj)) == Some(self.ring.identity())
    }

    /// Watches the objects labelled to no member of `view` (unlabelled ones included) and
    /// labels those this member owns, as the watch delivers them. A watch whose claim failed
    /// (not a conflict: the object's next event retries that) starts again, with a fresh list,
    /// one sweep period later. Runs until dropped.
    async fn claim_unassigned(&self, view: &View) {
        let live: Vec<String> = view.members().iter().map(|m| member_value(m)).collect();
        let unassigned = self
            .label
            .unassigned_selector(live.iter().map(String::as_str));
        let mut config = watcher::Config::default().labels(&ShardLabel::narrow(
            self.scope.label_selector.as_deref(),
            &unassigned,
        ));
        if let Some(fields) = &self.scope.field_selector {
            config = config.fields(fields);
        }
        loop {
            let api = <K::Scope as ScopedApi>::api::<K>(
                self.client.clone(),
                self.scope.namespace.as_deref(),
            );
            let claims = with_backoff(watcher(api, config.clone()))
                .filter_map(|event| {
                    futures::future::ready(match event {
                        Ok(watcher::Event::Apply(obj) | watcher::Event::InitApply(obj)) => {
                            self.owned_here(view, &obj).then_some(obj)
                        }
                        Ok(_) => None,
                        Err(e) => {
                            warn!(ring = self.ring.name(), error = %e, "failed to watch the objects labelled to no live shard member; retrying");
                            None
                        }
                    })
                })
                .map(|obj| async move { self.claim(&obj).await })
                .buffer_unordered(WRITES_AT_ONCE);
            let mut claims = std::pin::pin!(claims);
            let mut failed = false;
            let mut retry = tokio::time::interval(self.sweep_period());
            retry.set_missed_tick_behavior(MissedTickBehavior::Delay);
            retry.reset();
            loop {
                tokio::select! {
                    written = claims.next() => match written {
                        Some(ok) => failed |= !ok,
                        None => break,
                    },
                    _ = retry.tick(), if failed => break,
                }
            }
        }
    }

    /// Labels `obj`, labelled to no live member, to this member; whether it was written (or
    /// is gone).
    async fn claim(&self, obj: &K) -> bool {
        let had = obj.labels().get(&self.label.key);
        let why = match had {
            None => LabelWrite::Claim,
            Some(value) => {
                info!(ring = self.ring.name(), key = %ObjectKey::from_object(obj), label = %value, "claiming an object labelled to no live shard member");
                LabelWrite::Reclaim
            }
        };
        self.write(obj, &self.label.value, why).await
    }

    /// The move pass on settling, on every sweep period and whenever an object labelled to
    /// another's share arrives here. Runs until dropped.
    async fn keep_moving(&self, view: &View, misplaced: &Notify) {
        let mut sweep = tokio::time::interval(self.sweep_period());
        sweep.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = sweep.tick() => {}
                () = misplaced.notified() => {}
            }
            self.move_away(view).await;
        }
    }

    /// Relabels this member's objects that `view` gives to another member: the write is the
    /// object's hand-over, made only once this member has drained and every member published
    /// `view`.
    async fn move_away(&self, view: &View) -> bool {
        let leaving = self.own.list().into_iter().filter_map(|o| {
            let owner = view.owner(&ObjectKey::from_object(&*o))?;
            (owner != self.ring.identity()).then(|| (o, member_value(owner)))
        });
        let results: Vec<bool> = stream::iter(leaving)
            .map(|(obj, value)| async move { self.write(&obj, &value, LabelWrite::Move).await })
            .buffer_unordered(WRITES_AT_ONCE)
            .collect()
            .await;
        let written = results.iter().filter(|ok| **ok).count();
        if written > 0 {
            info!(
                ring = self.ring.name(),
                written, "moved shard assignment labels to their owners"
            );
        }
        written == results.len()
    }

    /// Sets the label of `obj` to `value` unless it changed since it was read.
    async fn write(&self, obj: &K, value: &str, why: LabelWrite) -> bool {
        let api =
            <K::Scope as ScopedApi>::api::<K>(self.client.clone(), obj.namespace().as_deref());
        let patch = json!({"metadata": {
            "resourceVersion": obj.resource_version(),
            "labels": {self.label.key.as_str(): value},
        }});
        match api
            .patch(
                &obj.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => {
                self.ring.metrics().label_written(self.ring.name(), why);
                true
            }
            Err(kube::Error::Api(s)) if s.code == 404 => true,
            Err(kube::Error::Api(s)) if s.code == 409 => {
                debug!(ring = self.ring.name(), key = %ObjectKey::from_object(obj), "object changed before its label was written; retried on its next event");
                true
            }
            Err(e) => {
                warn!(ring = self.ring.name(), key = %ObjectKey::from_object(obj), error = %e, "failed to write a shard assignment label");
                false
            }
        }
    }
}

/// Resolves once `settled` is no longer `ring`'s settled view: `true`, or `false` when the ring
/// is gone.
async fn until_unsettled(
    ring: &Ring,
    changes: &mut tokio_watch::Receiver<u64>,
    settled: &str,
) -> bool {
    loop {
        if changes.changed().await.is_err() {
            return false;
        }
        if ring.settled_view().is_none_or(|v| v.id() != settled) {
            return true;
        }
    }
}
