//! Pacing of one cloud method's callers after the cloud answered it with `Retry { after }` (a
//! 429): the answer is about the cloud's quota, not one object, so instead of every caller
//! calling again at once (and all but one being refused, each refusal an event and a retry),
//! the callers of every controller take turns until the turns run out, then call freely again.
//! The spacing of turns adapts to the quota without knowing it: at least the cloud's `after`, doubled on each refusal while pacing, shrunk by a
//! quarter on each accepted call (additive back-off, multiplicative recovery, bounded).

use std::time::Duration;

/// Longest spacing of turns, however often the cloud refuses.
const MAX_SPACING: Duration = Duration::from_secs(1);

use parking_lot::Mutex;
use tokio::time::Instant;

#[derive(Debug, Default)]
struct Turns {
    /// The next free turn, while pacing.
    next: Option<Instant>,
    /// Spacing of turns.
    spacing: Duration,
    /// When the spacing was last widened: refusals of calls made together widen it once.
    widened: Option<Instant>,
    /// Refusals so far, so a caller can tell whether pacing began while it waited elsewhere.
    refusals: u64,
}

/// Shared by every caller of one method through the budget.
#[derive(Debug, Default)]
pub(super) struct RetryPacer {
    turns: Mutex<Turns>,
}

impl RetryPacer {
    /// When the caller may call the cloud: now, or its turn while pacing.
    fn claim(&self, now: Instant) -> Instant {
        let mut turns = self.turns.lock();
        match turns.next {
            Some(next) if next > now => {
                turns.next = Some(next + turns.spacing);
                next
            }
            _ => {
                turns.next = None;
                now
            }
        }
    }

    /// Waits for the caller's turn (returns at once when not pacing); returns the refusals seen
    /// so far, for [`Self::wait_if_refused_since`].
    pub(super) async fn wait(&self) -> u64 {
        let now = Instant::now();
        let at = self.claim(now);
        if at > now {
            tokio::time::sleep_until(at).await;
        }
        self.turns.lock().refusals
    }

    /// Waits for a turn only if the cloud refused a call since `seen` (pacing began while the
    /// caller waited for something else), so no call goes out in the middle of a fresh pause.
    pub(super) async fn wait_if_refused_since(&self, seen: u64) {
        if self.turns.lock().refusals != seen {
            self.wait().await;
        }
    }

    /// The cloud refused a call and asked for `after`: no call before then, and turns spaced at
    /// least `after`, twice as far apart as before if already pacing.
    pub(super) fn refused(&self, after: Duration) {
        let now = Instant::now();
        let mut turns = self.turns.lock();
        turns.refusals += 1;
        let pacing = turns.next.is_some_and(|n| n > now);
        let recently = turns
            .widened
            .is_some_and(|w| now.saturating_duration_since(w) < turns.spacing);
        let spacing = match (pacing, recently) {
            (false, _) => after,
            (true, true) => turns.spacing,
            (true, false) => {
                turns.widened = Some(now);
                turns.spacing * 2
            }
        };
        turns.spacing = spacing.max(after).min(MAX_SPACING);
        let resume = now + after;
        turns.next = Some(turns.next.map_or(resume, |n| n.max(resume)));
    }

    /// The cloud accepted a call: while pacing, turns come a quarter sooner.
    pub(super) fn accepted(&self) {
        let mut turns = self.turns.lock();
        if turns.next.is_some() {
            turns.spacing = turns.spacing * 3 / 4;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_until_refused_then_turns_after_apart_then_free_again() {
        let p = RetryPacer::default();
        let t0 = Instant::now();
        assert_eq!(p.claim(t0), t0, "no pacing before a refusal");
        assert_eq!(p.claim(t0), t0);
        let after = Duration::from_millis(50);
        p.refused(after);
        let now = Instant::now();
        let turns: Vec<Duration> = (0..4).map(|_| p.claim(now) - now).collect();
        let ms = |n| Duration::from_millis(n);
        assert!(turns[0] <= ms(50) && turns[0] > ms(49), "{turns:?}");
        assert_eq!(turns[1] - turns[0], after);
        assert_eq!(turns[3] - turns[2], after);
        // Once the turns are used up, calls are free again.
        let later = now + ms(1000);
        assert_eq!(p.claim(later), later);
        assert_eq!(p.claim(later), later);
    }

    #[test]
    fn spacing_widens_on_refusals_and_recovers_on_success() {
        let p = RetryPacer::default();
        let ms = |n| Duration::from_millis(n);
        p.refused(ms(10));
        assert_eq!(p.turns.lock().spacing, ms(10));
        p.refused(ms(10));
        p.refused(ms(10));
        assert_eq!(
            p.turns.lock().spacing,
            ms(20),
            "calls refused together widen once"
        );
        p.accepted();
        assert_eq!(p.turns.lock().spacing, ms(15));
        for _ in 0..20 {
            p.turns.lock().widened = None;
            p.refused(ms(10));
        }
        assert_eq!(p.turns.lock().spacing, MAX_SPACING);
    }

    #[tokio::test(start_paused = true)]
    async fn ten_waiting_workers_call_one_at_a_time() {
        let p = std::sync::Arc::new(RetryPacer::default());
        p.refused(Duration::from_millis(50));
        let t0 = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..10 {
            let p = p.clone();
            tasks.push(tokio::spawn(async move {
                p.wait().await;
                Instant::now()
            }));
        }
        let mut at = Vec::new();
        for t in tasks {
            at.push((t.await.unwrap() - t0).as_millis());
        }
        at.sort();
        assert_eq!(at, [50, 100, 150, 200, 250, 300, 350, 400, 450, 500]);
    }
}
