//! The most a rule can cost, estimated before it ever runs, as cel-go's checker estimates it
//! with the Kubernetes libraries' costs: every node costs what evaluating it costs (variables
//! and field selection 1, list literals 10, map literals 30, calls 1 or what their arguments'
//! sizes make them cost), comprehensions cost their body once per element the range can hold,
//! and sizes come from the schema (`maxLength`, `maxItems`, `maxProperties`, else what fits in
//! one request). The CRD's validation multiplies this by how many times the rule's node can
//! occur in one object and refuses what passes the per-rule or per-CRD budget.

use kube_cel::cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};

use super::check::Checked;
use super::types::Ty;

/// The estimated cost one rule may have (`StaticEstimatedCostLimit`).
pub const RULE_LIMIT: u64 = 10_000_000;

/// The estimated cost all the rules of one CRD version may have together
/// (`StaticEstimatedCRDCostLimit`).
pub const CRD_LIMIT: u64 = 100_000_000;

/// A size: characters, bytes, items or entries (`u64::MAX`: unbounded).
type Size = u64;

const UNBOUNDED: Size = u64::MAX;

/// The most characters a scalar prints in (`string(x)`): an RFC 3339 timestamp with nanoseconds.
const SCALAR_TEXT: Size = 35;

/// The namespaces of the libraries' functions.
const NAMESPACES: &[&str] = &[
    "sets", "math", "strings", "lists", "cel", "base64", "format", "optional", "ip",
];

/// A cost factor applied to a size, rounded up as cel-go rounds it.
fn factor(size: Size, f: f64) -> u64 {
    if size == UNBOUNDED {
        return UNBOUNDED;
    }
    (size as f64 * f).ceil() as u64
}

struct Estimator<'a> {
    checked: &'a Checked,
    /// Each node's cost and computed size, once worked out (sizes of calls are asked for again
    /// by the calls around them).
    memo: std::cell::RefCell<std::collections::HashMap<u64, (u64, Option<Size>)>>,
}

/// The most `expr` can cost.
pub fn estimate(expr: &IdedExpr, checked: &Checked) -> u64 {
    let e = Estimator {
        checked,
        memo: Default::default(),
    };
    e.cost(expr).0
}

impl Estimator<'_> {
    /// The size a node's value can have, from its literal or its declaration.
    fn size(&self, e: &IdedExpr) -> Size {
        match &e.expr {
            Expr::Literal(LiteralValue::String(s)) => s.inner().chars().count() as u64,
            Expr::Literal(LiteralValue::Bytes(b)) => b.inner().len() as u64,
            Expr::List(l) => l.elements.len() as u64,
            Expr::Map(m) => m.entries.len() as u64,
            Expr::Call(_) | Expr::Comprehension(_) => match self.cost(e).1 {
                Some(computed) => computed,
                None => self.declared_size(e),
            },
            _ => self.declared_size(e),
        }
    }

    /// The size the checker's declaration gives a node (the schema's bounds).
    fn declared_size(&self, e: &IdedExpr) -> Size {
        match self.checked.types.get(&e.id) {
            Some(d) => match d.ty {
                Ty::String | Ty::Bytes | Ty::List(_) | Ty::Map(..) | Ty::Dyn => {
                    d.max.unwrap_or(UNBOUNDED)
                }
                _ => 1,
            },
            None => UNBOUNDED,
        }
    }

    /// The node's cost and the size of its value when a call computed one.
    fn cost(&self, e: &IdedExpr) -> (u64, Option<Size>) {
        if let Some(known) = self.memo.borrow().get(&e.id) {
            return *known;
        }
        let out = self.compute(e);
        self.memo.borrow_mut().insert(e.id, out);
        out
    }

    fn compute(&self, e: &IdedExpr) -> (u64, Option<Size>) {
        match &e.expr {
            Expr::Literal(_) => (0, None),
            Expr::Ident(_) => (1, None),
            Expr::Select(s) => (self.cost(&s.operand).0.saturating_add(1), None),
            Expr::List(l) => {
                let inner: u64 = l
                    .elements
                    .iter()
                    .map(|x| self.cost(x).0)
                    .fold(0, u64::saturating_add);
                (inner.saturating_add(10), None)
            }
            Expr::Map(m) => {
                let inner = m
                    .entries
                    .iter()
                    .map(|entry| match &entry.expr {
                        EntryExpr::MapEntry(me) => {
                            self.cost(&me.key).0.saturating_add(self.cost(&me.value).0)
                        }
                        EntryExpr::StructField(f) => self.cost(&f.value).0,
                    })
                    .fold(0, u64::saturating_add);
                (inner.saturating_add(30), None)
            }
            Expr::Struct(_) => (40, None),
            Expr::Comprehension(c) => {
                let range = self.size(&c.iter_range);
                let body = self
                    .cost(&c.loop_cond)
                    .0
                    .saturating_add(self.cost(&c.loop_step).0);
                let loops = if range == UNBOUNDED {
                    if body == 0 { 0 } else { UNBOUNDED }
                } else {
                    range.saturating_mul(body)
                };
                let total = self
                    .cost(&c.iter_range)
                    .0
                    .saturating_add(self.cost(&c.accu_init).0)
                    .saturating_add(loops)
                    .saturating_add(self.cost(&c.result).0);
                // `map` and `filter` build a list no longer than their range.
                let built = matches!(c.accu_init.expr, Expr::List(_)).then_some(range);
                (total, built)
            }
            Expr::Call(c) => self.call(c),
            Expr::Unspecified => (0, None),
        }
    }

    fn call(&self, c: &kube_cel::cel::common::ast::CallExpr) -> (u64, Option<Size>) {
        let name = c.func_name.as_str();
        let args_cost = |skip_target: bool| {
            let target = match (&c.target, skip_target) {
                (Some(t), false) => self.cost(t).0,
                _ => 0,
            };
            c.args
                .iter()
                .map(|a| self.cost(a).0)
                .fold(target, u64::saturating_add)
        };
        match (name, c.args.len()) {
            ("_&&_" | "_||_", 2) => return (args_cost(false), None),
            ("_?_:_", 3) => {
                let cond = self.cost(&c.args[0]).0;
                let branch = self.cost(&c.args[1]).0.max(self.cost(&c.args[2]).0);
                return (cond.saturating_add(branch), None);
            }
            _ => {}
        }
        // A namespace (`sets`, `cel`) is no value: it costs nothing.
        let namespaced = matches!(
            c.target.as_deref(),
            Some(IdedExpr { expr: Expr::Ident(ns), .. })
                if !self.checked.variables.contains(ns) && NAMESPACES.contains(&ns.as_str())
        );
        let base = args_cost(namespaced);
        // cel-go counts the receiver as the first argument.
        let operands: Vec<&IdedExpr> = match (&c.target, namespaced) {
            (Some(t), false) => std::iter::once(&**t).chain(c.args.iter()).collect(),
            _ => c.args.iter().collect(),
        };
        let size = |i: usize| operands.get(i).map(|o| self.size(o)).unwrap_or(0);
        let is_text = |i: usize| {
            operands.get(i).is_some_and(|o| match &o.expr {
                Expr::Literal(LiteralValue::String(_) | LiteralValue::Bytes(_)) => true,
                _ => self
                    .checked
                    .types
                    .get(&o.id)
                    .is_some_and(|d| matches!(d.ty, Ty::String | Ty::Bytes)),
            })
        };
        let (own, result) = match name {
            "_+_" if is_text(0) => {
                let s = size(0).saturating_add(size(1));
                (factor(s, 0.1), Some(s))
            }
            "_+_" => (1, Some(size(0).saturating_add(size(1)))),
            // Scalars have size 1; strings, bytes, lists and maps compare up to the smaller.
            "_==_" | "_!=_" | "_<_" | "_<=_" | "_>_" | "_>=_" => {
                (factor(size(0).min(size(1)), 0.1), None)
            }
            "@in"
                if matches!(
                    self.checked.types.get(&c.args[1].id).map(|d| &d.ty),
                    Some(Ty::List(_))
                ) || matches!(c.args[1].expr, Expr::List(_)) =>
            {
                (size(1).max(1), None)
            }
            "contains" if is_text(0) => (
                factor(size(0), 0.1).saturating_mul(factor(size(1), 0.1).max(1)),
                None,
            ),
            "startsWith" | "endsWith" => (factor(size(1), 0.1), None),
            "matches" | "find" | "findAll" => (
                factor(size(0), 0.1)
                    .max(1)
                    .saturating_mul(factor(size(1), 0.25).max(1)),
                None,
            ),
            "string" | "bytes" if is_text(0) => (factor(size(0), 0.1), Some(size(0))),
            // A number, bool, timestamp or duration prints in a few characters.
            "string" => (1, Some(SCALAR_TEXT)),
            "lowerAscii" | "upperAscii" | "trim" | "substring" | "url" | "isURL" | "isIP"
            | "isCIDR" | "ip" | "cidr" | "quantity" | "isQuantity" | "semver" | "isSemver"
            | "format" | "charAt" | "reverse" => (factor(size(0), 0.1), Some(size(0))),
            "replace" | "split" => (factor(size(0), 0.2), Some(size(0))),
            "join" => (factor(size(0), 0.2), None),
            "isSorted" | "sum" | "max" | "min" | "indexOf" | "lastIndexOf" if !namespaced => {
                (size(0).max(1), None)
            }
            "contains" | "intersects" | "equivalent" if namespaced => {
                (size(0).saturating_mul(size(1)).max(1), None)
            }
            _ => (1, None),
        };
        (base.saturating_add(own), result)
    }
}

/// How many times a rule on a node can run in one object: the product of the bounds of the
/// lists and maps above it, or, when one of them is unbounded, how many of the node fit in a
/// request (upstream's `maxCardinality`).
pub fn cardinality(bounds: &[Option<u64>], node_min_size: u64) -> u64 {
    let mut product: u64 = 1;
    for b in bounds {
        match b {
            Some(n) => product = product.saturating_mul(*n),
            None => return super::types::max_cardinality(node_min_size),
        }
    }
    product
}

/// The words of a refusal for cost (`getCostErrorMessage`).
pub fn over_budget(what: &str, cost: u64, limit: u64) -> String {
    let ratio = cost as f64 / limit as f64;
    let factor = if ratio > 100.0 {
        "more than 100x".to_string()
    } else if ratio < 1.5 {
        format!("{ratio:.6}x")
    } else {
        format!("{ratio:.1}x")
    };
    format!(
        "{what} exceeds budget by factor of {factor} (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::cel::check::{Env, check};
    use crate::api::cel::parse::parse;
    use crate::api::cel::types::schema_decl;
    use crate::api::structural::Schema;
    use serde_json::json;

    fn cost(schema: serde_json::Value, rule: &str) -> u64 {
        let s = Schema::parse(&schema);
        let decl = schema_decl(&s, false).unwrap();
        let p = parse(rule).unwrap();
        let c = check(&p, &Env::new().var("self", decl)).unwrap();
        estimate(&p.expr, &c)
    }

    #[test]
    fn sizes_come_from_the_schema() {
        let bounded =
            json!({"type": "array", "maxItems": 10, "items": {"type": "string", "maxLength": 5}});
        let unbounded = json!({"type": "array", "items": {"type": "string"}});
        let small = cost(bounded, "self.all(x, x.startsWith('a'))");
        assert!(small < 100, "{small}");
        let big = cost(unbounded.clone(), "self.all(x, x == 'a')");
        assert!(big > 1_000_000, "{big}");
        let nested = cost(unbounded, "self.all(x, self.all(y, x == y))");
        assert!(nested > RULE_LIMIT, "{nested}");
        assert_eq!(cost(json!({"type": "integer"}), "self > 1"), 2);
    }

    #[test]
    fn refusals_are_worded_as_upstream() {
        assert!(over_budget("estimated rule cost", 12, 10).contains("by factor of 1.200000x"));
        assert!(over_budget("estimated rule cost", 25, 10).contains("by factor of 2.5x"));
        assert!(over_budget("estimated rule cost", 2000, 10).contains("more than 100x"));
        assert_eq!(cardinality(&[Some(3), Some(4)], 2), 12);
        assert_eq!(
            cardinality(&[Some(3), None], 2),
            crate::api::cel::types::max_cardinality(2)
        );
    }
}
