//! Event, both APIs (`v1` and `events.k8s.io/v1`, namespaced, PUT creates): path-segment names;
//! the zero values upstream's typed objects always carry (`source: {}`, null timestamps, empty
//! reporting fields for core/v1; `deprecatedSource: {}` and null `deprecated*Timestamp`s for
//! events.k8s.io/v1), which nobody owns; upstream's `ValidateEventCreate`; the involved-object
//! field selectors; and `kubectl get events`' columns, the same for both.

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::events::v1 as events;
use k8s_pb::api::core::v1 as core_pb;
use k8s_pb::api::events::v1 as events_pb;
use serde_json::{Value, json};

use crate::api::kind::{
    Admission, Column, Kind, Lifecycle, NameRule, Names, Printer, Protobuf, Rest, Shape, Type,
    untrack_unsent,
};
use crate::api::printing::{since, text};
use crate::api::status::{Cause, go_quote};

const EVENTS_V1: &str = "events.k8s.io";

/// The core/v1 Event.
pub const CORE: Kind = Kind {
    ty: Type::of::<core::Event>(),
    names: NAMES,
    rest: REST,
    lifecycle: Lifecycle::Object,
    name_rule: NameRule::PathSegment,
    field_selectors: &[
        ("involvedObject.kind", "involvedObject.kind"),
        ("involvedObject.namespace", "involvedObject.namespace"),
        ("involvedObject.name", "involvedObject.name"),
        ("involvedObject.uid", "involvedObject.uid"),
        ("involvedObject.apiVersion", "involvedObject.apiVersion"),
        (
            "involvedObject.resourceVersion",
            "involvedObject.resourceVersion",
        ),
        ("involvedObject.fieldPath", "involvedObject.fieldPath"),
        ("reason", "reason"),
        ("reportingComponent", "reportingComponent"),
        ("source", "source.component"),
        ("type", "type"),
    ],
    patch_lists: &[],
    admission: Admission {
        defaults: Some(default_core),
        validate: Some(validate_core),
        untracked: Some(untracked_core),
        ..Admission::NONE
    },
    printer: PRINTER,
    protobuf: Protobuf::of::<core_pb::Event, core_pb::EventList>(),
    // The references are atomic structs (defaults-event-core-node.txt); `involvedObject` and
    // `source` are held by value.
    apply: Shape {
        atomic: &["involvedObject", "related"],
        value_structs: &["involvedObject", "source"],
        ..Shape::NONE
    },
};

/// The events.k8s.io/v1 Event, validated as the core Event it converts to.
pub const EVENTS: Kind = Kind {
    ty: Type::of::<events::Event>(),
    names: NAMES,
    rest: REST,
    lifecycle: Lifecycle::Object,
    name_rule: NameRule::PathSegment,
    field_selectors: &[
        ("regarding.kind", "regarding.kind"),
        ("regarding.namespace", "regarding.namespace"),
        ("regarding.name", "regarding.name"),
        ("regarding.uid", "regarding.uid"),
        ("regarding.apiVersion", "regarding.apiVersion"),
        ("regarding.resourceVersion", "regarding.resourceVersion"),
        ("regarding.fieldPath", "regarding.fieldPath"),
        ("reason", "reason"),
        ("reportingController", "reportingController"),
        ("type", "type"),
    ],
    patch_lists: &[],
    admission: Admission {
        defaults: Some(default_events),
        validate: Some(validate_events),
        untracked: Some(untracked_events),
        // defaults-event-events-v1-wrong-namespace.txt: `Event "x" is invalid`.
        invalid_as: Some(""),
        ..Admission::NONE
    },
    printer: PRINTER,
    protobuf: Protobuf::of::<events_pb::Event, events_pb::EventList>(),
    apply: Shape {
        atomic: &["regarding", "related"],
        ..Shape::NONE
    },
};

fn default_core(obj: &mut Value) {
    default("", obj);
}

fn default_events(obj: &mut Value) {
    default(EVENTS_V1, obj);
}

fn validate_core(obj: &Value, _old: Option<&Value>) -> Vec<Cause> {
    validate("", obj)
}

fn validate_events(obj: &Value, _old: Option<&Value>) -> Vec<Cause> {
    validate(EVENTS_V1, obj)
}

fn untracked_core(sent: &Value, view: &mut Value) {
    untracked("", sent, view);
}

fn untracked_events(sent: &Value, view: &mut Value) {
    untracked(EVENTS_V1, sent, view);
}

const NAMES: Names = Names {
    singular: "event",
    short: &["ev"],
    categories: &[],
};

const REST: Rest = Rest {
    create_on_update: true,
    ..Rest::PLAIN
};

/// upstream `printEvent` (wide, as the server prints), for both APIs.
const PRINTER: Printer = Printer {
    columns: &[
        Column::text("Last Seen"),
        Column::text("Type"),
        Column::text("Reason"),
        Column::text("Object"),
        Column::wide("Subobject"),
        Column::wide("Source"),
        Column::text("Message"),
        Column::wide("First Seen"),
        Column::wide("Count"),
        Column::wide("Name"),
    ],
    cells,
};

/// The zero-valued fields, by API group, as JSON pointers with their value.
fn zero_fields(group: &str) -> Vec<(&'static str, Value)> {
    if group == EVENTS_V1 {
        vec![
            ("/deprecatedSource", json!({})),
            ("/deprecatedFirstTimestamp", Value::Null),
            ("/deprecatedLastTimestamp", Value::Null),
        ]
    } else {
        vec![
            ("/source", json!({})),
            ("/firstTimestamp", Value::Null),
            ("/lastTimestamp", Value::Null),
            ("/eventTime", Value::Null),
            ("/reportingComponent", json!("")),
            ("/reportingInstance", json!("")),
        ]
    }
}

/// Adds the zero-valued fields an Event lacks.
fn default(group: &str, obj: &mut Value) {
    if let Some(m) = obj.as_object_mut() {
        for (ptr, zero) in zero_fields(group) {
            m.entry(&ptr[1..]).or_insert(zero);
        }
    }
}

/// The zero values are in the empty object the field manager compares with, so nobody owns them.
fn untracked(group: &str, sent: &Value, view: &mut Value) {
    let zeros: Vec<&str> = zero_fields(group).into_iter().map(|(p, _)| p).collect();
    untrack_unsent(sent, view, &zeros);
}

/// Event rules (upstream `ValidateEventCreate`): an event's namespace must agree with the object
/// it is about (events about cluster-scoped objects go to `default`, or `kube-system` for new-style
/// events), new-style events (with `eventTime`) name their reporter, action and reason, and
/// events.k8s.io/v1 events must be new-style with type Normal or Warning.
fn validate(group: &str, obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let text = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or("");
    let v1 = group == EVENTS_V1;
    let ns = text("/metadata/namespace");
    let involved_ns = if v1 {
        text("/regarding/namespace")
    } else {
        text("/involvedObject/namespace")
    };
    let new_style = obj.get("eventTime").is_some_and(|t| !t.is_null());
    let mismatch = || {
        Cause::invalid(
            "involvedObject.namespace",
            &go_quote(involved_ns),
            "does not match event.namespace",
        )
    };
    if v1 {
        if !new_style {
            causes.push(Cause::required("eventTime", ""));
        }
        let ty = text("/type");
        if ty != "Normal" && ty != "Warning" {
            causes.push(Cause::invalid(
                "type",
                "\"\"",
                &format!("has invalid value: {ty}"),
            ));
        }
    }
    if !new_style {
        if involved_ns.is_empty() {
            if !ns.is_empty() && ns != "default" {
                causes.push(mismatch());
            }
        } else if ns != involved_ns {
            causes.push(mismatch());
        }
    } else {
        if involved_ns.is_empty() && ns != "default" && ns != "kube-system" {
            causes.push(mismatch());
        }
        let (controller_field, controller) = if v1 {
            ("reportingController", text("/reportingController"))
        } else {
            ("reportingComponent", text("/reportingComponent"))
        };
        if controller.is_empty() {
            causes.push(Cause::required(controller_field, ""));
        }
        for (field, value) in [
            ("reportingInstance", text("/reportingInstance")),
            ("action", text("/action")),
            ("reason", text("/reason")),
        ] {
            if value.is_empty() {
                causes.push(Cause::required(field, ""));
            }
        }
    }
    causes
}

/// upstream `printEvent` (wide, as the server prints): core/v1 and events.k8s.io/v1 alike, the
/// latter's fields mapped as the internal Event has them.
fn cells(obj: &Value) -> Vec<Value> {
    let first_text = |ptrs: &[&str]| {
        ptrs.iter()
            .map(|p| text(obj, p))
            .find(|s| !s.is_empty())
            .unwrap_or("")
            .to_string()
    };
    let first = since(obj, "/firstTimestamp")
        .or_else(|| since(obj, "/deprecatedFirstTimestamp"))
        .or_else(|| since(obj, "/eventTime"))
        .unwrap_or_else(|| "<unknown>".into());
    let series = obj.get("series").filter(|s| s.is_object());
    let last = match series {
        Some(_) => since(obj, "/series/lastObservedTime").unwrap_or_else(|| "<unknown>".into()),
        None => since(obj, "/lastTimestamp")
            .or_else(|| since(obj, "/deprecatedLastTimestamp"))
            .unwrap_or_else(|| first.clone()),
    };
    let count = match series {
        Some(s) => s.get("count").and_then(Value::as_i64).unwrap_or(0),
        None => obj
            .get("count")
            .or_else(|| obj.get("deprecatedCount"))
            .and_then(Value::as_i64)
            .filter(|c| *c != 0)
            .unwrap_or(1),
    };
    let regarding = obj
        .get("involvedObject")
        .or_else(|| obj.get("regarding"))
        .cloned()
        .unwrap_or_else(|| json!({}));
    let kind = text(&regarding, "/kind").to_lowercase();
    let target = match text(&regarding, "/name") {
        "" => kind,
        name => format!("{kind}/{name}"),
    };
    let component = first_text(&[
        "/source/component",
        "/deprecatedSource/component",
        "/reportingComponent",
        "/reportingController",
    ]);
    let instance = first_text(&[
        "/source/host",
        "/deprecatedSource/host",
        "/reportingInstance",
    ]);
    let source = if instance.is_empty() {
        component
    } else {
        format!("{component}, {instance}")
    };
    let message = first_text(&["/message", "/note"]);
    vec![
        last.into(),
        text(obj, "/type").into(),
        text(obj, "/reason").into(),
        target.into(),
        text(&regarding, "/fieldPath").into(),
        source.into(),
        message.trim().into(),
        first.into(),
        count.into(),
        text(obj, "/metadata/name").into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_and_reporter_rules() {
        let old_style_node_event = json!({"metadata": {"namespace": "kube-system"}, "involvedObject": {"kind": "Node", "name": "n"}});
        let causes = validate("", &old_style_node_event);
        assert_eq!(causes.len(), 1);
        assert_eq!(
            causes[0].message,
            "Invalid value: \"\": does not match event.namespace"
        );
        let ok = json!({"metadata": {"namespace": "default"}, "involvedObject": {"kind": "Node", "name": "n"}});
        assert!(validate("", &ok).is_empty());
        let v1 = json!({"metadata": {"namespace": "default"}, "eventTime": "2026-01-01T00:00:00.000000Z", "type": "Normal", "regarding": {"kind": "Node"}, "reportingController": "c", "reportingInstance": "i", "action": "A", "reason": "R"});
        assert!(validate(EVENTS_V1, &v1).is_empty());
        let fields: Vec<String> = validate(
            EVENTS_V1,
            &json!({"metadata": {"namespace": "default"}, "type": "Bad"}),
        )
        .into_iter()
        .map(|c| c.field)
        .collect();
        assert_eq!(fields, ["eventTime", "type"]);
    }

    #[test]
    fn rows_show_what_kubectl_get_events_shows() {
        for kind in [CORE, EVENTS] {
            let event = if kind.ty.group.is_empty() {
                json!({"metadata": {"name": "web.1"}, "type": "Normal", "reason": "EnsuredLoadBalancer",
                    "message": "Ensured load balancer ", "involvedObject": {"kind": "Service", "name": "web"},
                    "source": {"component": "service-controller"}, "count": 3})
            } else {
                json!({"metadata": {"name": "web.1"}, "type": "Normal", "reason": "EnsuredLoadBalancer",
                    "note": "Ensured load balancer", "regarding": {"kind": "Service", "name": "web"},
                    "reportingController": "service-controller", "reportingInstance": "h1"})
            };
            let names: Vec<&str> = kind.printer.columns.iter().map(|c| c.name).collect();
            assert_eq!(names[..4], ["Last Seen", "Type", "Reason", "Object"]);
            let cells = (kind.printer.cells)(&event);
            assert_eq!(cells.len(), names.len());
            assert_eq!(
                cells[1..4],
                [
                    json!("Normal"),
                    json!("EnsuredLoadBalancer"),
                    json!("service/web")
                ]
            );
            assert_eq!(cells[6], "Ensured load balancer");
            assert_eq!(cells[9], "web.1");
            if kind.ty.group.is_empty() {
                assert_eq!(
                    (cells[5].clone(), cells[8].clone()),
                    (json!("service-controller"), json!(3))
                );
            } else {
                assert_eq!(
                    (cells[5].clone(), cells[8].clone()),
                    (json!("service-controller, h1"), json!(1))
                );
            }
        }
    }
}
