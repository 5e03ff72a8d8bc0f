//! CEL types as the checker and the cost estimator see them, and what a structural schema node
//! is in CEL (upstream's `DeclType`): its type, the most elements one request can give a value
//! of it (characters, items, entries) and its smallest JSON form, from which the estimator
//! bounds lists and strings the schema leaves unbounded.

use std::collections::BTreeMap;
use std::fmt;
use std::rc::Rc;

use crate::api::structural::Schema;

/// The largest request body the server takes, which bounds what no `max*` does.
pub const MAX_REQUEST_SIZE: u64 = 3 * 1024 * 1024;

/// A CEL type.
#[derive(Clone, Debug)]
pub enum Ty {
    /// Checked at run time (`x-kubernetes-int-or-string`, unknown fields, `dyn(...)`).
    Dyn,
    /// `null`.
    Null,
    /// `bool`.
    Bool,
    /// `int`.
    Int,
    /// `uint`.
    Uint,
    /// `double`.
    Double,
    /// `string`.
    String,
    /// `bytes`.
    Bytes,
    /// `google.protobuf.Timestamp` (`format: date-time` / `date`).
    Timestamp,
    /// `google.protobuf.Duration` (`format: duration`).
    Duration,
    /// `list(T)`.
    List(Rc<Decl>),
    /// `map(K, V)`.
    Map(Rc<Decl>, Rc<Decl>),
    /// An object of a schema: its fields by (escaped) name.
    Object(Rc<Object>),
    /// The type of a type value (`type(x)`, `int`).
    Type(Rc<Ty>),
    /// A library type: `optional_type(T)`, `kubernetes.URL`, `net.IP`, ...
    Opaque(&'static str, Rc<[Ty]>),
    /// A type parameter of a function signature.
    Param(char),
}

/// The fields of an object type.
#[derive(Debug)]
pub struct Object {
    /// Escaped field name -> its declaration.
    pub fields: BTreeMap<String, Rc<Decl>>,
}

/// A type with the size bounds the cost estimator needs.
#[derive(Clone, Debug)]
pub struct Decl {
    /// The CEL type.
    pub ty: Ty,
    /// The most characters, items or entries a value has in one request (0 for scalars), when
    /// the schema says (`None` for values an expression makes).
    pub max: Option<u64>,
    /// The smallest JSON a value serializes to.
    pub min_size: u64,
}

impl Decl {
    /// A declaration without size bounds.
    pub fn of(ty: Ty) -> Rc<Decl> {
        Rc::new(Decl {
            ty,
            max: None,
            min_size: 1,
        })
    }
}

impl Ty {
    /// `list(elem)` of an unbounded list.
    pub fn list(elem: Ty) -> Ty {
        Ty::List(Decl::of(elem))
    }

    /// `map(key, value)`.
    pub fn map(key: Ty, value: Ty) -> Ty {
        Ty::Map(Decl::of(key), Decl::of(value))
    }

    /// `optional_type(inner)`.
    pub fn optional(inner: Ty) -> Ty {
        Ty::Opaque("optional_type", Rc::from(vec![inner]))
    }

    /// A library type without parameters.
    pub fn named(name: &'static str) -> Ty {
        Ty::Opaque(name, Rc::from(Vec::new()))
    }

    /// The same type, size bounds aside (objects are the same when they are one schema node).
    pub fn same(&self, other: &Ty) -> bool {
        match (self, other) {
            (Ty::List(a), Ty::List(b)) => a.ty.same(&b.ty),
            (Ty::Map(ak, av), Ty::Map(bk, bv)) => ak.ty.same(&bk.ty) && av.ty.same(&bv.ty),
            (Ty::Object(a), Ty::Object(b)) => Rc::ptr_eq(a, b),
            (Ty::Type(a), Ty::Type(b)) => a.same(b),
            (Ty::Opaque(a, ap), Ty::Opaque(b, bp)) => {
                a == b && ap.len() == bp.len() && ap.iter().zip(bp.iter()).all(|(x, y)| x.same(y))
            }
            (Ty::Param(a), Ty::Param(b)) => a == b,
            _ => std::mem::discriminant(self) == std::mem::discriminant(other),
        }
    }

    /// Whether values of this type are checked only at run time.
    pub fn is_dyn(&self) -> bool {
        matches!(self, Ty::Dyn)
    }

    /// The inner type of an optional.
    pub fn optional_inner(&self) -> Option<&Ty> {
        match self {
            Ty::Opaque("optional_type", p) => p.first(),
            _ => None,
        }
    }
}

impl fmt::Display for Ty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ty::Dyn => f.write_str("dyn"),
            Ty::Null => f.write_str("null"),
            Ty::Bool => f.write_str("bool"),
            Ty::Int => f.write_str("int"),
            Ty::Uint => f.write_str("uint"),
            Ty::Double => f.write_str("double"),
            Ty::String => f.write_str("string"),
            Ty::Bytes => f.write_str("bytes"),
            Ty::Timestamp => f.write_str("google.protobuf.Timestamp"),
            Ty::Duration => f.write_str("google.protobuf.Duration"),
            Ty::List(e) => write!(f, "list({})", e.ty),
            Ty::Map(k, v) => write!(f, "map({}, {})", k.ty, v.ty),
            Ty::Object(_) => f.write_str("object"),
            Ty::Type(t) => write!(f, "type({t})"),
            Ty::Opaque(name, params) if params.is_empty() => f.write_str(name),
            Ty::Opaque(name, params) => {
                let p: Vec<String> = params.iter().map(ToString::to_string).collect();
                write!(f, "{name}({})", p.join(", "))
            }
            Ty::Param(c) => write!(f, "{c}"),
        }
    }
}

/// Sizes in JSON upstream's estimator counts with.
mod json_size {
    /// `""`.
    pub const STRING: u64 = 2;
    /// `true`.
    pub const BOOL: u64 = 4;
    /// `0`.
    pub const NUMBER: u64 = 1;
    /// The shortest RFC 3339 date, quoted.
    pub const DATE: u64 = 12;
    /// The shortest RFC 3339 date-time, quoted.
    pub const MIN_DATE_TIME: u64 = 21;
    /// The longest date-time (and the bound of a duration), quoted.
    pub const MAX_DATE_TIME: u64 = 32;
    /// `"0"`.
    pub const MIN_DURATION: u64 = 3;
}

/// CEL's reserved words: no identifier may be one.
pub const RESERVED: &[&str] = &[
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// Escapes a property name into a CEL identifier as upstream does (`__` -> `__underscores__`,
/// `.` `-` `/` -> `__dot__` `__dash__` `__slash__`, reserved words -> `__word__`); `None` for a
/// name CEL cannot name (it is then left out of the object type).
pub fn escape(name: &str) -> Option<String> {
    let first = name.chars().next()?;
    if first.is_ascii_digit() {
        return None;
    }
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut out = String::with_capacity(name.len());
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '_' if chars.peek() == Some(&'_') => {
                chars.next();
                out.push_str("__underscores__");
            }
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c if c.is_ascii_alphanumeric() || c == '_' => out.push(c),
            _ => return None,
        }
    }
    Some(out)
}

/// The CEL declaration of a schema node (`None` where CEL cannot see it: untyped nodes that
/// only preserve unknown fields, arrays without items); `resource_root` adds `apiVersion`,
/// `kind` and `metadata.name` / `generateName` as at the root of a custom resource or of an
/// embedded resource.
pub fn schema_decl(s: &Schema, resource_root: bool) -> Option<Rc<Decl>> {
    if s.int_or_string {
        let max = match s.max_length {
            Some(m) => m.saturating_mul(4),
            None => MAX_REQUEST_SIZE - 2,
        };
        return Some(Rc::new(Decl {
            ty: Ty::Dyn,
            max: Some(max),
            min_size: 1,
        }));
    }
    let decl = |ty, max, min_size| {
        Some(Rc::new(Decl {
            ty,
            max: Some(max),
            min_size,
        }))
    };
    match s.ty.as_str() {
        "array" => {
            let items = s.items.as_deref()?;
            let elem = schema_decl(items, items.embedded)?;
            let max = s
                .max_items
                .unwrap_or((MAX_REQUEST_SIZE - 2) / (elem.min_size + 1));
            decl(Ty::List(elem), max, 2)
        }
        "object" if s.additional.is_some() => {
            let values = s.additional.as_deref()?;
            let value = schema_decl(values, values.embedded)?;
            let max = s
                .max_properties
                .unwrap_or((MAX_REQUEST_SIZE - 2) / (value.min_size + 6));
            let key = Rc::new(Decl {
                ty: Ty::String,
                max: Some(0),
                min_size: json_size::STRING,
            });
            decl(Ty::Map(key, value), max, 2)
        }
        "object" => Some(object_decl(s, resource_root)),
        "string" => decl(string_type(&s.format), string_max(s), string_min(&s.format)),
        "boolean" => decl(Ty::Bool, 0, json_size::BOOL),
        "number" => decl(Ty::Double, 0, json_size::NUMBER),
        "integer" => decl(Ty::Int, 0, json_size::NUMBER),
        _ => None,
    }
}

fn object_decl(s: &Schema, resource_root: bool) -> Rc<Decl> {
    let mut fields = BTreeMap::new();
    let mut min_size = 2;
    for (name, prop) in &s.properties {
        let Some(field) = schema_decl(prop, prop.embedded) else {
            continue;
        };
        if s.required.contains(name) && prop.default.is_none() {
            min_size += name.len() as u64 + field.min_size + 4;
        }
        if let Some(escaped) = escape(name) {
            fields.insert(escaped, field);
        }
    }
    if resource_root {
        let text = || {
            Rc::new(Decl {
                ty: Ty::String,
                max: Some(MAX_REQUEST_SIZE - 2),
                min_size: json_size::STRING,
            })
        };
        fields.entry("apiVersion".into()).or_insert_with(text);
        fields.entry("kind".into()).or_insert_with(text);
        let meta = Object {
            fields: [
                ("name".to_string(), text()),
                ("generateName".into(), text()),
            ]
            .into(),
        };
        fields.insert(
            "metadata".into(),
            Rc::new(Decl {
                ty: Ty::Object(Rc::new(meta)),
                max: Some(0),
                min_size: 2,
            }),
        );
    }
    Rc::new(Decl {
        ty: Ty::Object(Rc::new(Object { fields })),
        max: Some(0),
        min_size,
    })
}

fn string_type(format: &str) -> Ty {
    match format {
        "byte" => Ty::Bytes,
        "duration" => Ty::Duration,
        "date" | "date-time" => Ty::Timestamp,
        _ => Ty::String,
    }
}

fn string_max(s: &Schema) -> u64 {
    match s.format.as_str() {
        "duration" | "date-time" => return json_size::MAX_DATE_TIME,
        "date" => return json_size::DATE,
        "byte" => return s.max_length.unwrap_or(MAX_REQUEST_SIZE - 2),
        _ => {}
    }
    if let Some(m) = s.max_length {
        return m.saturating_mul(4);
    }
    match &s.enum_values {
        Some(values) if !values.is_empty() => values
            .iter()
            .filter_map(|v| v.as_str())
            .map(|v| v.len() as u64)
            .max()
            .unwrap_or(0),
        _ => MAX_REQUEST_SIZE - 2,
    }
}

fn string_min(format: &str) -> u64 {
    match format {
        "duration" => json_size::MIN_DURATION,
        "date" => json_size::DATE,
        "date-time" => json_size::MIN_DATE_TIME,
        _ => json_size::STRING,
    }
}

/// How many times a rule on a node of this smallest size can run on one object, when the lists
/// and maps above it do not bound that (upstream's `maxCardinality`).
pub fn max_cardinality(min_size: u64) -> u64 {
    MAX_REQUEST_SIZE / (min_size + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn escapes_as_upstream() {
        assert_eq!(escape("namespace").as_deref(), Some("__namespace__"));
        assert_eq!(
            escape("a-b.c/d").as_deref(),
            Some("a__dash__b__dot__c__slash__d")
        );
        assert_eq!(escape("a__b").as_deref(), Some("a__underscores__b"));
        assert_eq!(escape("a_b").as_deref(), Some("a_b"));
        assert_eq!(escape("1a"), None);
        assert_eq!(escape("a b"), None);
    }

    #[test]
    fn lists_without_max_items_are_bounded_by_the_request() {
        let s = Schema::parse(&json!({"type": "object", "properties": {
            "tags": {"type": "array", "items": {"type": "string"}},
            "short": {"type": "array", "maxItems": 3, "items": {"type": "string", "maxLength": 5}}
        }}));
        let root = schema_decl(&s, true).unwrap();
        let Ty::Object(o) = &root.ty else { panic!() };
        assert_eq!(o.fields["tags"].max, Some((MAX_REQUEST_SIZE - 2) / 3));
        assert_eq!(o.fields["short"].max, Some(3));
        let Ty::List(e) = &o.fields["short"].ty else {
            panic!()
        };
        assert_eq!(e.max, Some(20));
        assert!(o.fields.contains_key("apiVersion"));
    }
}
