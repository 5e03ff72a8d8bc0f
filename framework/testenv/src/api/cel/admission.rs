//! The CEL expressions of admission, in one place for `ValidatingAdmissionPolicy` (validations,
//! `messageExpression`, variables, audit annotations, `matchConditions`) and the webhooks'
//! `matchConditions`: compiled as upstream's `admission/plugin/cel` compiler compiles them, and
//! evaluated against one write under the runtime cost budget.
//!
//! The variables are upstream's: `object`, `oldObject` (`null` on create, and `object` on
//! delete), `request` (the `AdmissionRequest` as a map), `namespaceObject`, `params` (declared
//! only when the policy has a `paramKind`) and `variables` (each policy variable, with the type
//! its expression checked to). `object`, `oldObject`, `params`, `request` and `namespaceObject`
//! are `dyn` here, so a typo in a field of theirs shows at run time, not at creation. Upstream's
//! `authorizer` is not declared: an expression that uses it is refused at creation as
//! undeclared.

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use kube_cel::cel::Value as Cel;
use kube_cel::cel::common::ast::{Expr, IdedExpr};
use kube_cel::cel::objects::{Key, Map};

use super::check::{Env, check};
use super::eval::{Error, evaluate};
use super::parse::{Parsed, children, parse_all};
use super::types::{Decl, Object, Ty};
use super::validate::{PER_CALL_LIMIT, RUNTIME_BUDGET};

/// What an expression must evaluate to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Returns {
    /// Validations and match conditions.
    Bool,
    /// `messageExpression`.
    String,
    /// Audit annotations' `valueExpression`: a string or `null`.
    StringOrNull,
    /// Variables.
    Any,
}

/// What an expression may read beyond the write's own variables.
#[derive(Debug, Clone, Default)]
pub struct Declarations {
    /// `params` (the policy has a `paramKind`).
    pub params: bool,
    /// The policy's variables before this one, with their types.
    pub variables: Vec<(String, Ty)>,
    /// The type of `object` and `oldObject` (`dyn` when `None`), for type checking.
    pub object: Option<Rc<Decl>>,
    /// The type of `params` (`dyn` when `None`), for type checking.
    pub params_type: Option<Rc<Decl>>,
}

impl Declarations {
    fn env(&self) -> Env {
        let dyn_ = || Decl::of(Ty::Dyn);
        let object = self.object.clone().unwrap_or_else(dyn_);
        let mut env = Env::new()
            .var("object", object.clone())
            .var("oldObject", object)
            .var("request", dyn_())
            .var("namespaceObject", dyn_());
        if self.params {
            env = env.var("params", self.params_type.clone().unwrap_or_else(dyn_));
        }
        let fields: BTreeMap<String, Rc<Decl>> = self
            .variables
            .iter()
            .map(|(n, t)| (n.clone(), Decl::of(t.clone())))
            .collect();
        env.var(
            "variables",
            Decl::of(Ty::Object(Rc::new(Object { fields }))),
        )
    }
}

/// A compiled expression.
#[derive(Debug)]
pub struct Program {
    /// The expression as written.
    pub source: String,
    /// Its type.
    pub output: Ty,
    expr: IdedExpr,
    /// The policy variables it reads (`variables.<name>`).
    reads: BTreeSet<String>,
}

/// Compiles each source (one parser start for all); an `Err` is the detail of upstream's
/// `Invalid value` cause (`compilation failed: ...`, `must evaluate to bool`).
pub fn compile_all(
    sources: &[&str],
    returns: Returns,
    decls: &Declarations,
) -> Vec<Result<Program, String>> {
    let env = decls.env();
    parse_all(sources)
        .into_iter()
        .map(|parsed| typed(parsed, returns, &env))
        .collect()
}

/// Compiles one source (see [`compile_all`]).
pub fn compile(source: &str, returns: Returns, decls: &Declarations) -> Result<Program, String> {
    compile_all(&[source], returns, decls)
        .pop()
        .unwrap_or_else(|| Err("compilation failed: no parse result".into()))
}

/// Type checks `source` alone (any result type): the checker's issues, as cel-go renders
/// them, if it has any.
pub fn type_issues(source: &str, decls: &Declarations) -> Option<String> {
    let parsed = parse_all(&[source]).pop()?;
    match parsed {
        Err(e) => Some(e),
        Ok(p) => check(&p, &decls.env()).err(),
    }
}

fn typed(parsed: Result<Parsed, String>, returns: Returns, env: &Env) -> Result<Program, String> {
    let parsed = parsed.map_err(|e| format!("compilation failed: {e}"))?;
    let checked = check(&parsed, env).map_err(|e| format!("compilation failed: {e}"))?;
    let output = checked.output(&parsed);
    let fits = match returns {
        Returns::Bool => matches!(output, Ty::Bool),
        Returns::String => matches!(output, Ty::String),
        Returns::StringOrNull => matches!(output, Ty::String | Ty::Null),
        Returns::Any => true,
    };
    if !fits {
        return Err(match returns {
            Returns::Bool => "must evaluate to bool".into(),
            Returns::String => "must evaluate to string".into(),
            _ => "must evaluate to one of [string null_type]".into(),
        });
    }
    let mut reads = BTreeSet::new();
    variables_read(&parsed.expr, &mut reads);
    Ok(Program {
        source: parsed.source,
        output,
        expr: parsed.expr,
        reads,
    })
}

fn variables_read(e: &IdedExpr, out: &mut BTreeSet<String>) {
    if let Expr::Select(s) = &e.expr
        && let Expr::Ident(name) = &s.operand.expr
        && name == "variables"
    {
        out.insert(s.field.clone());
    }
    for c in children(e) {
        variables_read(c, out);
    }
}

/// The values one evaluation sees, and the cost budget its expressions share.
#[derive(Debug)]
pub struct Activation {
    vars: Vec<(&'static str, Cel)>,
    variables: Vec<(String, Result<Cel, String>)>,
    budget: i64,
}

/// Why an evaluation has no value: the error upstream's evaluator reports.
#[derive(Debug, Clone, PartialEq)]
pub enum Failed {
    /// `expression '<e>' resulted in error: <why>`.
    Error(String),
    /// The budget shared by the expressions of one evaluation ran out.
    OutOfBudget,
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failed::Error(m) => f.write_str(m),
            Failed::OutOfBudget => f.write_str(
                "validation failed due to running out of cost budget, no further validation rules will be run",
            ),
        }
    }
}

impl Activation {
    /// The write's variables (`params` too when the policy has a `paramKind`), under the
    /// runtime budget.
    pub fn new(vars: Vec<(&'static str, Cel)>) -> Activation {
        Activation {
            vars,
            variables: Vec::new(),
            budget: RUNTIME_BUDGET,
        }
    }

    /// Evaluates a policy variable and makes it readable to what follows; an expression that
    /// reads a variable that failed fails with the variable's error.
    pub fn bind(&mut self, name: &str, program: &Program) {
        let value = self.run(program).map_err(|e| match e {
            Raw::Error(m) => m,
            Raw::OutOfBudget => Failed::OutOfBudget.to_string(),
        });
        self.variables.push((name.to_string(), value));
    }

    /// Evaluates `program`.
    pub fn evaluate(&mut self, program: &Program) -> Result<Cel, Failed> {
        self.run(program).map_err(|e| match e {
            Raw::Error(why) => Failed::Error(format!(
                "expression '{}' resulted in error: {why}",
                program.source
            )),
            Raw::OutOfBudget => Failed::OutOfBudget,
        })
    }

    fn run(&mut self, program: &Program) -> Result<Cel, Raw> {
        if self.budget <= 0 {
            return Err(Raw::OutOfBudget);
        }
        let mut fields = std::collections::HashMap::new();
        for (name, value) in &self.variables {
            match value {
                Ok(v) => {
                    fields.insert(Key::from(name.as_str()), v.clone());
                }
                Err(e) if program.reads.contains(name) => return Err(Raw::Error(e.clone())),
                Err(_) => {}
            }
        }
        let mut vars = self.vars.clone();
        vars.push(("variables", Cel::Map(Map::from(fields))));
        let outcome = evaluate(&program.expr, &vars, PER_CALL_LIMIT);
        if outcome.cost as i64 > self.budget {
            self.budget = 0;
            return Err(Raw::OutOfBudget);
        }
        self.budget -= outcome.cost as i64;
        outcome.value.map_err(|e: Error| Raw::Error(e.to_string()))
    }
}

/// Upstream's match-condition matcher (`webhook/matchconditions`), for policies and webhooks
/// alike: any condition `false` is no match; otherwise the errors, joined as Go's aggregate
/// error joins them, for the caller's `failurePolicy` to decide.
pub fn conditions(programs: &[Program], act: &mut Activation) -> Result<bool, String> {
    let mut errors = Vec::new();
    for p in programs {
        match act.evaluate(p) {
            Ok(Cel::Bool(false)) => return Ok(false),
            Ok(_) => {}
            Err(e) => errors.push(e.to_string()),
        }
    }
    match errors.len() {
        0 => Ok(true),
        1 => Err(errors.remove(0)),
        _ => Err(format!("[{}]", errors.join(", "))),
    }
}

/// An evaluation's error before it names its expression.
enum Raw {
    Error(String),
    OutOfBudget,
}

#[cfg(test)]
mod tests {
    use super::super::values::plain;
    use super::*;
    use serde_json::json;

    fn object(v: serde_json::Value) -> Activation {
        Activation::new(vec![
            ("object", plain(&v)),
            ("oldObject", Cel::Null),
            ("request", plain(&json!({"operation": "CREATE"}))),
            ("namespaceObject", Cel::Null),
        ])
    }

    #[test]
    fn compile_refuses_as_upstream_words_it() {
        let none = Declarations::default();
        let syntax = compile("1 +", Returns::Bool, &none).unwrap_err();
        assert!(
            syntax.starts_with("compilation failed: ERROR: <input>:1:4: Syntax error"),
            "{syntax}"
        );
        assert_eq!(
            compile("'a'", Returns::Bool, &none).unwrap_err(),
            "must evaluate to bool"
        );
        let params = compile("params.x == 1", Returns::Bool, &none).unwrap_err();
        assert!(
            params.contains("undeclared reference to 'params'"),
            "{params}"
        );
        let with = Declarations {
            params: true,
            ..Declarations::default()
        };
        assert!(compile("params.x == 1", Returns::Bool, &with).is_ok());
        assert_eq!(
            compile("1", Returns::String, &none).unwrap_err(),
            "must evaluate to string"
        );
    }

    #[test]
    fn variables_carry_their_type_and_their_error() {
        let x = compile(
            "object.spec.replicas",
            Returns::Any,
            &Declarations::default(),
        )
        .unwrap();
        let decls = Declarations {
            variables: vec![("replicas".into(), x.output.clone())],
            ..Declarations::default()
        };
        let rule = compile("variables.replicas <= 5", Returns::Bool, &decls).unwrap();
        let other = compile("request.operation == 'CREATE'", Returns::Bool, &decls).unwrap();
        let mut ok = object(json!({"spec": {"replicas": 7}}));
        ok.bind("replicas", &x);
        assert_eq!(ok.evaluate(&rule), Ok(Cel::Bool(false)));
        let mut missing = object(json!({"spec": {}}));
        missing.bind("replicas", &x);
        assert_eq!(
            missing.evaluate(&rule).unwrap_err().to_string(),
            "expression 'variables.replicas <= 5' resulted in error: no such key: replicas"
        );
        assert_eq!(missing.evaluate(&other), Ok(Cel::Bool(true)));
    }
}
