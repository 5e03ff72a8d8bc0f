//! A custom resource checked against the compiled rules of its schema, as apiextensions-apiserver
//! does on every write: rules run where the object has a non-null value, transition rules only
//! where an old value correlates (object keys, map keys, items of `map` lists by their keys)
//! unless `optionalOldSelf`, each under cel-go's per-call cost limit and all of them under the
//! per-object budget; failures become 422 causes worded as the server words them (the value is
//! the node's schema type, `"object"`), and a rule that fails on a value the update leaves
//! unchanged is ratcheted (it does not block the write).

use serde_json::Value;

use super::compile::{Compiled, RuleTree};
use super::eval::{Error, evaluate, optional};
use super::values::to_cel;
use crate::api::status::{Cause, go_quote};
use crate::api::structural::Schema;
use kube_cel::cel::Value as Cel;

/// cel-go's cost limit for one evaluation (upstream's `PerCallLimit`).
pub const PER_CALL_LIMIT: u64 = 1_000_000;

/// The cost all the rules of one object may spend together (`RuntimeCELCostBudget`).
pub const RUNTIME_BUDGET: i64 = 10_000_000;

/// The longest message a `messageExpression` may make, in bytes.
const MAX_MESSAGE_BYTES: usize = 5 * 1024;

/// Why the walk stopped early.
struct Stop;

struct Walk {
    causes: Vec<Cause>,
    budget: i64,
}

/// The causes of every rule `obj` fails (`old`: the stored object on an update).
pub fn validate(tree: &RuleTree, schema: &Schema, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut walk = Walk {
        causes: Vec::new(),
        budget: RUNTIME_BUDGET,
    };
    let _ = walk.node(tree, schema, "", obj, old, false);
    walk.causes
}

fn child_path(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

/// A field path as Go's `field.Path` prints it (the root is `<nil>`).
fn shown(path: &str) -> String {
    if path.is_empty() {
        "<nil>".into()
    } else {
        path.to_string()
    }
}

impl Walk {
    fn invalid(&mut self, path: &str, schema: &Schema, detail: &str) {
        self.causes
            .push(Cause::invalid(shown(path), &go_quote(&schema.ty), detail));
    }

    /// Validates one node and what is below it; `parent_unchanged` is whether the nearest
    /// correlated ancestor equals its old value.
    fn node(
        &mut self,
        tree: &RuleTree,
        schema: &Schema,
        path: &str,
        v: &Value,
        old: Option<&Value>,
        parent_unchanged: bool,
    ) -> Result<(), Stop> {
        if v.is_null() {
            return Ok(());
        }
        let old = old.filter(|o| !o.is_null());
        let unchanged = match old {
            Some(o) => o == v,
            None => parent_unchanged,
        };
        if !tree.rules.is_empty() {
            self.rules(tree, schema, path, v, old, unchanged)?;
        }
        let below_unchanged = unchanged;
        match v {
            Value::Object(m) => {
                let old_map = old.and_then(Value::as_object);
                for (k, sub) in &tree.properties {
                    let (Some(child), Some(s)) = (m.get(k), schema.properties.get(k)) else {
                        continue;
                    };
                    let old_child = old_map.and_then(|o| o.get(k));
                    let p = child_path(path, k);
                    self.node(sub, s, &p, child, old_child, below_unchanged)?;
                }
                if let (Some(sub), Some(s)) =
                    (tree.additional.as_deref(), schema.additional.as_deref())
                {
                    let old_map = old_map.filter(|_| map_correlates(schema));
                    for (k, child) in m {
                        let old_child = old_map.and_then(|o| o.get(k));
                        let p = format!("{path}[{k}]");
                        self.node(sub, s, &p, child, old_child, below_unchanged)?;
                    }
                }
            }
            Value::Array(items) => {
                if let (Some(sub), Some(s)) = (tree.items.as_deref(), schema.items.as_deref()) {
                    let old_items = old.and_then(Value::as_array);
                    for (i, item) in items.iter().enumerate() {
                        let old_item = old_items.and_then(|o| correlated_item(schema, item, o));
                        let p = format!("{path}[{i}]");
                        self.node(sub, s, &p, item, old_item, below_unchanged)?;
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn rules(
        &mut self,
        tree: &RuleTree,
        schema: &Schema,
        path: &str,
        v: &Value,
        old: Option<&Value>,
        unchanged: bool,
    ) -> Result<(), Stop> {
        if self.budget <= 0 {
            self.invalid(
                path,
                schema,
                "validation failed due to running out of cost budget, no further validation rules will be run",
            );
            return Err(Stop);
        }
        let this = to_cel(v, Some(schema), tree.resource_root);
        let before = old.map(|o| to_cel(o, Some(schema), tree.resource_root));
        for compiled in &tree.rules {
            let Some(expr) = &compiled.expr else {
                continue;
            };
            let optional_old = compiled.rule.optional_old_self == Some(true);
            if compiled.uses_old_self && before.is_none() && !optional_old {
                continue;
            }
            let mut vars = vec![("self", this.clone())];
            match (&before, optional_old) {
                (Some(b), false) => vars.push(("oldSelf", b.clone())),
                (b, true) => vars.push(("oldSelf", optional(b.clone()))),
                (None, false) => {}
            }
            let outcome = evaluate(expr, &vars, PER_CALL_LIMIT);
            let error_string = compiled.rule.error_string().to_string();
            if let Err(Error::CostLimit) = outcome.value {
                self.invalid(path, schema, &format!(
                    "'{}': no further validation rules will be run due to call cost exceeds limit for rule: {error_string}",
                    Error::CostLimit
                ));
                return Err(Stop);
            }
            if outcome.cost as i64 > self.budget {
                self.invalid(
                    path,
                    schema,
                    "validation failed due to running out of cost budget, no further validation rules will be run",
                );
                return Err(Stop);
            }
            self.budget -= outcome.cost as i64;
            match outcome.value {
                Ok(Cel::Bool(true)) => continue,
                Err(Error::Runtime(e)) if e.starts_with("no such overload") => {
                    self.invalid(path, schema, &format!(
                        "'{e}': call arguments did not match a supported operator, function or macro signature for rule: {error_string}"
                    ));
                    continue;
                }
                Err(e) => {
                    self.invalid(
                        path,
                        schema,
                        &format!("{e} evaluating rule: {error_string}"),
                    );
                    continue;
                }
                Ok(_) => {}
            }
            let at = if compiled.field_path.is_empty() {
                path.to_string()
            } else if path.is_empty() {
                compiled.field_path.trim_start_matches('.').to_string()
            } else {
                format!("{path}{}", compiled.field_path)
            };
            let mut plain_vars = vec![("self", this.clone())];
            if let Some(b) = &before {
                plain_vars.push(("oldSelf", b.clone()));
            }
            let detail = self.message(compiled, &plain_vars, &at, schema)?;
            if !compiled.uses_old_self && unchanged {
                continue;
            }
            self.causes
                .push(cause_for(&compiled.rule.reason, &at, schema, &detail));
        }
        Ok(())
    }

    /// The failure's message: the message expression's value when it makes a usable one,
    /// else the rule's message (or `failed rule: <rule>`).
    fn message(
        &mut self,
        compiled: &Compiled,
        vars: &[(&str, Cel)],
        at: &str,
        schema: &Schema,
    ) -> Result<String, Stop> {
        let fallback = compiled.rule.message_or_default();
        let Some(expr) = &compiled.message_expr else {
            return Ok(fallback);
        };
        let outcome = evaluate(expr, vars, PER_CALL_LIMIT);
        if let Err(Error::CostLimit) = outcome.value {
            self.invalid(at, schema, &format!(
                "no further validation rules will be run due to call cost exceeds limit for messageExpression: {}",
                go_quote(&compiled.rule.message_expression)
            ));
            return Err(Stop);
        }
        if outcome.cost as i64 > self.budget {
            self.invalid(at, schema, "messageExpression evaluation failed due to running out of cost budget, no further validation rules will be run");
            return Err(Stop);
        }
        self.budget -= outcome.cost as i64;
        Ok(match outcome.value {
            Ok(Cel::String(s)) => {
                let s = s.trim();
                if s.is_empty() || s.len() > MAX_MESSAGE_BYTES || s.contains('\n') {
                    fallback
                } else {
                    s.to_string()
                }
            }
            _ => fallback,
        })
    }
}

/// The cause a failed rule makes under its `reason`.
fn cause_for(reason: &Option<String>, at: &str, schema: &Schema, detail: &str) -> Cause {
    let field = shown(at);
    match reason.as_deref() {
        Some("FieldValueForbidden") => Cause::forbidden(field, detail),
        Some("FieldValueRequired") => Cause::required(field, detail),
        Some("FieldValueDuplicate") => Cause {
            reason: "FieldValueDuplicate",
            message: format!("Duplicate value: {}", go_quote(&schema.ty)),
            field,
        },
        _ => Cause::invalid(field, &go_quote(&schema.ty), detail),
    }
}

/// Whether a map's values correlate with the old map's by key (every map type upstream knows;
/// an unknown one would not).
fn map_correlates(s: &Schema) -> bool {
    matches!(s.map_type.as_str(), "" | "granular" | "atomic")
}

/// The old item of a `map` list with the same key values as `item` (other lists do not
/// correlate their items).
fn correlated_item<'o>(list: &Schema, item: &Value, old: &'o [Value]) -> Option<&'o Value> {
    if list.list_type != "map" || list.map_keys.is_empty() {
        return None;
    }
    old.iter()
        .find(|o| list.map_keys.iter().all(|k| o.get(k) == item.get(k)))
}

#[cfg(test)]
mod table;
#[cfg(test)]
mod tests;
