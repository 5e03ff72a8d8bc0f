//! Label mode, the moving part: the informers of a sharded controller's primary kind (this
//! member's own label, and the unlabelled objects) and the loop that writes the labels under the
//! settled view: claim the unlabelled objects this member owns, move the ones the view gives to
//! another member, reclaim those of members that left the live set.
//!
//! Every write is a merge patch of the label alone with the object's resourceVersion as a
//! precondition, so of two members writing one object at once only one wins; a conflict is
//! retried on the next event or pass. The labels only decide what each member caches: the ring
//! gate in front of the reconciler still decides what it reconciles.

use std::sync::Arc;

use futures::{StreamExt, stream};
use kube::ResourceExt;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;
use tokio::sync::Notify;
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
    Store,
};

/// Label writes in flight at once.
const WRITES_AT_ONCE: usize = 16;
/// Page size of the reclaim list.
const RECLAIM_PAGE: u32 = 500;
/// Every this many retry periods the passes run again without a change: the claim and move
/// passes (a safety net for an object labelled to this member by one that held another view,
/// and for failed writes), and a reclaim list that had failed.
const SWEEP_EVERY: u32 = 10;

/// The informer of a sharded controller's primary kind `K` in `scope`. In label mode (see
/// [`Ring::label`]) it is narrowed to this member's label, and the informer of the unlabelled
/// objects and the label loop start beside it (until `stop`), writing through `client`; with
/// hash mode or no ring it is the shared informer of `scope`. Call it from the initializer,
/// before the factory starts; later calls for the same ring start nothing more.
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
    let narrowed = |also: &str| InformerScope {
        label_selector: Some(ShardLabel::narrow(scope.label_selector.as_deref(), also)),
        ..scope.clone()
    };
    let own = factory.informer_for::<K>(narrowed(&label.own_selector()));
    let unlabelled = factory.informer_for::<K>(narrowed(&label.unlabelled_selector()));
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
    let wake = Arc::new(Notify::new());
    let woken = wake.clone();
    unlabelled
        .add_handler(move |event: &Event<K>| {
            if !matches!(event, Event::Deleted(_)) {
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
        unlabelled: unlabelled.store(),
    };
    tokio::spawn(labeler.run(wake, stop));
    own
}

/// One member's label loop for one ring and kind.
struct Labeler<K: InformerResource> {
    ring: Ring,
    label: ShardLabel,
    /// The controller's own scope, which the reclaim list keeps to.
    scope: InformerScope,
    client: kube::Client,
    own: Store<K>,
    unlabelled: Store<K>,
}

impl<K: InformerResource> Labeler<K> {
    /// Until `stop`, under each settled view: a claim pass on every change of the ring and new
    /// unlabelled object, a move pass and a reclaim list once per view, and all of them again
    /// every [`SWEEP_EVERY`] retry periods (the reclaim only if it had failed).
    async fn run(self, wake: Arc<Notify>, stop: CancellationToken) {
        let mut changes = self.ring.changes();
        let mut tick = tokio::time::interval(self.ring.retry_period());
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        // (view id, whether every write of the pass succeeded) of the last move and reclaim.
        let mut moved: Option<(String, bool)> = None;
        let mut reclaimed: Option<(String, bool)> = None;
        let mut ticks = 0u32;
        loop {
            let (woken, sweep) = tokio::select! {
                biased;
                () = stop.cancelled() => return,
                changed = changes.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    (true, false)
                }
                () = wake.notified() => (true, false),
                _ = tick.tick() => {
                    ticks = ticks.wrapping_add(1);
                    (false, ticks.is_multiple_of(SWEEP_EVERY))
                }
            };
            let Some(view) = self.ring.settled_view() else {
                continue;
            };
            let id = view.id();
            let new_view = moved.as_ref().is_none_or(|(v, _)| *v != id);
            if !new_view && !sweep && !woken {
                continue;
            }
            self.claim(&view).await;
            if new_view || sweep {
                moved = Some((id.clone(), self.move_away(&view).await));
            }
            let retry = sweep && reclaimed.as_ref().is_some_and(|(v, ok)| *v == id && !ok);
            if reclaimed.as_ref().is_none_or(|(v, _)| *v != id) || retry {
                let ok = match self.reclaim(&view).await {
                    Ok(ok) => ok,
                    Err(e) => {
                        warn!(ring = self.ring.name(), error = %e, "failed to list the objects of departed shard members");
                        false
                    }
                };
                reclaimed = Some((id, ok));
            }
        }
    }

    fn owned_here(&self, view: &View, obj: &K) -> bool {
        view.owner(&ObjectKey::from_object(obj)) == Some(self.ring.identity())
    }

    /// Labels the unlabelled objects this member owns.
    async fn claim(&self, view: &View) -> bool {
        let mine = self.unlabelled.list().into_iter();
        let mine = mine.filter(|o| self.owned_here(view, o));
        self.write_all(
            mine.map(|o| (o, self.label.value.clone())),
            LabelWrite::Claim,
        )
        .await
    }

    /// Relabels this member's objects that `view` gives to another member: the write is the
    /// object's hand-over, made only once this member has drained and every member published
    /// `view`.
    async fn move_away(&self, view: &View) -> bool {
        let leaving = self.own.list().into_iter().filter_map(|o| {
            let owner = view.owner(&ObjectKey::from_object(&*o))?;
            (owner != self.ring.identity()).then(|| (o, member_value(owner)))
        });
        self.write_all(leaving, LabelWrite::Move).await
    }

    /// Lists (in pages) the objects labelled to a member not in `view` and labels those this
    /// member owns. `Ok(false)`: some write failed, list again.
    async fn reclaim(&self, view: &View) -> Result<bool, kube::Error> {
        let live: Vec<String> = view.members().iter().map(|m| member_value(m)).collect();
        let orphaned = self
            .label
            .orphaned_selector(live.iter().map(String::as_str));
        let selector = ShardLabel::narrow(self.scope.label_selector.as_deref(), &orphaned);
        let api =
            <K::Scope as ScopedApi>::api::<K>(self.client.clone(), self.scope.namespace.as_deref());
        let mut lp = ListParams::default().labels(&selector).limit(RECLAIM_PAGE);
        if let Some(fields) = &self.scope.field_selector {
            lp = lp.fields(fields);
        }
        let mut done = true;
        loop {
            let page = api.list(&lp).await?;
            let next = page.metadata.continue_.filter(|c| !c.is_empty());
            let mine = page.items.into_iter().filter(|o| self.owned_here(view, o));
            let mine = mine.map(|o| (Arc::new(o), self.label.value.clone()));
            done &= self.write_all(mine, LabelWrite::Reclaim).await;
            match next {
                Some(token) => lp = lp.continue_token(&token),
                None => break,
            }
        }
        Ok(done)
    }

    /// Writes each `(object, value)`, a few at once; whether all succeeded.
    async fn write_all(
        &self,
        writes: impl Iterator<Item = (Arc<K>, String)>,
        why: LabelWrite,
    ) -> bool {
        let results: Vec<bool> = stream::iter(writes)
            .map(|(obj, value)| async move { self.write(&obj, &value, why).await })
            .buffer_unordered(WRITES_AT_ONCE)
            .collect()
            .await;
        let written = results.iter().filter(|ok| **ok).count();
        if written > 0 {
            info!(ring = self.ring.name(), reason = ?why, written, "wrote shard assignment labels");
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
                debug!(ring = self.ring.name(), key = %ObjectKey::from_object(obj), "object changed before its label was written; retried");
                false
            }
            Err(e) => {
                warn!(ring = self.ring.name(), key = %ObjectKey::from_object(obj), error = %e, "failed to write a shard assignment label");
                false
            }
        }
    }
}
