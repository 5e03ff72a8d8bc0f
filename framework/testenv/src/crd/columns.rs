//! `additionalPrinterColumns`: the columns a CRD version declares (Age when it declares none), and
//! each cell computed from the object with the simple JSONPath subset upstream allows (`.a.b`,
//! `.a[0]`, `.a[*]`, `.a[?(@.k=="v")].b`), typed as upstream's table convertor types it; dates as
//! ages (`api::printing::human_duration`).

use serde_json::{Value, json};

use crate::api::printing::human_duration;
use crate::api::types::Column;

/// `metadata.name`'s description, as upstream's Table column for it has it.
pub const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: http://kubernetes.io/docs/user-guide/identifiers#names";

const CREATION_DESCRIPTION: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// The printer columns of one `spec.versions[]` entry.
pub fn of_version(v: &Value) -> Vec<Column> {
    let declared: Vec<Column> = v
        .get("additionalPrinterColumns")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|c| {
                    let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                    let path = s("jsonPath");
                    let description = match s("description") {
                        d if d.is_empty() => {
                            format!(
                                "Custom resource definition column (in JSONPath format): {path}"
                            )
                        }
                        d => d,
                    };
                    Column {
                        name: s("name"),
                        ty: s("type"),
                        format: s("format"),
                        description,
                        priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                        json_path: path,
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    if !declared.is_empty() {
        return declared;
    }
    vec![Column {
        name: "Age".into(),
        ty: "date".into(),
        format: String::new(),
        description: CREATION_DESCRIPTION.into(),
        priority: 0,
        json_path: ".metadata.creationTimestamp".into(),
    }]
}

/// The Table column definitions: Name, then the version's columns.
pub fn definitions(columns: &[Column]) -> Vec<Value> {
    let mut out = vec![
        json!({"name": "Name", "type": "string", "format": "name", "description": NAME_DESCRIPTION, "priority": 0}),
    ];
    out.extend(columns.iter().map(|c| {
        json!({"name": c.name, "type": c.ty, "format": c.format, "description": c.description, "priority": c.priority})
    }));
    out
}

/// The cells after Name for one object (`null` where the path finds nothing or the wrong type).
pub fn cells(columns: &[Column], obj: &Value) -> Vec<Value> {
    columns
        .iter()
        .map(|c| match find(obj, &c.json_path).first() {
            None => Value::Null,
            Some(v) => typed(&c.ty, v),
        })
        .collect()
}

fn typed(ty: &str, v: &Value) -> Value {
    match (ty, v) {
        ("integer", Value::Number(n)) => n
            .as_i64()
            .map(Value::from)
            .or_else(|| n.as_f64().map(|f| Value::from(f as i64)))
            .unwrap_or(Value::Null),
        ("number", Value::Number(_)) | ("boolean", Value::Bool(_)) => v.clone(),
        ("date", Value::String(s)) => s
            .parse::<jiff::Timestamp>()
            .map(|t| {
                let secs = jiff::Timestamp::now().as_second() - t.as_second();
                Value::from(human_duration(secs))
            })
            .unwrap_or(Value::Null),
        ("string", Value::String(s)) => Value::from(s.clone()),
        ("string", other) => Value::from(other.to_string()),
        _ => Value::Null,
    }
}

enum Step {
    Field(String),
    Index(usize),
    All,
    Filter(String, Value),
}

fn parse(path: &str) -> Vec<Step> {
    let p = path.trim().trim_start_matches('{').trim_end_matches('}');
    let mut steps = Vec::new();
    let mut rest = p;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            if end > 0 {
                steps.push(Step::Field(r[..end].to_string()));
            }
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let Some(end) = r.find(']') else { break };
            let inner = r[..end].trim();
            rest = &r[end + 1..];
            if inner == "*" {
                steps.push(Step::All);
            } else if let Ok(i) = inner.parse() {
                steps.push(Step::Index(i));
            } else if let Some(f) = inner.strip_prefix("?(@.").and_then(|f| f.strip_suffix(')'))
                && let Some((k, v)) = f.split_once("==")
            {
                let v = v.trim().trim_matches(|c| c == '"' || c == '\'');
                steps.push(Step::Filter(k.trim().to_string(), Value::from(v)));
            } else {
                break;
            }
        } else {
            let end = rest.find(['.', '[']).unwrap_or(rest.len());
            steps.push(Step::Field(rest[..end].to_string()));
            rest = &rest[end..];
        }
    }
    steps
}

/// Every value the path selects.
pub fn find<'a>(obj: &'a Value, path: &str) -> Vec<&'a Value> {
    let mut cur = vec![obj];
    for step in parse(path) {
        cur = cur
            .into_iter()
            .flat_map(|v| -> Vec<&'a Value> {
                match (&step, v) {
                    (Step::Field(f), Value::Object(m)) => m.get(f).into_iter().collect(),
                    (Step::Index(i), Value::Array(a)) => a.get(*i).into_iter().collect(),
                    (Step::All, Value::Array(a)) => a.iter().collect(),
                    (Step::All, Value::Object(m)) => m.values().collect(),
                    (Step::Filter(k, want), Value::Array(a)) => a
                        .iter()
                        .filter(|i| {
                            let w = want.as_str().unwrap_or("");
                            i.get(k).is_some_and(|got| match got {
                                Value::String(g) => g == w,
                                other => other.to_string().as_str() == w,
                            })
                        })
                        .collect(),
                    _ => Vec::new(),
                }
            })
            .collect();
    }
    cur
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simple_json_paths() {
        let o = json!({"spec": {"size": 5, "list": [{"type": "Ready", "status": "True"}, {"type": "X", "status": "False"}]}});
        assert_eq!(find(&o, ".spec.size"), [&json!(5)]);
        assert_eq!(find(&o, ".spec.list[1].type"), [&json!("X")]);
        assert_eq!(find(&o, ".spec.list[*].status").len(), 2);
        assert_eq!(
            find(&o, ".spec.list[?(@.type==\"Ready\")].status"),
            [&json!("True")]
        );
        assert!(find(&o, ".status.none").is_empty());
    }
}
