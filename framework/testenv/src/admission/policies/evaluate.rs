//! One policy's expressions against one write and one param, as upstream's validator runs them:
//! the `matchConditions` first (any `false` skips the policy; an error, with none `false`,
//! follows `failurePolicy`), then each validation in order, its variables evaluated first, all
//! under one runtime cost budget. A failed validation's message is its `messageExpression`'s
//! (trimmed, if it is a string of one line), else its `message`, else `failed expression: <e>`.
//! Then each audit annotation's `valueExpression`: there is no audit log to publish its value
//! to, but an evaluation error denies the write under `failurePolicy: Fail` as upstream's does,
//! whatever the binding's `validationActions`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use kube_cel::cel::Value as Cel;
use serde_json::Value;

use super::Objects;
use crate::api::cel::admission::{
    Activation, Declarations, Program, Returns, compile_all, conditions,
};
use crate::api::cel::authz::Authorizer;
use crate::api::cel::values::plain;

/// The longest message a `messageExpression` may make, in bytes.
const MAX_MESSAGE_BYTES: usize = 5 * 1024;

/// A policy's expressions, compiled.
pub struct Compiled {
    conditions: Vec<Program>,
    variables: Vec<(String, Program)>,
    validations: Vec<Validation>,
    /// The audit annotations' `valueExpression`s.
    annotations: Vec<Program>,
}

/// What one evaluation decided.
#[derive(Debug, Default)]
pub struct Decisions {
    /// The (message, reason) of each validation failed, and of each error under
    /// `failurePolicy: Fail` (reason empty: `Invalid`); the binding's actions decide.
    pub failed: Vec<(String, String)>,
    /// The audit annotations' errors, which deny whatever the actions.
    pub annotation_errors: Vec<String>,
}

struct Validation {
    rule: Program,
    source: String,
    message: String,
    message_expression: Option<Program>,
    reason: String,
}

/// What one evaluation sees.
pub struct Input<'a> {
    /// `object` and `oldObject`.
    pub objects: &'a Objects,
    /// `request`.
    pub request: &'a Value,
    /// `params` (`None`: `null`).
    pub params: Option<&'a Value>,
    /// `namespaceObject`.
    pub namespace: Option<&'a Value>,
    /// `authorizer`, and what answers its checks (none: all allowed).
    pub authorizer: (Cel, Option<&'a dyn Authorizer>),
}

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn items<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

thread_local! {
    /// Policies compiled once per stored version (uid and resourceVersion) and thread, not on
    /// every write: a write runs every matching policy under the store's lock. Per thread
    /// because a compiled program's types are `Rc`s.
    static COMPILED: RefCell<HashMap<(String, String), CompileResult>> = RefCell::default();
}

/// What compiling a policy's spec gave.
type CompileResult = Result<Rc<Compiled>, String>;

/// Entries kept before the cache is emptied (each test's server makes its own policies).
const COMPILED_KEPT: usize = 1024;

impl Compiled {
    /// [`Compiled::of`] the stored `policy`, compiled once per uid and resourceVersion.
    pub fn of_stored(policy: &Value) -> CompileResult {
        let meta = policy.get("metadata").unwrap_or(&Value::Null);
        let key = (
            text(meta, "uid").to_string(),
            text(meta, "resourceVersion").to_string(),
        );
        if let Some(done) = COMPILED.with_borrow(|cache| cache.get(&key).cloned()) {
            return done;
        }
        let spec = policy.get("spec").unwrap_or(&Value::Null);
        let done = Compiled::of(spec).map(Rc::new);
        COMPILED.with_borrow_mut(|cache| {
            if cache.len() >= COMPILED_KEPT {
                cache.clear();
            }
            cache.insert(key, done.clone());
        });
        done
    }

    /// Compiles a stored policy's spec; the error is the first expression that does not
    /// compile (which validation refused at creation, so only a policy stored by an older
    /// server has one).
    pub fn of(spec: &Value) -> Result<Compiled, String> {
        let mut decls = Declarations {
            params: spec.get("paramKind").is_some_and(Value::is_object),
            ..Declarations::default()
        };
        let sources = |key: &str, field: &str| -> Vec<String> {
            items(spec, key)
                .iter()
                .map(|c| text(c, field).to_string())
                .collect()
        };
        let conditions = sources("matchConditions", "expression");
        let conditions = all(&conditions, Returns::Bool, &decls)?;
        let mut variables = Vec::new();
        for v in items(spec, "variables") {
            let program = all(&[text(v, "expression").to_string()], Returns::Any, &decls)?
                .pop()
                .ok_or("no variable")?;
            let name = text(v, "name").to_string();
            decls.variables.push((name.clone(), program.output.clone()));
            variables.push((name, program));
        }
        let rules = all(&sources("validations", "expression"), Returns::Bool, &decls)?;
        let mut validations = Vec::new();
        for (v, rule) in items(spec, "validations").iter().zip(rules) {
            let message_expression = match text(v, "messageExpression").trim() {
                "" => None,
                m => all(&[m.to_string()], Returns::String, &decls)?.pop(),
            };
            validations.push(Validation {
                rule,
                source: text(v, "expression").trim().to_string(),
                message: text(v, "message").trim().to_string(),
                message_expression,
                reason: text(v, "reason").to_string(),
            });
        }
        let annotations = sources("auditAnnotations", "valueExpression");
        let annotations = all(&annotations, Returns::StringOrNull, &decls)?;
        Ok(Compiled {
            conditions,
            variables,
            validations,
            annotations,
        })
    }

    /// What `input` makes of the validations and audit annotations.
    pub fn denials(&self, input: &Input<'_>, fail_open: bool) -> Decisions {
        let object = input.objects.object.as_ref().map_or(Cel::Null, plain);
        let old = input.objects.old.as_ref().map_or(Cel::Null, plain);
        let mut act = Activation::new(
            vec![
                ("object", object),
                ("oldObject", old),
                ("request", plain(input.request)),
                ("params", input.params.map_or(Cel::Null, plain)),
                ("namespaceObject", input.namespace.map_or(Cel::Null, plain)),
                ("authorizer", input.authorizer.0.clone()),
            ],
            input.authorizer.1,
        );
        let error = |m: String| match fail_open {
            true => Vec::new(),
            false => vec![(m, String::new())],
        };
        match conditions(&self.conditions, &mut act) {
            Ok(true) => {}
            Ok(false) => return Decisions::default(),
            Err(e) => {
                return Decisions {
                    failed: error(e),
                    ..Decisions::default()
                };
            }
        }
        for (name, program) in &self.variables {
            act.bind(name, program);
        }
        let mut out = Vec::new();
        for v in &self.validations {
            match act.evaluate(&v.rule) {
                Ok(Cel::Bool(true)) => {}
                Ok(_) => out.push((message(v, &mut act), reason(v))),
                Err(e) => out.extend(error(e.to_string())),
            }
        }
        let mut annotation_errors = Vec::new();
        for p in &self.annotations {
            match act.evaluate(p) {
                // A string or null, as compiling made sure: no audit log to publish it to.
                Ok(_) => {}
                Err(_) if fail_open => {}
                Err(e) => annotation_errors.push(e.to_string()),
            }
        }
        Decisions {
            failed: out,
            annotation_errors,
        }
    }
}

fn all(sources: &[String], returns: Returns, decls: &Declarations) -> Result<Vec<Program>, String> {
    let refs: Vec<&str> = sources.iter().map(String::as_str).collect();
    compile_all(&refs, returns, decls).into_iter().collect()
}

fn message(v: &Validation, act: &mut Activation<'_>) -> String {
    let from_expression = v
        .message_expression
        .as_ref()
        .and_then(|p| act.evaluate(p).ok())
        .and_then(|m| match m {
            Cel::String(s) => Some(s.trim().to_string()),
            _ => None,
        })
        .filter(|m| !m.is_empty() && m.len() <= MAX_MESSAGE_BYTES && !m.contains('\n'));
    match from_expression {
        Some(m) => m,
        None if !v.message.is_empty() => v.message.clone(),
        None => format!("failed expression: {}", v.source),
    }
}

fn reason(v: &Validation) -> String {
    match v.reason.as_str() {
        "" => "Invalid".into(),
        r => r.into(),
    }
}
