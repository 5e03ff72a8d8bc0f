use super::*;
use crate::api::cel::compile::compile_root;
use serde_json::json;

fn schema() -> Schema {
    Schema::parse(&json!({"type": "object", "properties": {"spec": {
        "type": "object",
        "x-kubernetes-validations": [
            {"rule": "self.min <= self.max", "message": "min must not exceed max"},
            {"rule": "self.min == oldSelf.min", "message": "min is immutable"},
            {"rule": "!oldSelf.hasValue() || self.max >= oldSelf.value().max",
             "optionalOldSelf": true, "messageExpression": "'max may only grow, not to ' + string(self.max)"},
            {"rule": "self.max < 100", "reason": "FieldValueForbidden", "fieldPath": ".max", "message": "too big"}
        ],
        "properties": {
            "min": {"type": "integer"}, "max": {"type": "integer"},
            "name": {"type": "string", "x-kubernetes-validations": [{"rule": "self.matches('^[a-z]+$')"}]},
            "ports": {"type": "array", "maxItems": 16, "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"x-kubernetes-int-or-string": true, "maxLength": 15}},
                    "x-kubernetes-validations": [{"rule": "self.port == oldSelf.port", "message": "port is immutable"},
                                                 {"rule": "type(self.port) == int ? self.port > 0 : self.port != ''", "message": "bad port"}]}},
            "labels": {"type": "object", "additionalProperties": {"type": "string",
                "x-kubernetes-validations": [{"rule": "self.size() <= 3", "message": "label too long"}]}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"x": {"type": "integer"}},
                "x-kubernetes-validations": [{"rule": "has(self.x) && self.x == 1"}]}
        }
    }}}))
}

fn run(obj: Value, old: Option<Value>) -> Vec<String> {
    let s = schema();
    let crate::api::cel::compile::Compilation { tree, refused, .. } = compile_root(&s);
    assert!(refused.is_empty(), "{refused:?}");
    validate(&tree.unwrap(), &s, &obj, old.as_ref())
        .iter()
        .map(|c| format!("{}: {}", c.field, c.message))
        .collect()
}

fn spec(v: Value) -> Value {
    json!({"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "n"}, "spec": v})
}

#[test]
fn rules_at_every_level_fail_with_the_server_s_words() {
    let got = run(
        spec(
            json!({"min": 500, "max": 200, "name": "A", "labels": {"a": "long"},
            "ports": [{"name": "http", "port": 0}, {"name": "x", "port": "p"}], "free": {"x": 2}}),
        ),
        None,
    );
    assert_eq!(
        got,
        [
            "spec: Invalid value: \"object\": min must not exceed max",
            "spec.max: Forbidden: too big",
            "spec.free: Invalid value: \"object\": failed rule: has(self.x) && self.x == 1",
            "spec.labels[a]: Invalid value: \"string\": label too long",
            "spec.name: Invalid value: \"string\": failed rule: self.matches('^[a-z]+$')",
            "spec.ports[0]: Invalid value: \"object\": bad port",
        ]
    );
    assert!(run(spec(json!({"min": 1, "max": 2, "free": {"x": 1}})), None).is_empty());
}

#[test]
fn transition_rules_run_on_updates_where_old_values_correlate() {
    let old = spec(json!({"min": 1, "max": 5, "ports": [{"name": "a", "port": 1}]}));
    let new = spec(
        json!({"min": 2, "max": 4, "ports": [{"name": "b", "port": 2}, {"name": "a", "port": 3}]}),
    );
    assert_eq!(
        run(new, Some(old)),
        [
            "spec: Invalid value: \"object\": min is immutable",
            "spec: Invalid value: \"object\": max may only grow, not to 4",
            "spec.ports[1]: Invalid value: \"object\": port is immutable",
        ]
    );
}

#[test]
fn unchanged_invalid_values_are_ratcheted() {
    let old = spec(json!({"min": 1, "max": 2, "name": "BAD", "labels": {"a": "long"}}));
    let new =
        spec(json!({"min": 1, "max": 3, "name": "BAD", "labels": {"a": "long", "b": "long"}}));
    assert_eq!(
        run(new, Some(old)),
        ["spec.labels[b]: Invalid value: \"string\": label too long"]
    );
}

#[test]
fn runtime_errors_and_missing_fields() {
    let got = run(spec(json!({"max": 1})), None);
    assert_eq!(
        got,
        [
            "spec: Invalid value: \"object\": no such key: min evaluating rule: min must not exceed max"
        ]
    );
}

#[test]
fn an_expensive_rule_is_stopped_with_the_server_s_error() {
    let s = Schema::parse(
        &json!({"type": "object", "properties": {"spec": {"type": "object",
        "properties": {"l": {"type": "array", "items": {"type": "integer"},
            "x-kubernetes-validations": [{"rule": "self.all(a, self.all(b, self.all(c, a + b + c >= 0)))"}]}}}}}),
    );
    let tree = compile_root(&s).tree;
    let obj = spec(json!({"l": (0..200).collect::<Vec<_>>()}));
    let causes = validate(&tree.unwrap(), &s, &obj, None);
    assert_eq!(causes.len(), 1);
    assert_eq!(
        causes[0].message,
        "Invalid value: \"array\": 'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: self.all(a, self.all(b, self.all(c, a + b + c >= 0)))"
    );
}

mod any_json {
    use super::*;
    use proptest::prelude::*;

    /// Any JSON, with keys the schema knows among the others.
    fn json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("JSON has no NaN", |f| f.is_finite())
                .prop_map(|f| json!(f)),
            "[a-zA-Z0-9 /-]{0,8}".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
                prop::collection::btree_map(
                    "(min|max|name|ports|port|labels|free|x|a|zz)",
                    inner,
                    0..6
                )
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        /// Whatever JSON a write carries (the schema's own errors do not stop the rules), the
        /// rules answer with causes: nothing panics, the libraries included.
        #[test]
        fn rules_never_panic(new in json(), old in proptest::option::of(json())) {
            let s = schema();
            let tree = compile_root(&s).tree.unwrap();
            let old = old.map(spec);
            let causes = validate(&tree, &s, &spec(new), old.as_ref());
            // Not even one the evaluator had to catch.
            prop_assert!(causes.iter().all(|c| !c.message.contains("panicked")), "{causes:?}");
        }
    }
}
