//! One call of an expression, its arguments evaluated: the operators and functions whose `cel`
//! crate behaviour differs from cel-go's are run here (string `size` in characters, equality
//! across numeric types, `in`, indexing, `type`, `dyn`, regular expressions compiled once), the
//! rest by the `cel` crate with kube-cel's libraries registered; and what the call costs in
//! cel-go's runtime model (string functions by length, `in` by list size, regexes by string
//! times pattern).

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use kube_cel::KubeCelExt;
use kube_cel::cel::common::ast::{CallExpr, Expr, IdedExpr};
use kube_cel::cel::objects::{Key, Opaque};
use kube_cel::cel::{Context, ExecutionError, Value as Cel};

use super::basics::{Error, as_optional, key_of, no_overload, optional, runtime, size_of};

/// The namespaces of namespaced functions (`sets.contains`, `math.greatest`, ...).
const NAMESPACES: &[&str] = &[
    "sets",
    "math",
    "format",
    "base64",
    "optional",
    "strings",
    "lists",
    "jsonpatch",
    "ip",
];

/// Whether an identifier in call-target position names a function namespace.
pub fn is_namespace(ident: &str) -> bool {
    NAMESPACES.contains(&ident)
}

/// A type as a value (`type(x)`, `int`).
#[derive(Debug, PartialEq, Eq)]
pub struct TypeValue(String);

impl Opaque for TypeValue {
    fn runtime_type_name(&self) -> &str {
        "type"
    }
}

impl TypeValue {
    /// The type an identifier names, if it names one.
    pub fn named(ident: &str) -> Option<TypeValue> {
        let known = [
            "int",
            "uint",
            "double",
            "bool",
            "string",
            "bytes",
            "list",
            "map",
            "null_type",
            "type",
            "google.protobuf.Timestamp",
            "google.protobuf.Duration",
        ];
        known.contains(&ident).then(|| TypeValue(ident.to_string()))
    }

    /// The type of a value.
    pub fn of(v: &Cel) -> TypeValue {
        TypeValue(
            match v {
                Cel::Int(_) => "int",
                Cel::UInt(_) => "uint",
                Cel::Float(_) => "double",
                Cel::String(_) => "string",
                Cel::Bytes(_) => "bytes",
                Cel::Bool(_) => "bool",
                Cel::Null => "null_type",
                Cel::List(_) => "list",
                Cel::Map(_) => "map",
                Cel::Timestamp(_) => "google.protobuf.Timestamp",
                Cel::Duration(_) => "google.protobuf.Duration",
                Cel::Function(..) => "function",
                Cel::Opaque(o) => o.runtime_type_name(),
            }
            .to_string(),
        )
    }
}

/// Runs a call; its value and cost.
pub fn call(
    name: &str,
    namespace: Option<&str>,
    target: Option<&Cel>,
    mut args: Vec<Cel>,
) -> (Result<Cel, Error>, u64) {
    let value = match concat(name, namespace, target, &mut args) {
        Some(v) => Ok(v),
        None => match native(name, namespace, target, &args) {
            Some(v) => v,
            None => delegate(name, namespace, target, &args),
        },
    };
    let cost = match &value {
        Ok(result) => cost(name, namespace, target, &args, result),
        Err(_) => cost(name, namespace, target, &args, &Cel::Null),
    };
    (value, cost)
}

fn native(
    name: &str,
    namespace: Option<&str>,
    target: Option<&Cel>,
    args: &[Cel],
) -> Option<Result<Cel, Error>> {
    if namespace.is_some() {
        return None;
    }
    Some(match (name, target, args) {
        ("size", None, [v]) | ("size", Some(v), []) => match v {
            Cel::String(_) | Cel::Bytes(_) | Cel::List(_) | Cel::Map(_) => {
                Ok(Cel::Int(size_of(v) as i64))
            }
            _ => Err(no_overload()),
        },
        ("_==_", None, [a, b]) => Ok(Cel::Bool(a == b)),
        ("_!=_", None, [a, b]) => Ok(Cel::Bool(a != b)),
        ("@in", None, [v, Cel::List(l)]) => Ok(Cel::Bool(l.iter().any(|x| x == v))),
        ("@in", None, [v, Cel::Map(m)]) => key_of(v).map(|k| Cel::Bool(m.get(&k).is_some())),
        ("_[_]", None, [container, index]) => index_of(container, index),
        ("_[?_]", None, [container, index]) => {
            let inner = match as_optional(container) {
                Some(None) => return Some(Ok(optional(None))),
                Some(Some(v)) => v.clone(),
                None => container.clone(),
            };
            Ok(optional(index_of(&inner, index).ok()))
        }
        ("type", None, [v]) => Ok(Cel::Opaque(Arc::new(TypeValue::of(v)))),
        ("dyn", None, [v]) => Ok(v.clone()),
        ("matches", Some(Cel::String(s)), [Cel::String(p)])
        | ("matches", None, [Cel::String(s), Cel::String(p)]) => {
            with_regex(p, |re| Cel::Bool(re.is_match(s)))
        }
        _ => return None,
    })
}

/// `list + list`, growing the left list in place when nothing else holds it (the accumulator
/// of `map` and `filter`), so building a list element by element stays linear.
fn concat(
    name: &str,
    namespace: Option<&str>,
    target: Option<&Cel>,
    args: &mut Vec<Cel>,
) -> Option<Cel> {
    if name != "_+_" || namespace.is_some() || target.is_some() || args.len() != 2 {
        return None;
    }
    if !matches!(args.as_slice(), [Cel::List(_), Cel::List(_)]) {
        return None;
    }
    let right = args.pop()?;
    let left = args.pop()?;
    let (Cel::List(mut l), Cel::List(r)) = (left, right) else {
        return None;
    };
    Arc::make_mut(&mut l).extend(r.iter().cloned());
    // The cost model sizes the operands; keep them for it (the right one is small).
    args.push(Cel::Int(0));
    args.push(Cel::List(r));
    Some(Cel::List(l))
}

fn index_of(container: &Cel, index: &Cel) -> Result<Cel, Error> {
    match (container, index) {
        (Cel::List(l), Cel::Int(_) | Cel::UInt(_)) => {
            let i = match index {
                Cel::Int(i) => *i,
                Cel::UInt(u) => i64::try_from(*u).unwrap_or(i64::MAX),
                _ => 0,
            };
            usize::try_from(i)
                .ok()
                .and_then(|i| l.get(i))
                .cloned()
                .ok_or_else(|| {
                    runtime(format!(
                        "index '{i}' out of range in list size '{}'",
                        l.len()
                    ))
                })
        }
        (Cel::Map(m), k) => {
            let key = key_of(k)?;
            m.get(&key).cloned().ok_or_else(|| {
                let shown = match &key {
                    Key::String(s) => s.to_string(),
                    Key::Int(i) => i.to_string(),
                    Key::Uint(u) => u.to_string(),
                    Key::Bool(b) => b.to_string(),
                };
                runtime(format!("no such key: {shown}"))
            })
        }
        _ => Err(no_overload()),
    }
}

thread_local! {
    /// The functions of a Kubernetes CEL environment: the `cel` crate's and kube-cel's.
    static FUNCTIONS: Context<'static> = Context::default().with_all();
    /// Compiled patterns of this thread, so a rule over a list compiles its regex once.
    static REGEXES: RefCell<HashMap<String, Result<regex::Regex, String>>> =
        RefCell::new(HashMap::new());
}

/// Compiles (or finds) a pattern and applies `f`; a pattern that does not compile is the
/// error cel-go reports for it.
fn with_regex(pattern: &str, f: impl FnOnce(&regex::Regex) -> Cel) -> Result<Cel, Error> {
    REGEXES.with(|cache| {
        let mut cache = cache.borrow_mut();
        if cache.len() > 256 {
            cache.clear();
        }
        let compiled = cache
            .entry(pattern.to_string())
            .or_insert_with(|| compile_regex(pattern));
        match compiled {
            Ok(re) => Ok(f(re)),
            Err(e) => Err(runtime(e.clone())),
        }
    })
}

/// A pattern compiled as RE2 would take it, or cel-go's error for it.
pub fn compile_regex(pattern: &str) -> Result<regex::Regex, String> {
    regex::RegexBuilder::new(pattern)
        .size_limit(1 << 20)
        .build()
        .map_err(|e| {
            let detail = e.to_string();
            let last = detail.lines().last().unwrap_or("").trim();
            format!(
                "error parsing regexp: {}",
                last.strip_prefix("error: ").unwrap_or(last)
            )
        })
}

/// Runs a call through the `cel` crate: a call expression whose receiver and arguments are
/// variables bound to the values already evaluated.
fn delegate(
    name: &str,
    namespace: Option<&str>,
    target: Option<&Cel>,
    args: &[Cel],
) -> Result<Cel, Error> {
    let ident = |n: String| IdedExpr {
        id: 0,
        expr: Expr::Ident(n),
    };
    let receiver = match (namespace, target) {
        (Some(ns), _) => Some(Box::new(ident(ns.to_string()))),
        (None, Some(_)) => Some(Box::new(ident("@t".into()))),
        (None, None) => None,
    };
    let call = IdedExpr {
        id: 0,
        expr: Expr::Call(CallExpr {
            func_name: name.to_string(),
            target: receiver,
            args: (0..args.len()).map(|i| ident(format!("@a{i}"))).collect(),
        }),
    };
    FUNCTIONS.with(|functions| {
        let mut ctx = functions.new_inner_scope();
        if let Some(t) = target {
            ctx.add_variable_from_value("@t", t.clone());
        }
        for (i, a) in args.iter().enumerate() {
            ctx.add_variable_from_value(format!("@a{i}"), a.clone());
        }
        Cel::resolve(&call, &ctx).map_err(|e| translate(name, e))
    })
}

/// The `cel` crate's errors in cel-go's words.
fn translate(name: &str, e: ExecutionError) -> Error {
    runtime(match e {
        ExecutionError::NoSuchKey(k) => format!("no such key: {k}"),
        ExecutionError::DivisionByZero(_) => "division by zero".into(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".into(),
        ExecutionError::Overflow(_, a, _) => match a {
            Cel::UInt(_) => "unsigned integer overflow".into(),
            Cel::Duration(_) => "duration overflow".into(),
            Cel::Timestamp(_) => "timestamp overflow".into(),
            _ => "integer overflow".into(),
        },
        ExecutionError::FunctionError { message, .. } => message,
        ExecutionError::UndeclaredReference(_) => {
            format!("no such overload: kube-testenv does not implement {name}")
        }
        _ => "no such overload".into(),
    })
}

/// What a call costs in cel-go's runtime model (with the Kubernetes libraries' costs).
fn cost(
    name: &str,
    namespace: Option<&str>,
    target: Option<&Cel>,
    args: &[Cel],
    result: &Cel,
) -> u64 {
    let size = |v: Option<&Cel>| v.map(size_of).unwrap_or(0) as f64;
    let tenth = |n: f64| (n * 0.1).ceil() as u64;
    // cel-go's runtime counts the receiver as the first argument.
    let first = target.or(args.first());
    let second = if target.is_some() {
        args.first()
    } else {
        args.get(1)
    };
    let stringy = |v: Option<&Cel>| matches!(v, Some(Cel::String(_) | Cel::Bytes(_)));
    match (namespace, name) {
        (Some("strings"), "quote") => tenth(size(args.first())),
        (Some("ip"), "isCanonical") => (size(args.first()) * 0.2).ceil() as u64,
        (Some(_), _) => 1,
        (None, "startsWith" | "endsWith" | "format") => tenth(size(first)),
        (None, "string" | "bytes") if stringy(first) => tenth(size(first)),
        (None, "@in") if matches!(second, Some(Cel::List(_))) => size(second) as u64,
        (None, "_==_" | "_!=_") => tenth(size(first).min(size(second))),
        (None, "_<_" | "_<=_" | "_>_" | "_>=_") if stringy(first) => {
            tenth(size(first).min(size(second)))
        }
        (None, "_+_") if stringy(first) => tenth(size(first) + size(second)),
        (None, "matches" | "find" | "findAll") => {
            tenth(1.0 + size(first)) * (size(second) * 0.25).ceil() as u64
        }
        (None, "contains") if stringy(first) => tenth(size(first)) * tenth(size(second)),
        (None, "isSorted" | "sum" | "max" | "min" | "indexOf" | "lastIndexOf") => {
            first.map(traversal).unwrap_or(1)
        }
        (
            None,
            "url" | "lowerAscii" | "upperAscii" | "substring" | "trim" | "cidr" | "isIP" | "isCIDR"
            | "quantity" | "isQuantity" | "semver" | "isSemver" | "isURL",
        ) => tenth(size(first)),
        (None, "ip") if stringy(first) => tenth(size(first)),
        (None, "replace" | "split") => (size(first) * 0.2).ceil() as u64,
        (None, "join") => (size_of(result) as f64 * 0.2).ceil() as u64,
        (None, "containsIP" | "containsCIDR") => tenth(size(second)) + 2,
        _ => 1,
    }
}

/// cel-go's cost of walking a value once: a tenth per character, 1 per other element.
fn traversal(v: &Cel) -> u64 {
    match v {
        Cel::String(s) => (s.len() as f64 * 0.1) as u64,
        Cel::Bytes(b) => (b.len() as f64 * 0.1) as u64,
        Cel::List(l) => l.iter().map(traversal).sum(),
        _ => 1,
    }
}
