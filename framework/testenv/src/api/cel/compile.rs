//! The rules of a structural schema compiled once, when a CRD version is registered: a tree
//! shaped like the schema (properties, `items`, `additionalProperties`) holding, at each node,
//! its rules parsed and type checked against the node's CEL type, whether each reads `oldSelf`,
//! its parsed `messageExpression` and its `fieldPath` as the error names it. Nodes without
//! rules below them are left out, so a write walks only where rules are.

use std::collections::BTreeMap;

use kube_cel::cel::common::ast::IdedExpr;

use super::check::{Env, check};
use super::cost::{RULE_LIMIT, cardinality, estimate};
use super::parse::parse_all;
use super::types::{Decl, Ty, schema_decl};
use crate::api::structural::{Rule, Schema};

/// One compiled rule.
#[derive(Debug)]
pub struct Compiled {
    /// The rule as written.
    pub rule: Rule,
    /// The parsed rule (`None`: an empty rule, which never fails).
    pub expr: Option<IdedExpr>,
    /// Whether the rule reads `oldSelf` (a transition rule).
    pub uses_old_self: bool,
    /// The parsed `messageExpression`.
    pub message_expr: Option<IdedExpr>,
    /// `fieldPath` as a field path below the node (`.a['b']` -> `.a[b]` or `.a.b`).
    pub field_path: String,
    /// The estimated cost of the rule, times how often its node can occur in one object.
    pub cost: u64,
    /// The estimated cost of the message expression.
    pub message_cost: u64,
}

/// Why a rule was refused, for CRD validation.
#[derive(Debug, Clone, PartialEq)]
pub enum RuleError {
    /// The rule does not parse or check (`compilation failed: ...`) or does not return a bool.
    Rule(String),
    /// The message expression does not compile or does not return a string.
    MessageExpression(String),
    /// `fieldPath` does not name a field of the node.
    FieldPath(String),
    /// A transition rule below a list whose items do not correlate (the list's schema path).
    Uncorrelatable(String),
    /// The rule's estimated cost (times its node's cardinality) is over the per-rule limit.
    Cost(u64),
    /// The message expression's estimated cost is over the per-rule limit.
    MessageCost(u64),
}

/// The compiled rules of one schema node and of the nodes below it that have rules.
#[derive(Debug, Default)]
pub struct RuleTree {
    /// This node's rules.
    pub rules: Vec<Compiled>,
    /// Property name -> its subtree.
    pub properties: BTreeMap<String, RuleTree>,
    /// The subtree of list items.
    pub items: Option<Box<RuleTree>>,
    /// The subtree of map values.
    pub additional: Option<Box<RuleTree>>,
    /// Whether this node is the root of a resource (`apiVersion`, `kind`, `metadata.name`).
    pub resource_root: bool,
}

/// A rule refused at compilation, with the schema path of its node (`properties[spec]`).
#[derive(Debug, Clone)]
pub struct Refused {
    /// The node, as CRD validation names it below `openAPIV3Schema`.
    pub node: String,
    /// The rule's index in `x-kubernetes-validations`.
    pub index: usize,
    /// The rule as written.
    pub rule: Rule,
    /// Why.
    pub error: RuleError,
}

/// Whether any node of the schema has rules.
pub fn has_rules(s: &Schema) -> bool {
    !s.rules.is_empty()
        || s.items.as_deref().is_some_and(has_rules)
        || s.additional.as_deref().is_some_and(has_rules)
        || s.properties.values().any(has_rules)
}

/// Every rule of a root schema compiled.
#[derive(Debug, Default)]
pub struct Compilation {
    /// The rules (`None` when the schema has none).
    pub tree: Option<RuleTree>,
    /// The rules refused.
    pub refused: Vec<Refused>,
    /// Each rule's and message expression's estimated cost, by `<node>|<index>|<field>`.
    pub costs: Vec<(String, u64)>,
}

/// Compiles every rule of a root schema.
pub fn compile_root(s: &Schema) -> Compilation {
    let mut out = Compilation::default();
    if has_rules(s) {
        let tree = compile_node(s, true, "", None, &[], &mut out.refused, &mut out.costs);
        out.tree = Some(tree);
    }
    out
}

/// `uncorrelatable`: the highest list above the node whose items do not correlate.
fn compile_node(
    s: &Schema,
    resource_root: bool,
    at: &str,
    uncorrelatable: Option<&str>,
    bounds: &[Option<u64>],
    refused: &mut Vec<Refused>,
    costs: &mut Vec<(String, u64)>,
) -> RuleTree {
    let mut tree = RuleTree {
        resource_root,
        ..RuleTree::default()
    };
    if !s.rules.is_empty() {
        let decl = schema_decl(s, resource_root).unwrap_or_else(|| Decl::of(Ty::Dyn));
        let times = cardinality(bounds, decl.min_size);
        for (index, (mut compiled, error)) in compile_rules(s, decl).into_iter().enumerate() {
            compiled.cost = compiled.cost.saturating_mul(times);
            costs.push((format!("{at}|{index}|rule"), compiled.cost));
            if compiled.message_expr.is_some() {
                costs.push((
                    format!("{at}|{index}|messageExpression"),
                    compiled.message_cost,
                ));
            }
            for (over, cost) in [
                (compiled.cost > RULE_LIMIT, RuleError::Cost(compiled.cost)),
                (
                    compiled.message_cost > RULE_LIMIT,
                    RuleError::MessageCost(compiled.message_cost),
                ),
            ] {
                if over {
                    refused.push(Refused {
                        node: at.to_string(),
                        index,
                        rule: compiled.rule.clone(),
                        error: cost,
                    });
                }
            }
            let error = match (error, uncorrelatable) {
                (None, Some(list)) if compiled.uses_old_self => {
                    Some(RuleError::Uncorrelatable(list.to_string()))
                }
                (e, _) => e,
            };
            if let Some(error) = error {
                refused.push(Refused {
                    node: at.to_string(),
                    index,
                    rule: compiled.rule.clone(),
                    error,
                });
            }
            tree.rules.push(compiled);
        }
    }
    for (name, prop) in &s.properties {
        if has_rules(prop) {
            let path = format!("{at}.properties[{name}]");
            let sub = compile_node(
                prop,
                prop.embedded,
                path.trim_start_matches('.'),
                uncorrelatable,
                bounds,
                refused,
                costs,
            );
            tree.properties.insert(name.clone(), sub);
        }
    }
    if let Some(items) = s.items.as_deref().filter(|i| has_rules(i)) {
        let path = format!("{at}.items");
        let list = uncorrelatable.or((s.list_type != "map").then_some(at));
        let bounds = [bounds, &[s.max_items]].concat();
        let sub = compile_node(
            items,
            items.embedded,
            path.trim_start_matches('.'),
            list,
            &bounds,
            refused,
            costs,
        );
        tree.items = Some(Box::new(sub));
    }
    if let Some(values) = s.additional.as_deref().filter(|v| has_rules(v)) {
        let path = format!("{at}.additionalProperties");
        let bounds = [bounds, &[s.max_properties]].concat();
        let sub = compile_node(
            values,
            values.embedded,
            path.trim_start_matches('.'),
            uncorrelatable,
            &bounds,
            refused,
            costs,
        );
        tree.additional = Some(Box::new(sub));
    }
    tree
}

/// Compiles the rules of one node against its declaration.
fn compile_rules(s: &Schema, decl: std::rc::Rc<Decl>) -> Vec<(Compiled, Option<RuleError>)> {
    let mut sources: Vec<&str> = Vec::new();
    for r in &s.rules {
        sources.push(&r.rule);
        sources.push(&r.message_expression);
    }
    let mut parsed = parse_all(&sources).into_iter();
    let plain = Env::new()
        .var("self", decl.clone())
        .var("oldSelf", decl.clone());
    let optional = Env::new()
        .var("self", decl.clone())
        .var("oldSelf", Decl::of(Ty::optional(decl.ty.clone())));
    s.rules
        .iter()
        .map(|r| {
            let (rule_parse, message_parse) = (parsed.next(), parsed.next());
            let env = if r.optional_old_self == Some(true) {
                &optional
            } else {
                &plain
            };
            let mut compiled = Compiled {
                rule: r.clone(),
                expr: None,
                uses_old_self: false,
                message_expr: None,
                field_path: String::new(),
                cost: 0,
                message_cost: 0,
            };
            let mut error = None;
            if !r.rule.trim().is_empty() {
                match rule_parse.unwrap_or_else(|| Err("no parse".into())) {
                    Err(e) => error = Some(RuleError::Rule(format!("compilation failed: {e}"))),
                    Ok(p) => match check(&p, env) {
                        Err(e) => error = Some(RuleError::Rule(format!("compilation failed: {e}"))),
                        Ok(c) => {
                            compiled.uses_old_self = c.variables.contains("oldSelf");
                            compiled.cost = estimate(&p.expr, &c);
                            if !matches!(c.output(&p), Ty::Bool) {
                                error = Some(RuleError::Rule(
                                    "cel expression must evaluate to a bool".into(),
                                ));
                            }
                            compiled.expr = Some(p.expr);
                        }
                    },
                }
            }
            if !r.message_expression.trim().is_empty() {
                match message_parse.unwrap_or_else(|| Err("no parse".into())) {
                    Err(e) => {
                        error.get_or_insert(RuleError::MessageExpression(format!(
                            "messageExpression compilation failed: {e}"
                        )));
                    }
                    Ok(p) => match check(&p, &plain) {
                        Err(e) => {
                            error.get_or_insert(RuleError::MessageExpression(format!(
                                "messageExpression compilation failed: {e}"
                            )));
                        }
                        Ok(c) if !matches!(c.output(&p), Ty::String) => {
                            error.get_or_insert(RuleError::MessageExpression(
                                "messageExpression must evaluate to a string".into(),
                            ));
                        }
                        Ok(c) => {
                            compiled.message_cost = estimate(&p.expr, &c);
                            compiled.message_expr = Some(p.expr);
                        }
                    },
                }
            }
            if !r.field_path.is_empty() {
                match field_path(&r.field_path, s) {
                    Ok(p) => compiled.field_path = p,
                    Err(e) => {
                        error.get_or_insert(RuleError::FieldPath(e));
                    }
                }
            }
            (compiled, error)
        })
        .collect()
}

/// A rule's `fieldPath` (`.a.b`, `.a['x.y']`) as the field path below the node that an error
/// names: properties as `.name`, map keys as `[key]`, as upstream's `ValidFieldPath` reads it.
pub fn field_path(path: &str, schema: &Schema) -> Result<String, String> {
    let mut out = String::new();
    let mut node = schema;
    let mut rest = path;
    while !rest.is_empty() {
        let name;
        if let Some(r) = rest.strip_prefix("['") {
            let end = find_quote_end(r).ok_or("unexpected end of JSON path")?;
            name = unescape(&r[..end])?;
            rest = r[end + 1..]
                .strip_prefix(']')
                .ok_or_else(|| "expected ] after quoted string".to_string())?;
        } else if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            if end == 0 {
                return Err("unexpected end of JSON path".into());
            }
            name = r[..end].to_string();
            rest = &r[end..];
        } else if rest.starts_with('[') {
            return Err("expected single quoted string".into());
        } else {
            let shown: String = rest
                .chars()
                .take_while(|c| !matches!(c, '.' | '['))
                .collect();
            return Err(format!("expected [ or . but got: {shown}"));
        }
        if !node.properties.is_empty() {
            node = node
                .properties
                .get(&name)
                .ok_or("does not refer to a valid field")?;
            out.push('.');
            out.push_str(&name);
        } else if let Some(values) = node.additional.as_deref() {
            node = values;
            out.push_str(&format!("[{name}]"));
        } else {
            return Err("does not refer to a valid field".into());
        }
    }
    Ok(out)
}

fn find_quote_end(s: &str) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        match c {
            '\\' if !escaped => escaped = true,
            '\'' if !escaped => return Some(i),
            _ => escaped = false,
        }
    }
    None
}

fn unescape(s: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        out.push(match chars.next() {
            Some('n') => '\n',
            Some('t') => '\t',
            Some('r') => '\r',
            Some('\'') => '\'',
            Some('\\') => '\\',
            Some(other) => {
                return Err(format!(
                    "invalid string literal: invalid escape char \\{other}"
                ));
            }
            None => return Err("invalid string literal".into()),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rules_compile_where_they_are() {
        let s = Schema::parse(&json!({"type": "object", "properties": {"spec": {
            "type": "object",
            "x-kubernetes-validations": [
                {"rule": "self.a <= self.b", "messageExpression": "'a is ' + string(self.a)"},
                {"rule": "self.a == oldSelf.a"},
                {"rule": "self.a"},
                {"rule": "self.nope > 1"},
                {"rule": "true", "fieldPath": ".m['x.y']"}
            ],
            "properties": {
                "a": {"type": "integer"}, "b": {"type": "integer"},
                "m": {"type": "object", "additionalProperties": {"type": "string"}},
                "list": {"type": "array", "items": {"type": "string",
                    "x-kubernetes-validations": [{"rule": "self.size() < 5"}]}}
            }
        }}}));
        let Compilation { tree, refused, .. } = compile_root(&s);
        let tree = tree.unwrap();
        let spec = &tree.properties["spec"];
        assert!(spec.rules[0].message_expr.is_some());
        assert!(spec.rules[1].uses_old_self && !spec.rules[0].uses_old_self);
        assert_eq!(spec.rules[4].field_path, ".m[x.y]");
        assert!(spec.properties["list"].items.is_some());
        let errors: Vec<(String, usize)> =
            refused.iter().map(|r| (r.node.clone(), r.index)).collect();
        assert_eq!(
            errors,
            [
                ("properties[spec]".to_string(), 2),
                ("properties[spec]".to_string(), 3)
            ]
        );
        assert_eq!(
            refused[0].error,
            RuleError::Rule("cel expression must evaluate to a bool".into())
        );
    }

    #[test]
    fn field_paths_are_checked_against_the_schema() {
        let s = Schema::parse(&json!({"type": "object", "properties": {
            "a": {"type": "object", "properties": {"b": {"type": "string"}}}}}));
        assert_eq!(field_path(".a.b", &s).as_deref(), Ok(".a.b"));
        assert_eq!(field_path(".a['b']", &s).as_deref(), Ok(".a.b"));
        assert!(field_path(".c", &s).is_err());
        assert!(field_path("a", &s).is_err());
    }
}
