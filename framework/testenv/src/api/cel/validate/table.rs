//! A table of rules, each with a value it admits and one it refuses, across the language, the
//! Kubernetes libraries and the levels of a schema (root objects, nested objects, list items,
//! map values, int-or-string, preserve-unknown-fields, formats).

use super::*;
use crate::api::cel::compile::compile_root;
use serde_json::json;

/// (the node's schema, rule, admitted value, refused value).
fn rows() -> Vec<(Value, &'static str, Value, Value)> {
    let s = |max: u64| json!({"type": "string", "maxLength": max});
    let int = json!({"type": "integer"});
    let strings =
        json!({"type": "array", "maxItems": 10, "items": {"type": "string", "maxLength": 10}});
    let ints = json!({"type": "array", "maxItems": 10, "items": {"type": "integer"}});
    let obj = json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"},
        "c": {"type": "string", "maxLength": 10}}});
    let map = json!({"type": "object", "maxProperties": 10, "additionalProperties": {"type": "string", "maxLength": 10}});
    let ios = json!({"x-kubernetes-int-or-string": true, "maxLength": 10});
    let free = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true,
        "properties": {"kind": {"type": "string", "maxLength": 10}}});
    vec![
        // The language.
        (int.clone(), "self > 0", json!(1), json!(0)),
        (int.clone(), "self % 2 == 0", json!(4), json!(3)),
        (int.clone(), "self * 2 < 10", json!(4), json!(5)),
        (
            int.clone(),
            "int(string(self)) == self && string(self).size() < 3",
            json!(12),
            json!(123),
        ),
        (int.clone(), "double(self) / 2.0 > 1.0", json!(3), json!(2)),
        (int.clone(), "self in [1, 2, 3]", json!(2), json!(4)),
        (
            int.clone(),
            "type(self) == int && self != 7",
            json!(1),
            json!(7),
        ),
        (
            obj.clone(),
            "self.a <= self.b",
            json!({"a": 1, "b": 2}),
            json!({"a": 3, "b": 2}),
        ),
        (
            obj.clone(),
            "has(self.a) == has(self.b)",
            json!({"a": 1, "b": 1}),
            json!({"a": 1}),
        ),
        (
            obj.clone(),
            "!has(self.c) || self.c != ''",
            json!({"c": "x"}),
            json!({"c": ""}),
        ),
        (
            obj.clone(),
            "[has(self.a), has(self.b), has(self.c)].filter(x, x).size() == 1",
            json!({"a": 1}),
            json!({"a": 1, "b": 2}),
        ),
        (
            obj.clone(),
            "has(self.a) ? self.a > 0 : true",
            json!({"b": 1}),
            json!({"a": -1}),
        ),
        (
            obj.clone(),
            "cel.bind(t, self.a + self.b, t < 10)",
            json!({"a": 1, "b": 2}),
            json!({"a": 9, "b": 2}),
        ),
        (
            obj.clone(),
            "self.?c.orValue('') != 'no'",
            json!({}),
            json!({"c": "no"}),
        ),
        (
            obj.clone(),
            "optional.ofNonZeroValue(self.?a.orValue(0)).hasValue()",
            json!({"a": 2}),
            json!({}),
        ),
        (
            strings.clone(),
            "self.all(x, x != '')",
            json!(["a"]),
            json!(["a", ""]),
        ),
        (
            strings.clone(),
            "self.exists(x, x == 'must')",
            json!(["must"]),
            json!(["may"]),
        ),
        (
            strings.clone(),
            "self.exists_one(x, x.startsWith('p'))",
            json!(["p1", "q"]),
            json!(["p1", "p2"]),
        ),
        (
            strings.clone(),
            "self.map(x, x.size()).all(n, n < 4)",
            json!(["abc"]),
            json!(["abcd"]),
        ),
        (
            strings.clone(),
            "self.size() == 0 || self[0] == 'first'",
            json!(["first", "x"]),
            json!(["x"]),
        ),
        (
            ints.clone(),
            "self.all(i, self.exists_one(j, i == j))",
            json!([1, 2]),
            json!([1, 1]),
        ),
        (
            map.clone(),
            "self.all(k, k.startsWith('x-'))",
            json!({"x-a": "1"}),
            json!({"a": "1"}),
        ),
        (
            map.clone(),
            "'required' in self",
            json!({"required": "y"}),
            json!({"other": "y"}),
        ),
        (
            map.clone(),
            "self.all(k, self[k] != '')",
            json!({"a": "1"}),
            json!({"a": ""}),
        ),
        // Strings (cel-go's and kube's extended strings).
        (
            s(20),
            "self.startsWith('pre-') && self.endsWith('-suf')",
            json!("pre-x-suf"),
            json!("x"),
        ),
        (s(20), "self.contains('@')", json!("a@b"), json!("ab")),
        (
            s(20),
            "self.matches('^[a-z]+$')",
            json!("abc"),
            json!("aBc"),
        ),
        (
            s(20),
            "self.lowerAscii() == self",
            json!("abc"),
            json!("ABC"),
        ),
        (
            s(20),
            "self.upperAscii() == self",
            json!("ABC"),
            json!("abc"),
        ),
        (s(20), "self.trim() == self", json!("a"), json!(" a ")),
        (
            s(20),
            "self.split(',').size() <= 2",
            json!("a,b"),
            json!("a,b,c"),
        ),
        (
            s(20),
            "self.replace('-', '') == self",
            json!("ab"),
            json!("a-b"),
        ),
        (s(20), "self.indexOf('.') == -1", json!("ab"), json!("a.b")),
        (
            s(20),
            "self.lastIndexOf('/') < 3",
            json!("a/b"),
            json!("abcd/e"),
        ),
        (
            s(20),
            "self.substring(0, 2) == 'ab'",
            json!("abc"),
            json!("bac"),
        ),
        (s(20), "self.charAt(0) != '_'", json!("a"), json!("_a")),
        (s(20), "self.find('[0-9]+') != ''", json!("a1"), json!("ab")),
        (
            s(20),
            "self.findAll('a').size() < 2",
            json!("ab"),
            json!("aab"),
        ),
        (s(20), "size(self) <= 5", json!("héllo"), json!("héllo!")),
        // Lists.
        (
            ints.clone(),
            "self.isSorted()",
            json!([1, 2, 3]),
            json!([2, 1]),
        ),
        (
            ints.clone(),
            "self.size() == 0 || self.sum() < 10",
            json!([1, 2]),
            json!([5, 6]),
        ),
        (
            ints.clone(),
            "self.size() == 0 || self.min() >= 0",
            json!([0, 1]),
            json!([-1]),
        ),
        (
            ints.clone(),
            "self.size() == 0 || self.max() <= 9",
            json!([9]),
            json!([10]),
        ),
        (
            ints.clone(),
            "self.indexOf(0) != 0",
            json!([1, 0]),
            json!([0, 1]),
        ),
        // Sets.
        (
            strings.clone(),
            "sets.contains(['a', 'b', 'c'], self)",
            json!(["a"]),
            json!(["d"]),
        ),
        (
            strings.clone(),
            "!sets.intersects(self, ['bad'])",
            json!(["ok"]),
            json!(["bad"]),
        ),
        (
            strings.clone(),
            "sets.equivalent(self, ['x', 'y'])",
            json!(["y", "x"]),
            json!(["x"]),
        ),
        // URLs, IPs and CIDRs, quantities, semver.
        (
            s(100),
            "isURL(self) && url(self).getScheme() == 'https'",
            json!("https://a.example"),
            json!("http://a.example"),
        ),
        (
            s(100),
            "url(self).getHostname() != 'localhost'",
            json!("https://a.example/x"),
            json!("https://localhost/x"),
        ),
        (
            s(100),
            "isIP(self) && ip(self).family() == 4",
            json!("10.0.0.1"),
            json!("::1"),
        ),
        (
            s(100),
            "isCIDR(self) && cidr(self).prefixLength() >= 16",
            json!("10.1.0.0/16"),
            json!("10.0.0.0/8"),
        ),
        (
            s(100),
            "cidr('10.0.0.0/8').containsIP(self)",
            json!("10.2.3.4"),
            json!("11.0.0.1"),
        ),
        (
            s(100),
            "ip(self).isLoopback() == false",
            json!("10.0.0.1"),
            json!("127.0.0.1"),
        ),
        (
            s(100),
            "isQuantity(self) && quantity(self).isLessThan(quantity('1Gi'))",
            json!("512Mi"),
            json!("2Gi"),
        ),
        (
            s(100),
            "quantity(self).compareTo(quantity('100m')) >= 0",
            json!("1"),
            json!("50m"),
        ),
        (
            s(100),
            "isSemver(self) && semver(self).major() >= 1",
            json!("1.2.3"),
            json!("0.9.0"),
        ),
        // Formats.
        (
            s(100),
            "!format.dns1123Label().validate(self).hasValue()",
            json!("my-name"),
            json!("My_Name"),
        ),
        (
            s(100),
            "!format.dns1123Subdomain().validate(self).hasValue()",
            json!("a.b-c"),
            json!("a..b"),
        ),
        // Schema formats and levels.
        (
            json!({"type": "string", "format": "date-time"}),
            "self < timestamp('2030-01-01T00:00:00Z')",
            json!("2024-01-01T00:00:00Z"),
            json!("2031-01-01T00:00:00Z"),
        ),
        (
            json!({"type": "string", "format": "duration"}),
            "self <= duration('1h')",
            json!("30m"),
            json!("2h"),
        ),
        (
            json!({"type": "string", "format": "byte", "maxLength": 100}),
            "size(self) < 4",
            json!("YWJj"),
            json!("YWJjZA=="),
        ),
        (
            json!({"type": "number"}),
            "self < 1.5",
            json!(1),
            json!(2.5),
        ),
        (
            ios.clone(),
            "type(self) == int ? self < 100 : self.endsWith('%')",
            json!(50),
            json!("50"),
        ),
        (
            ios.clone(),
            "type(self) == string || self > 0",
            json!("x"),
            json!(0),
        ),
        (
            free.clone(),
            "has(self.kind) && self.kind != 'Bad'",
            json!({"kind": "Ok", "other": 1}),
            json!({"kind": "Bad"}),
        ),
        (
            json!({"type": "boolean"}),
            "self",
            json!(true),
            json!(false),
        ),
        (
            json!({"type": "array", "maxItems": 5, "items": {"type": "object", "properties": {"n": {"type": "string", "maxLength": 5}}}}),
            "self.all(i, self.exists_one(j, i.n == j.n))",
            json!([{"n": "a"}, {"n": "b"}]),
            json!([{"n": "a"}, {"n": "a"}]),
        ),
    ]
}

#[test]
fn every_rule_admits_one_value_and_refuses_the_other() {
    let rows = rows();
    assert!(rows.len() >= 60, "{}", rows.len());
    for (node, rule, good, bad) in rows {
        let mut node = node;
        node["x-kubernetes-validations"] = json!([{"rule": rule}]);
        let s = Schema::parse(&json!({"type": "object", "properties": {"v": node}}));
        let compiled = compile_root(&s);
        assert!(
            compiled.refused.is_empty(),
            "{rule}: {:?}",
            compiled.refused
        );
        let tree = compiled.tree.unwrap();
        let admitted = validate(&tree, &s, &json!({"v": good}), None);
        assert!(admitted.is_empty(), "{rule} refused {good}: {admitted:?}");
        let refused = validate(&tree, &s, &json!({"v": bad}), None);
        assert_eq!(refused.len(), 1, "{rule} on {bad}: {refused:?}");
        assert!(
            refused[0]
                .message
                .ends_with(&format!("failed rule: {rule}")),
            "{rule} on {bad}: {refused:?}"
        );
    }
}
