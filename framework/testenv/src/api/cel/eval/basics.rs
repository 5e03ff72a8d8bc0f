//! What the evaluator and its calls share: the errors an evaluation ends with (worded as
//! cel-go words them), map keys, optionals, and the size cel-go's cost model gives a value.

use std::sync::Arc;

use kube_cel::cel::Value as Cel;
use kube_cel::cel::objects::{Key, OptionalValue};

/// The message cel-go's runtime stops a rule with when it runs past its cost limit.
pub const COST_LIMIT_EXCEEDED: &str = "operation cancelled: actual cost limit exceeded";

/// Why an evaluation has no value.
#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// A runtime error, worded as cel-go words it.
    Runtime(String),
    /// The cost limit was reached.
    CostLimit,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Runtime(m) => f.write_str(m),
            Error::CostLimit => f.write_str(COST_LIMIT_EXCEEDED),
        }
    }
}

/// A runtime error with cel-go's words.
pub fn runtime(msg: impl Into<String>) -> Error {
    Error::Runtime(msg.into())
}

/// cel-go's error for a call no overload takes.
pub fn no_overload() -> Error {
    runtime("no such overload")
}

/// The size cel-go's cost model gives a value: characters, bytes, items or entries; 1 for the
/// rest.
pub fn size_of(v: &Cel) -> u64 {
    match v {
        Cel::String(s) => s.chars().count() as u64,
        Cel::Bytes(b) => b.len() as u64,
        Cel::List(l) => l.len() as u64,
        Cel::Map(m) => m.map.len() as u64,
        _ => 1,
    }
}

/// A value as a map key (`no such overload` for values that cannot be keys).
pub fn key_of(v: &Cel) -> Result<Key, Error> {
    match v {
        Cel::String(s) => Ok(Key::String(s.clone())),
        Cel::Int(i) => Ok(Key::Int(*i)),
        Cel::UInt(u) => Ok(Key::Uint(*u)),
        Cel::Bool(b) => Ok(Key::Bool(*b)),
        _ => Err(no_overload()),
    }
}

/// A map key as a value.
pub fn key_value(k: &Key) -> Cel {
    match k {
        Key::String(s) => Cel::String(s.clone()),
        Key::Int(i) => Cel::Int(*i),
        Key::Uint(u) => Cel::UInt(*u),
        Key::Bool(b) => Cel::Bool(*b),
    }
}

/// `optional.of(v)` or `optional.none()`.
pub fn optional(v: Option<Cel>) -> Cel {
    Cel::Opaque(Arc::new(match v {
        Some(v) => OptionalValue::of(v),
        None => OptionalValue::none(),
    }))
}

/// The content of an optional value (`None` when `v` is no optional).
pub fn as_optional(v: &Cel) -> Option<Option<&Cel>> {
    match v {
        Cel::Opaque(o) => o.downcast_ref::<OptionalValue>().map(|o| o.value()),
        _ => None,
    }
}
