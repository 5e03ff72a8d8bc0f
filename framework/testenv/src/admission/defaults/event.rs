//! Events, both APIs: the zero values upstream's typed objects always carry (`source: {}`,
//! null timestamps, empty reporting fields for core/v1; `deprecatedSource: {}` and null
//! `deprecated*Timestamp`s for events.k8s.io/v1). The namespace rule is `validation::event`.

use serde_json::{Value, json};

/// The zero-valued fields, by API group, as JSON pointers with their value.
pub fn zero_fields(group: &str) -> Vec<(&'static str, Value)> {
    if group == "events.k8s.io" {
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
pub fn default(group: &str, obj: &mut Value) {
    if let Some(m) = obj.as_object_mut() {
        for (ptr, zero) in zero_fields(group) {
            m.entry(&ptr[1..]).or_insert(zero);
        }
    }
}
