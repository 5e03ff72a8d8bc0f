//! Evaluation as cel-go evaluates a checked expression under a cost limit: the AST is walked
//! here (so the cost of every node is counted as cel-go's runtime counts it, and a rule that
//! runs past its limit is stopped with `operation cancelled: actual cost limit exceeded`), while
//! the functions themselves are the `cel` crate's and kube-cel's (`calls`). Errors carry
//! cel-go's words (`no such key: x`, `division by zero`); `&&`, `||` and the comprehension
//! macros absorb an error another operand makes irrelevant, as CEL specifies.

mod authz;
mod basics;
mod calls;

use std::sync::Arc;

use kube_cel::cel::Value as Cel;
use kube_cel::cel::common::ast::{
    CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, LiteralValue,
};
use kube_cel::cel::objects::{Key, Map};

pub use basics::{Error, optional};
pub use calls::TypeValue;

use crate::api::cel::authz::Authorizer;

use basics::{as_optional, key_of, key_value, no_overload, runtime};

/// An evaluation's value (or error) and its cost.
#[derive(Debug)]
pub struct Outcome {
    /// The value.
    pub value: Result<Cel, Error>,
    /// The cost cel-go would have counted.
    pub cost: u64,
}

/// Evaluates `expr` with `vars` bound, stopping once its cost passes `limit`.
pub fn evaluate(expr: &IdedExpr, vars: &[(&str, Cel)], limit: u64) -> Outcome {
    evaluate_authorized(expr, vars, limit, None)
}

/// [`evaluate`], with the authorizer `authorizer` checks ask (none: all allowed).
pub fn evaluate_authorized(
    expr: &IdedExpr,
    vars: &[(&str, Cel)],
    limit: u64,
    authorizer: Option<&dyn Authorizer>,
) -> Outcome {
    let mut e = Evaluator {
        scope: vars
            .iter()
            .map(|(n, v)| (n.to_string(), v.clone()))
            .collect(),
        cost: 0,
        limit,
        authorizer,
    };
    let value = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| e.eval(expr)))
        .unwrap_or_else(|_| Err(runtime("internal error: the CEL library panicked")));
    Outcome {
        value,
        cost: e.cost,
    }
}

/// A comprehension's accumulator that holds an error, which a later step may still absorb
/// (`all` and `exists` fold with `&&` and `||`).
#[derive(Debug, PartialEq, Eq)]
struct Failed(String);

impl kube_cel::cel::objects::Opaque for Failed {
    fn runtime_type_name(&self) -> &str {
        "error"
    }
}

struct Evaluator<'a> {
    scope: Vec<(String, Cel)>,
    cost: u64,
    limit: u64,
    authorizer: Option<&'a dyn Authorizer>,
}

fn literal(l: &LiteralValue) -> Cel {
    match l {
        LiteralValue::Boolean(b) => Cel::Bool(*b.inner()),
        LiteralValue::Bytes(b) => Cel::Bytes(Arc::new(b.inner().to_vec())),
        LiteralValue::Double(d) => Cel::Float(*d.inner()),
        LiteralValue::Int(i) => Cel::Int(*i.inner()),
        LiteralValue::Null => Cel::Null,
        LiteralValue::String(s) => Cel::String(Arc::new(s.inner().to_string())),
        LiteralValue::UInt(u) => Cel::UInt(*u.inner()),
    }
}

impl Evaluator<'_> {
    fn charge(&mut self, n: u64) -> Result<(), Error> {
        self.cost = self.cost.saturating_add(n);
        if self.cost > self.limit {
            Err(Error::CostLimit)
        } else {
            Ok(())
        }
    }

    fn lookup(&self, name: &str) -> Option<&Cel> {
        self.scope
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
    }

    fn eval(&mut self, e: &IdedExpr) -> Result<Cel, Error> {
        match &e.expr {
            Expr::Literal(l) => Ok(literal(l)),
            Expr::Ident(name) => {
                self.charge(1)?;
                if let Some(v) = self.lookup(name) {
                    if let Cel::Opaque(o) = v
                        && let Some(Failed(e)) = o.downcast_ref::<Failed>()
                    {
                        return Err(runtime(e.clone()));
                    }
                    return Ok(v.clone());
                }
                TypeValue::named(name)
                    .map(|t| Cel::Opaque(Arc::new(t)))
                    .ok_or_else(|| runtime(format!("no such attribute: {name}")))
            }
            Expr::Select(s) => {
                let operand = self.eval(&s.operand)?;
                self.charge(1)?;
                select(&operand, &s.field, s.test)
            }
            Expr::Call(c) => self.call(c),
            Expr::Comprehension(c) => self.comprehension(c),
            Expr::List(l) => {
                let mut items = Vec::with_capacity(l.elements.len());
                for (i, x) in l.elements.iter().enumerate() {
                    let v = self.eval(x)?;
                    if l.optional_indices.contains(&i) {
                        match as_optional(&v) {
                            Some(Some(inner)) => items.push(inner.clone()),
                            Some(None) => {}
                            None => items.push(v),
                        }
                    } else {
                        items.push(v);
                    }
                }
                self.charge(10)?;
                Ok(Cel::List(Arc::new(items)))
            }
            Expr::Map(m) => {
                let mut out = std::collections::HashMap::with_capacity(m.entries.len());
                for entry in &m.entries {
                    let EntryExpr::MapEntry(me) = &entry.expr else {
                        return Err(no_overload());
                    };
                    let k = key_of(&self.eval(&me.key)?)?;
                    let v = self.eval(&me.value)?;
                    if me.optional {
                        if let Some(Some(inner)) = as_optional(&v) {
                            out.insert(k, inner.clone());
                        }
                    } else {
                        out.insert(k, v);
                    }
                }
                self.charge(30)?;
                Ok(Cel::Map(Map::from(out)))
            }
            Expr::Struct(s) => Err(runtime(format!("unknown type: {}", s.type_name))),
            Expr::Unspecified => Err(no_overload()),
        }
    }

    /// Evaluates, keeping a runtime error as a value for the operators that may absorb it.
    fn eval_bool(&mut self, e: &IdedExpr) -> Result<Result<bool, Error>, Error> {
        match self.eval(e) {
            Ok(Cel::Bool(b)) => Ok(Ok(b)),
            Ok(_) => Ok(Err(no_overload())),
            Err(Error::CostLimit) => Err(Error::CostLimit),
            Err(err) => Ok(Err(err)),
        }
    }

    fn call(&mut self, c: &CallExpr) -> Result<Cel, Error> {
        let name = c.func_name.as_str();
        match (name, c.args.len()) {
            ("_&&_" | "_||_", 2) => {
                let short = name == "_||_";
                let left = self.eval_bool(&c.args[0])?;
                if left == Ok(short) {
                    return Ok(Cel::Bool(short));
                }
                let right = self.eval_bool(&c.args[1])?;
                return match (left, right) {
                    (_, Ok(b)) if b == short => Ok(Cel::Bool(short)),
                    (Ok(_), Ok(b)) => Ok(Cel::Bool(b)),
                    (Err(e), _) | (_, Err(e)) => Err(e),
                };
            }
            ("_?_:_", 3) => {
                return match self.eval(&c.args[0])? {
                    Cel::Bool(true) => self.eval(&c.args[1]),
                    Cel::Bool(false) => self.eval(&c.args[2]),
                    _ => Err(no_overload()),
                };
            }
            ("@not_strictly_false", 1) => {
                let v = self.eval_bool(&c.args[0])?;
                self.charge(1)?;
                return Ok(Cel::Bool(v.unwrap_or(true)));
            }
            ("_?._", 2) => {
                let operand = self.eval(&c.args[0])?;
                let Cel::String(field) = self.eval(&c.args[1])? else {
                    return Err(no_overload());
                };
                self.charge(1)?;
                let inner = match as_optional(&operand) {
                    Some(None) => return Ok(optional(None)),
                    Some(Some(v)) => v.clone(),
                    None => operand,
                };
                return Ok(optional(select(&inner, &field, false).ok()));
            }
            _ => {}
        }
        if let Some(v) = self.bind(c)? {
            return Ok(v);
        }
        // `ns.fn(...)` of a namespaced function, unless `ns` is a variable.
        let namespace = match c.target.as_deref() {
            Some(IdedExpr {
                expr: Expr::Ident(ns),
                ..
            }) if self.lookup(ns).is_none() && calls::is_namespace(ns) => Some(ns.as_str()),
            _ => None,
        };
        let target = match (&c.target, namespace) {
            (Some(t), None) => Some(self.eval(t)?),
            _ => None,
        };
        // The accumulator of `map` and `filter` grows in place: the step replaces it anyway.
        let mut taken = match (name, c.args.first()) {
            (
                "_+_",
                Some(IdedExpr {
                    expr: Expr::Ident(acc),
                    ..
                }),
            ) if acc.starts_with('@') => self.take(acc),
            _ => None,
        };
        let mut args = Vec::with_capacity(c.args.len());
        for (i, a) in c.args.iter().enumerate() {
            match taken.take().filter(|_| i == 0) {
                Some(v) => {
                    self.charge(1)?;
                    args.push(v);
                }
                None => args.push(self.eval(a)?),
            }
        }
        let (value, cost) = match target.as_ref().and_then(authz::of) {
            Some(v) => authz::call(v, name, &args, self.authorizer),
            None => calls::call(name, namespace, target.as_ref(), args),
        };
        self.charge(cost)?;
        value
    }

    /// Takes a variable's value out of scope (leaving `null`), so a list in it has one owner.
    fn take(&mut self, name: &str) -> Option<Cel> {
        let slot = self.scope.iter_mut().rev().find(|(n, _)| n == name)?;
        Some(std::mem::replace(&mut slot.1, Cel::Null))
    }

    /// `cel.bind(name, init, body)`.
    fn bind(&mut self, c: &CallExpr) -> Result<Option<Cel>, Error> {
        let is_cel = matches!(
            c.target.as_deref(),
            Some(IdedExpr { expr: Expr::Ident(ns), .. }) if ns == "cel" && self.lookup("cel").is_none()
        );
        if !is_cel || c.func_name != "bind" || c.args.len() != 3 {
            return Ok(None);
        }
        let Expr::Ident(var) = &c.args[0].expr else {
            return Ok(None);
        };
        let init = self.eval(&c.args[1])?;
        self.scope.push((var.clone(), init));
        let body = self.eval(&c.args[2]);
        self.scope.pop();
        body.map(Some)
    }

    fn comprehension(&mut self, c: &ComprehensionExpr) -> Result<Cel, Error> {
        let range = self.eval(&c.iter_range)?;
        let entries: Vec<(Cel, Option<Cel>)> = match &range {
            Cel::List(l) => l
                .iter()
                .enumerate()
                .map(|(i, v)| match c.iter_var2 {
                    Some(_) => (Cel::Int(i as i64), Some(v.clone())),
                    None => (v.clone(), None),
                })
                .collect(),
            Cel::Map(m) => m
                .map
                .iter()
                .map(|(k, v)| (key_value(k), c.iter_var2.as_ref().map(|_| v.clone())))
                .collect(),
            _ => return Err(no_overload()),
        };
        let accu = self.eval(&c.accu_init)?;
        let base = self.scope.len();
        self.scope.push((c.accu_var.clone(), accu));
        let outcome = self.fold(c, entries, base);
        self.scope.truncate(base);
        outcome
    }

    fn fold(
        &mut self,
        c: &ComprehensionExpr,
        entries: Vec<(Cel, Option<Cel>)>,
        base: usize,
    ) -> Result<Cel, Error> {
        for (first, second) in entries {
            match self.eval(&c.loop_cond)? {
                Cel::Bool(false) => break,
                Cel::Bool(true) => {}
                _ => return Err(no_overload()),
            }
            self.scope.push((c.iter_var.clone(), first));
            if let (Some(name), Some(v)) = (&c.iter_var2, second) {
                self.scope.push((name.clone(), v));
            }
            let step = match self.eval(&c.loop_step) {
                Err(Error::Runtime(e)) => Cel::Opaque(Arc::new(Failed(e))),
                other => other?,
            };
            self.scope.truncate(base + 1);
            self.scope[base].1 = step;
        }
        self.eval(&c.result)
    }
}

/// `operand.field` (or `has(operand.field)` when `test`).
fn select(operand: &Cel, field: &str, test: bool) -> Result<Cel, Error> {
    match operand {
        Cel::Map(m) => {
            let v = m.get(&Key::from(field));
            match (test, v) {
                (true, v) => Ok(Cel::Bool(v.is_some())),
                (false, Some(v)) => Ok(v.clone()),
                (false, None) => Err(runtime(format!("no such key: {field}"))),
            }
        }
        other => match authz::of(other) {
            Some(v) if !test => authz::select(v, field),
            _ => Err(no_overload()),
        },
    }
}

#[cfg(test)]
mod tests;
