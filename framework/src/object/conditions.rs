//! `status.conditions` maintenance with apimachinery's semantics (`meta.SetStatusCondition`,
//! `FindStatusCondition`, `RemoveStatusCondition`, `IsStatusConditionTrue`): one entry per type,
//! `lastTransitionTime` moves only when the status flips, and `reason`, `message` and
//! `observedGeneration` follow the latest call.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

/// A condition of `type_` for an object at `generation` (pass `metadata.generation`, so readers
/// can tell a stale condition from a current one). Its `lastTransitionTime` is left unset, which
/// [`set_condition`] fills with the current time when the status changes.
pub fn new_condition(
    type_: &str,
    status: bool,
    reason: &str,
    message: impl Into<String>,
    generation: Option<i64>,
) -> Condition {
    Condition {
        type_: type_.to_string(),
        status: if status { "True" } else { "False" }.to_string(),
        reason: reason.to_string(),
        message: message.into(),
        observed_generation: generation,
        last_transition_time: Time(Timestamp::UNIX_EPOCH),
    }
}

/// Sets `new` in `conditions`, returning whether anything changed (upstream
/// `meta.SetStatusCondition`): a new type is appended; for an existing one, a changed status also
/// moves `lastTransitionTime` (to `new`'s if set, else now), and reason, message and
/// observedGeneration are updated. An unset `lastTransitionTime` is the Unix epoch or earlier
/// (Go's zero time has no other spelling here).
pub fn set_condition(conditions: &mut Vec<Condition>, new: Condition) -> bool {
    set_condition_at(conditions, new, Timestamp::now())
}

fn set_condition_at(conditions: &mut Vec<Condition>, mut new: Condition, now: Timestamp) -> bool {
    let unset = |t: &Time| t.0 <= Timestamp::UNIX_EPOCH;
    let Some(existing) = conditions.iter_mut().find(|c| c.type_ == new.type_) else {
        if unset(&new.last_transition_time) {
            new.last_transition_time = Time(now);
        }
        conditions.push(new);
        return true;
    };
    let mut changed = false;
    if existing.status != new.status {
        existing.status = new.status;
        existing.last_transition_time = if unset(&new.last_transition_time) {
            Time(now)
        } else {
            new.last_transition_time
        };
        changed = true;
    }
    if existing.reason != new.reason {
        existing.reason = new.reason;
        changed = true;
    }
    if existing.message != new.message {
        existing.message = new.message;
        changed = true;
    }
    if existing.observed_generation != new.observed_generation {
        existing.observed_generation = new.observed_generation;
        changed = true;
    }
    changed
}

/// Removes the condition of `type_`, returning whether there was one.
pub fn remove_condition(conditions: &mut Vec<Condition>, type_: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    conditions.len() != before
}

/// The condition of `type_`, if set.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the condition of `type_` is set and `True`.
pub fn is_condition_true(conditions: &[Condition], type_: &str) -> bool {
    find_condition(conditions, type_).is_some_and(|c| c.status == "True")
}

/// Whether the condition of `type_` is set and `False` (unset is neither true nor false).
pub fn is_condition_false(conditions: &[Condition], type_: &str) -> bool {
    find_condition(conditions, type_).is_some_and(|c| c.status == "False")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap()
    }

    #[test]
    fn transition_time_moves_only_when_the_status_flips() {
        let mut conds = Vec::new();
        let ready = |status, msg: &str, generation| {
            new_condition("Ready", status, "Checked", msg, Some(generation))
        };
        assert!(set_condition_at(&mut conds, ready(true, "ok", 1), at(100)));
        assert_eq!(conds[0].last_transition_time, Time(at(100)));

        // Same status, new generation and message: updated, transition time kept.
        assert!(set_condition_at(
            &mut conds,
            ready(true, "still ok", 2),
            at(200)
        ));
        assert_eq!(conds[0].last_transition_time, Time(at(100)));
        assert_eq!(
            (conds[0].observed_generation, conds[0].message.as_str()),
            (Some(2), "still ok")
        );

        // Nothing different: no change reported, nothing written.
        assert!(!set_condition_at(
            &mut conds,
            ready(true, "still ok", 2),
            at(300)
        ));

        assert!(set_condition_at(
            &mut conds,
            ready(false, "broken", 2),
            at(400)
        ));
        assert_eq!(conds[0].last_transition_time, Time(at(400)));
        assert!(is_condition_false(&conds, "Ready") && !is_condition_true(&conds, "Ready"));

        // An explicit transition time is kept.
        let mut explicit = ready(true, "ok", 3);
        explicit.last_transition_time = Time(at(450));
        assert!(set_condition_at(&mut conds, explicit, at(500)));
        assert_eq!(conds[0].last_transition_time, Time(at(450)));

        let overlap = new_condition("Overlapping", false, "NoOverlap", "", Some(3));
        assert!(set_condition_at(&mut conds, overlap, at(600)));
        assert_eq!(conds.len(), 2);
        assert!(remove_condition(&mut conds, "Overlapping"));
        assert!(!remove_condition(&mut conds, "Overlapping"));
        assert!(find_condition(&conds, "Overlapping").is_none());
    }
}
