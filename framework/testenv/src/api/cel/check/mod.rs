//! Type checking, as cel-go's checker does before a rule is accepted: every identifier declared,
//! every field the schema has, every call matching an overload of a declared function, list and
//! map literals of one type, comprehensions over lists and maps; the type of every node (with
//! the schema's size bounds where the node is a value of the object) for the cost estimator,
//! and the overload each call resolved to. Errors carry the node they are about; `check` draws
//! them as cel-go does.

mod signatures;

use std::collections::{BTreeSet, HashMap};
use std::rc::Rc;

use kube_cel::cel::common::ast::{
    CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, LiteralValue,
};

use super::authz::{AUTHORIZER, RESOURCE_CHECK};
use super::parse::{Parsed, issue_at, offsets, render};
use super::types::{Decl, Ty};
use signatures::{Bindings, declared, with_overloads};

/// The variables an expression may use.
#[derive(Debug, Clone, Default)]
pub struct Env {
    vars: Vec<(String, Rc<Decl>)>,
}

impl Env {
    /// No variables.
    pub fn new() -> Env {
        Env::default()
    }

    /// Adds a variable.
    pub fn var(mut self, name: &str, decl: Rc<Decl>) -> Env {
        self.vars.push((name.to_string(), decl));
        self
    }

    fn get(&self, name: &str) -> Option<&Rc<Decl>> {
        self.vars.iter().find(|(n, _)| n == name).map(|(_, d)| d)
    }
}

/// What checking found out about an expression.
#[derive(Debug, Default)]
pub struct Checked {
    /// The type of each node.
    pub types: HashMap<u64, Rc<Decl>>,
    /// The function each call resolved to (namespaced ones by their full name) and the
    /// parameter types of the first overload that matched.
    pub calls: HashMap<u64, (String, Vec<Ty>)>,
    /// The declared variables the expression reads.
    pub variables: BTreeSet<String>,
}

impl Checked {
    /// The type of the whole expression.
    pub fn output(&self, parsed: &Parsed) -> Ty {
        self.types
            .get(&parsed.expr.id)
            .map(|d| d.ty.clone())
            .unwrap_or(Ty::Dyn)
    }
}

/// Checks an expression; an `Err` holds the errors drawn as cel-go draws them.
pub fn check(parsed: &Parsed, env: &Env) -> Result<Checked, String> {
    let mut c = Checker {
        env,
        locals: Vec::new(),
        out: Checked::default(),
        errors: Vec::new(),
    };
    c.expr(&parsed.expr);
    if c.errors.is_empty() {
        return Ok(c.out);
    }
    let at = offsets(parsed);
    let issues = c
        .errors
        .into_iter()
        .map(|(id, message)| issue_at(&parsed.source, at.get(&id).copied().unwrap_or(0), message))
        .collect();
    Err(render(&parsed.source, issues))
}

struct Checker<'a> {
    env: &'a Env,
    locals: Vec<(String, Rc<Decl>)>,
    out: Checked,
    errors: Vec<(u64, String)>,
}

fn undeclared(name: &str) -> String {
    format!("undeclared reference to '{name}' (in container '')")
}

fn no_overload(name: &str, receiver: Option<&Ty>, args: &[Rc<Decl>]) -> String {
    let list: Vec<String> = args.iter().map(|a| a.ty.to_string()).collect();
    let sig = match receiver {
        Some(r) => format!("{r}.({})", list.join(", ")),
        None => format!("({})", list.join(", ")),
    };
    format!("found no matching overload for '{name}' applied to '{sig}'")
}

fn dyn_decl() -> Rc<Decl> {
    Decl::of(Ty::Dyn)
}

fn type_ident(name: &str) -> Option<Ty> {
    Some(match name {
        "int" => Ty::Int,
        "uint" => Ty::Uint,
        "double" => Ty::Double,
        "bool" => Ty::Bool,
        "string" => Ty::String,
        "bytes" => Ty::Bytes,
        "null_type" => Ty::Null,
        "list" => Ty::list(Ty::Dyn),
        "map" => Ty::map(Ty::Dyn, Ty::Dyn),
        "type" => Ty::Type(Rc::new(Ty::Dyn)),
        "google.protobuf.Timestamp" => Ty::Timestamp,
        "google.protobuf.Duration" => Ty::Duration,
        _ => return None,
    })
}

impl Checker<'_> {
    fn error(&mut self, id: u64, message: String) {
        self.errors.push((id, message));
    }

    fn local(&self, name: &str) -> Option<Rc<Decl>> {
        self.locals
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, d)| d.clone())
    }

    fn is_variable(&self, name: &str) -> bool {
        self.local(name).is_some() || self.env.get(name).is_some()
    }

    fn expr(&mut self, e: &IdedExpr) -> Rc<Decl> {
        let d = match &e.expr {
            Expr::Literal(l) => Decl::of(literal_type(l)),
            Expr::Ident(name) => self.ident(e.id, name),
            Expr::Select(s) => {
                let operand = self.expr(&s.operand);
                if s.test {
                    self.select(e.id, &operand, &s.field);
                    Decl::of(Ty::Bool)
                } else {
                    self.select(e.id, &operand, &s.field)
                }
            }
            Expr::Call(c) => self.call(e.id, c),
            Expr::Comprehension(c) => self.comprehension(c),
            Expr::List(l) => {
                let elems: Vec<(u64, Rc<Decl>)> =
                    l.elements.iter().map(|x| (x.id, self.expr(x))).collect();
                let elem = self.homogeneous(&elems);
                Decl::of(Ty::List(elem))
            }
            Expr::Map(m) => {
                let mut keys = Vec::new();
                let mut values = Vec::new();
                for entry in &m.entries {
                    if let EntryExpr::MapEntry(me) = &entry.expr {
                        keys.push((me.key.id, self.expr(&me.key)));
                        values.push((me.value.id, self.expr(&me.value)));
                    }
                }
                let (k, v) = (self.homogeneous(&keys), self.homogeneous(&values));
                Decl::of(Ty::Map(k, v))
            }
            Expr::Struct(s) => {
                self.error(e.id, undeclared(&s.type_name));
                dyn_decl()
            }
            Expr::Unspecified => {
                self.error(e.id, "unsupported expression".into());
                dyn_decl()
            }
        };
        self.out.types.insert(e.id, d.clone());
        d
    }

    fn ident(&mut self, id: u64, name: &str) -> Rc<Decl> {
        if let Some(d) = self.local(name) {
            return d;
        }
        if let Some(d) = self.env.get(name) {
            self.out.variables.insert(name.to_string());
            return d.clone();
        }
        if let Some(t) = type_ident(name) {
            return Decl::of(Ty::Type(Rc::new(t)));
        }
        self.error(id, undeclared(name));
        dyn_decl()
    }

    fn select(&mut self, id: u64, operand: &Rc<Decl>, field: &str) -> Rc<Decl> {
        match &operand.ty {
            Ty::Object(o) => match o.fields.get(field) {
                Some(d) => d.clone(),
                None => {
                    self.error(id, format!("undefined field '{field}'"));
                    dyn_decl()
                }
            },
            Ty::Map(_, v) => v.clone(),
            Ty::Dyn => dyn_decl(),
            Ty::Opaque(AUTHORIZER, _) if field == "requestResource" => {
                Decl::of(Ty::named(RESOURCE_CHECK))
            }
            other => {
                self.error(
                    id,
                    format!("type '{other}' does not support field selection"),
                );
                dyn_decl()
            }
        }
    }

    /// The element type of a list or map literal: its elements' one type (or `dyn` when one is
    /// `dyn`); elements of different types are refused, as with cel-go's homogeneous literals.
    fn homogeneous(&mut self, elems: &[(u64, Rc<Decl>)]) -> Rc<Decl> {
        let Some((_, first)) = elems.first() else {
            return dyn_decl();
        };
        let mut joined = first.ty.clone();
        for (id, d) in &elems[1..] {
            if joined.is_dyn() || d.ty.is_dyn() {
                joined = Ty::Dyn;
            } else if !joined.same(&d.ty) {
                self.error(
                    *id,
                    format!("expected type '{joined}' but found '{}'", d.ty),
                );
            }
        }
        Decl::of(joined)
    }

    fn comprehension(&mut self, c: &ComprehensionExpr) -> Rc<Decl> {
        let range = self.expr(&c.iter_range);
        let (first, second) = match &range.ty {
            Ty::List(elem) => match c.iter_var2 {
                Some(_) => (Decl::of(Ty::Int), elem.clone()),
                None => (elem.clone(), dyn_decl()),
            },
            Ty::Map(k, v) => (k.clone(), v.clone()),
            Ty::Dyn => (dyn_decl(), dyn_decl()),
            other => {
                let msg = format!(
                    "expression of type '{other}' cannot be range of a comprehension (must be list, map, or dynamic)"
                );
                self.error(c.iter_range.id, msg);
                (dyn_decl(), dyn_decl())
            }
        };
        let accu = self.expr(&c.accu_init);
        self.locals.push((c.accu_var.clone(), accu.clone()));
        self.locals.push((c.iter_var.clone(), first));
        if let Some(v2) = &c.iter_var2 {
            self.locals.push((v2.clone(), second));
        }
        let cond = self.expr(&c.loop_cond);
        let step = self.expr(&c.loop_step);
        if !matches!(cond.ty, Ty::Bool | Ty::Dyn) {
            self.error(
                c.loop_cond.id,
                format!("expected type 'bool' but found '{}'", cond.ty),
            );
        }
        if c.iter_var2.is_some() {
            self.locals.pop();
        }
        self.locals.pop();
        self.locals.pop();
        // An empty list accumulator takes the type the step builds (`map`, `filter`).
        let accu = match (&accu.ty, &step.ty) {
            (Ty::List(a), Ty::List(s)) if a.ty.is_dyn() && !s.ty.is_dyn() => step,
            _ => accu,
        };
        self.locals.push((c.accu_var.clone(), accu));
        let result = self.expr(&c.result);
        self.locals.pop();
        result
    }

    fn call(&mut self, id: u64, c: &CallExpr) -> Rc<Decl> {
        let name = c.func_name.as_str();
        match (name, c.args.len()) {
            ("_&&_" | "_||_", 2) => {
                let args: Vec<Rc<Decl>> = c.args.iter().map(|a| self.expr(a)).collect();
                if !args.iter().all(|a| matches!(a.ty, Ty::Bool | Ty::Dyn)) {
                    self.error(id, no_overload(name, None, &args));
                }
                return Decl::of(Ty::Bool);
            }
            ("@not_strictly_false", 1) => {
                self.expr(&c.args[0]);
                return Decl::of(Ty::Bool);
            }
            ("_?_:_", 3) => return self.conditional(id, c),
            ("_[_]", 2) => return self.index(id, c),
            ("_?._", 2) => return self.optional_select(id, c),
            ("_[?_]", 2) => {
                let args = vec![self.expr(&c.args[0]), self.expr(&c.args[1])];
                let inner = self.index_type(id, name, &args);
                return Decl::of(Ty::optional(inner.ty.clone()));
            }
            _ => {}
        }
        if let Some(bound) = self.bind(c) {
            return bound;
        }
        // `ns.fn(...)`: a namespaced function, unless `ns` is a variable.
        let (qualified, target) = match c.target.as_deref() {
            Some(IdedExpr {
                expr: Expr::Ident(ns),
                ..
            }) if !self.is_variable(ns) && declared(&format!("{ns}.{name}")) => {
                (format!("{ns}.{name}"), None)
            }
            other => (name.to_string(), other),
        };
        let receiver = target.map(|t| self.expr(t));
        let args: Vec<Rc<Decl>> = c.args.iter().map(|a| self.expr(a)).collect();
        if qualified == "math.greatest" || qualified == "math.least" {
            return self.extremum(id, &qualified, &args);
        }
        if !declared(&qualified) {
            self.error(id, undeclared(&qualified));
            return dyn_decl();
        }
        let resolved = with_overloads(&qualified, |overloads| {
            let mut results: Vec<(Ty, Vec<Ty>)> = Vec::new();
            for o in overloads {
                if o.receiver.is_some() != receiver.is_some() || o.params.len() != args.len() {
                    continue;
                }
                let mut b = Bindings::default();
                let ok = match (&o.receiver, &receiver) {
                    (Some(r), Some(actual)) => b.unify(r, &actual.ty),
                    _ => true,
                } && o.params.iter().zip(&args).all(|(p, a)| b.unify(p, &a.ty));
                if ok {
                    results.push((b.substitute(&o.result), o.params.clone()));
                }
            }
            results
        });
        let Some((first, params)) = resolved.first().cloned() else {
            self.error(
                id,
                no_overload(&qualified, receiver.as_ref().map(|r| &r.ty), &args),
            );
            return dyn_decl();
        };
        self.out.calls.insert(id, (qualified, params));
        if resolved.iter().all(|(t, _)| t.same(&first)) {
            Decl::of(first)
        } else {
            dyn_decl()
        }
    }

    /// `cel.bind(name, init, body)`: `body` with `name` bound to `init`.
    fn bind(&mut self, c: &CallExpr) -> Option<Rc<Decl>> {
        let is_cel = matches!(
            c.target.as_deref(),
            Some(IdedExpr { expr: Expr::Ident(ns), .. }) if ns == "cel"
        );
        if !is_cel || c.func_name != "bind" || c.args.len() != 3 {
            return None;
        }
        let Expr::Ident(var) = &c.args[0].expr else {
            return None;
        };
        let init = self.expr(&c.args[1]);
        self.locals.push((var.clone(), init));
        let body = self.expr(&c.args[2]);
        self.locals.pop();
        Some(body)
    }

    fn conditional(&mut self, id: u64, c: &CallExpr) -> Rc<Decl> {
        let cond = self.expr(&c.args[0]);
        let (a, b) = (self.expr(&c.args[1]), self.expr(&c.args[2]));
        let ok_cond = matches!(cond.ty, Ty::Bool | Ty::Dyn);
        let mut bindings = Bindings::default();
        let joined =
            bindings.unify(&Ty::Param('A'), &a.ty) && bindings.unify(&Ty::Param('A'), &b.ty);
        if !ok_cond || !joined {
            self.error(id, no_overload("_?_:_", None, &[cond, a.clone(), b]));
            return dyn_decl();
        }
        if a.ty.is_dyn() || b.ty.is_dyn() {
            return dyn_decl();
        }
        if matches!(a.ty, Ty::Null) { b } else { a }
    }

    fn index(&mut self, id: u64, c: &CallExpr) -> Rc<Decl> {
        let args = vec![self.expr(&c.args[0]), self.expr(&c.args[1])];
        let d = self.index_type(id, "_[_]", &args);
        self.out.calls.insert(
            id,
            ("_[_]".into(), vec![args[0].ty.clone(), args[1].ty.clone()]),
        );
        d
    }

    fn index_type(&mut self, id: u64, name: &str, args: &[Rc<Decl>]) -> Rc<Decl> {
        let container = match &args[0].ty {
            Ty::Opaque("optional_type", p) if name == "_[?_]" => {
                p.first().cloned().unwrap_or(Ty::Dyn)
            }
            t => t.clone(),
        };
        let key = &args[1].ty;
        match &container {
            Ty::List(elem) if matches!(key, Ty::Int | Ty::Uint | Ty::Dyn) => elem.clone(),
            Ty::Map(k, v) if key.is_dyn() || k.ty.is_dyn() || k.ty.same(key) => v.clone(),
            Ty::Dyn => dyn_decl(),
            _ => {
                self.error(id, no_overload(name, None, args));
                dyn_decl()
            }
        }
    }

    /// `a.?f`: an optional of the field.
    fn optional_select(&mut self, id: u64, c: &CallExpr) -> Rc<Decl> {
        let operand = self.expr(&c.args[0]);
        let field = match &c.args[1].expr {
            Expr::Literal(LiteralValue::String(s)) => s.inner().to_string(),
            _ => {
                self.error(id, "unsupported optional field selection".into());
                return dyn_decl();
            }
        };
        let inner = match operand.ty.optional_inner() {
            Some(t) => Decl::of(t.clone()),
            None => operand,
        };
        let d = self.select(id, &inner, &field);
        Decl::of(Ty::optional(d.ty.clone()))
    }

    /// `math.greatest` / `math.least`: numbers, or one list of them.
    fn extremum(&mut self, id: u64, name: &str, args: &[Rc<Decl>]) -> Rc<Decl> {
        let numeric = |t: &Ty| matches!(t, Ty::Int | Ty::Uint | Ty::Double | Ty::Dyn);
        let ok = match args {
            [] => false,
            [one] => match &one.ty {
                Ty::List(e) => numeric(&e.ty),
                t => numeric(t),
            },
            many => many.iter().all(|a| numeric(&a.ty)),
        };
        if !ok {
            self.error(id, no_overload(name, None, args));
            return dyn_decl();
        }
        self.out.calls.insert(id, (name.to_string(), Vec::new()));
        let first = &args[0].ty;
        if args.len() > 1 && args.iter().all(|a| a.ty.same(first)) {
            Decl::of(first.clone())
        } else {
            dyn_decl()
        }
    }
}

fn literal_type(l: &LiteralValue) -> Ty {
    match l {
        LiteralValue::Boolean(_) => Ty::Bool,
        LiteralValue::Bytes(_) => Ty::Bytes,
        LiteralValue::Double(_) => Ty::Double,
        LiteralValue::Int(_) => Ty::Int,
        LiteralValue::Null => Ty::Null,
        LiteralValue::String(_) => Ty::String,
        LiteralValue::UInt(_) => Ty::Uint,
    }
}

#[cfg(test)]
mod tests;
