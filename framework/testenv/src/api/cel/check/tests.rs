use super::*;
use crate::api::cel::parse::parse;
use crate::api::cel::types::schema_decl;
use crate::api::structural::Schema;
use serde_json::json;

fn env() -> Env {
    let s = Schema::parse(&json!({"type": "object", "properties": {
        "a": {"type": "integer"},
        "name": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "limits": {"type": "object", "additionalProperties": {"type": "integer"}},
        "port": {"x-kubernetes-int-or-string": true},
        "when": {"type": "string", "format": "date-time"}
    }}));
    let d = schema_decl(&s, false).unwrap();
    Env::new().var("self", d.clone()).var("oldSelf", d)
}

fn checked(src: &str) -> Result<Ty, String> {
    let p = parse(src).unwrap();
    check(&p, &env()).map(|c| c.output(&p))
}

#[test]
fn types_follow_the_schema() {
    assert!(matches!(checked("self.a > 1"), Ok(Ty::Bool)));
    assert!(matches!(
        checked("self.tags.all(t, t.size() < 3)"),
        Ok(Ty::Bool)
    ));
    assert!(matches!(
        checked("self.limits.all(k, self.limits[k] >= 0)"),
        Ok(Ty::Bool)
    ));
    assert!(matches!(checked("self.a"), Ok(Ty::Int)));
    assert!(matches!(checked("self.port"), Ok(Ty::Dyn)));
    assert!(matches!(
        checked("type(self.port) == int ? self.port < 5 : true"),
        Ok(Ty::Bool)
    ));
    assert!(matches!(
        checked("self.when < timestamp('2024-01-01T00:00:00Z')"),
        Ok(Ty::Bool)
    ));
    assert!(matches!(
        checked("self.tags.map(t, t.size()).sum() < 10"),
        Ok(Ty::Bool)
    ));
    assert!(matches!(
        checked("cel.bind(x, self.a, x + 1) > 2"),
        Ok(Ty::Bool)
    ));
    assert!(matches!(checked("self == oldSelf"), Ok(Ty::Bool)));
    assert!(matches!(
        checked("has(self.name) && self.name.matches('^a')"),
        Ok(Ty::Bool)
    ));
    assert!(matches!(
        checked("isURL(self.name) && url(self.name).getScheme() == 'https'"),
        Ok(Ty::Bool)
    ));
    assert!(matches!(
        checked("sets.contains(self.tags, ['a'])"),
        Ok(Ty::Bool)
    ));
    assert!(matches!(
        checked("quantity(self.name).isLessThan(quantity('1Gi'))"),
        Ok(Ty::Bool)
    ));
}

#[test]
fn errors_are_worded_and_placed_as_cel_go_does() {
    assert_eq!(
        checked("self.nosuchfield > 1").unwrap_err(),
        "ERROR: <input>:1:5: undefined field 'nosuchfield'\n | self.nosuchfield > 1\n | ....^"
    );
    assert_eq!(
        checked("isURLs(self.name)").unwrap_err(),
        "ERROR: <input>:1:7: undeclared reference to 'isURLs' (in container '')\n | isURLs(self.name)\n | ......^"
    );
    assert_eq!(
        checked("self.a + 'x' == 1").unwrap_err(),
        "ERROR: <input>:1:8: found no matching overload for '_+_' applied to '(int, string)'\n | self.a + 'x' == 1\n | .......^"
    );
    assert!(
        checked("self.name.size(1)")
            .unwrap_err()
            .contains("'string.(int)'")
    );
    assert!(
        checked("[1, 'a'].size() > 0")
            .unwrap_err()
            .contains("expected type 'int' but found 'string'")
    );
    assert!(
        checked("Foo{a: 1} == 1")
            .unwrap_err()
            .contains("undeclared reference to 'Foo'")
    );
    assert!(
        checked("self.a.all(x, x)")
            .unwrap_err()
            .contains("cannot be range of a comprehension")
    );
}
