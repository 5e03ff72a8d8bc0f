//! The Node `NetworkUnavailable` condition the route controller owns (upstream
//! `updateNetworkingCondition`): written with a strategic merge patch of `nodes/<name>/status`
//! carrying only that condition (conditions merge by `type`), skipped when already current.

use k8s_openapi::api::core::v1::{Node, NodeCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use crate::retry::{UPDATE_NETWORK_CONDITION_BACKOFF, is_conflict, retry_on_conflict};

/// The condition type the route controller writes.
pub const NETWORK_UNAVAILABLE: &str = "NetworkUnavailable";
/// Reason when every pod CIDR of the node has a route.
pub const REASON_ROUTE_CREATED: &str = "RouteCreated";
/// Reason when some route is missing.
pub const REASON_NO_ROUTE_CREATED: &str = "NoRouteCreated";

fn desired(unavailable: bool) -> (&'static str, &'static str, &'static str) {
    if unavailable {
        (
            "True",
            REASON_NO_ROUTE_CREATED,
            "RouteController failed to create a route",
        )
    } else {
        (
            "False",
            REASON_ROUTE_CREATED,
            "RouteController created a route",
        )
    }
}

/// Whether the node already shows the desired condition with this controller's reason; a
/// condition with the right status but another writer's reason (a CNI) is overwritten.
pub fn condition_current(node: &Node, unavailable: bool) -> bool {
    let (status, reason, _) = desired(unavailable);
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == NETWORK_UNAVAILABLE))
        .is_some_and(|c| c.status == status && c.reason.as_deref() == Some(reason))
}

/// The patch body setting the condition, stamped `now`.
pub fn condition_patch(unavailable: bool, now: Time) -> Value {
    let (status, reason, message) = desired(unavailable);
    let condition = NodeCondition {
        type_: NETWORK_UNAVAILABLE.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        last_transition_time: Some(now.clone()),
        last_heartbeat_time: Some(now),
    };
    json!({ "status": { "conditions": [condition] } })
}

/// Writes the condition unless it is already current; retries only on 409 Conflict.
pub async fn update_networking_condition(
    client: &kube::Client,
    node: &Node,
    unavailable: bool,
) -> Result<(), kube::Error> {
    if condition_current(node, unavailable) {
        return Ok(());
    }
    let name = node.metadata.name.as_deref().unwrap_or_default();
    let api: Api<Node> = Api::all(client.clone());
    retry_on_conflict(UPDATE_NETWORK_CONDITION_BACKOFF, is_conflict, || {
        let body = condition_patch(unavailable, Time(k8s_openapi::jiff::Timestamp::now()));
        let api = api.clone();
        async move {
            api.patch_status(name, &PatchParams::default(), &Patch::Strategic(body))
                .await
                .map(drop)
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::NodeStatus;

    use super::*;

    fn node_with(cond: Option<(&str, &str)>) -> Node {
        Node {
            status: Some(NodeStatus {
                conditions: cond.map(|(status, reason)| {
                    vec![
                        NodeCondition {
                            type_: "Ready".into(),
                            status: "True".into(),
                            ..Default::default()
                        },
                        NodeCondition {
                            type_: NETWORK_UNAVAILABLE.into(),
                            status: status.into(),
                            reason: Some(reason.into()),
                            ..Default::default()
                        },
                    ]
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn condition_current_table() {
        let cases = [
            (None, false, false),
            (None, true, false),
            (Some(("False", REASON_ROUTE_CREATED)), false, true),
            (Some(("False", REASON_ROUTE_CREATED)), true, false),
            (Some(("True", REASON_NO_ROUTE_CREATED)), true, true),
            (Some(("True", REASON_NO_ROUTE_CREATED)), false, false),
            (Some(("False", "CalicoIsUp")), false, false),
            (Some(("True", "CniNotReady")), true, false),
        ];
        for (cond, unavailable, want) in cases {
            assert_eq!(
                condition_current(&node_with(cond), unavailable),
                want,
                "{cond:?} want unavailable={unavailable}"
            );
        }
    }

    #[test]
    fn patch_bodies() {
        let now = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        assert_eq!(
            condition_patch(true, now.clone()),
            json!({"status": {"conditions": [{
                "type": "NetworkUnavailable", "status": "True", "reason": "NoRouteCreated",
                "message": "RouteController failed to create a route",
                "lastTransitionTime": "1970-01-01T00:00:00Z", "lastHeartbeatTime": "1970-01-01T00:00:00Z",
            }]}})
        );
        let created = condition_patch(false, now);
        assert_eq!(created["status"]["conditions"][0]["status"], "False");
        assert_eq!(created["status"]["conditions"][0]["reason"], "RouteCreated");
        assert_eq!(
            created["status"]["conditions"][0]["message"],
            "RouteController created a route"
        );
    }
}
