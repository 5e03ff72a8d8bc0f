//! `allOf`, `oneOf`, `anyOf` and `not` of a schema node, checked as kube-openapi's validator
//! checks them: each combinator failing adds one error, worded as the server words it, on the
//! field `<nil>` with the value `""` (apiextensions-apiserver does not place these errors on a
//! field), followed by the errors of the failing branch it reports (the first one: kube-openapi
//! keeps the branch with the most passing checks, which is the first on a tie).

use serde_json::Value;

use super::Schema;
use crate::api::status::{Cause, go_quote};

impl Schema {
    /// Checks the combinators of this node against `v` at `path`.
    pub(super) fn validate_composition(&self, v: &Value, path: &str, out: &mut Vec<Cause>) {
        if !self.any_of.is_empty() {
            let results = branch_results(&self.any_of, v, path);
            if !results.iter().any(Vec::is_empty) {
                out.push(composite(path, "must validate at least one schema (anyOf)"));
                out.extend(results.into_iter().next().unwrap_or_default());
            }
        }
        if !self.one_of.is_empty() {
            let results = branch_results(&self.one_of, v, path);
            let valid = results.iter().filter(|r| r.is_empty()).count();
            if valid != 1 {
                let found = if valid == 0 {
                    "Found none valid".to_string()
                } else {
                    format!("Found {valid} valid alternatives")
                };
                let what = format!("must validate one and only one schema (oneOf). {found}");
                out.push(composite(path, &what));
                if valid == 0 {
                    out.extend(results.into_iter().next().unwrap_or_default());
                }
            }
        }
        if !self.all_of.is_empty() {
            let results = branch_results(&self.all_of, v, path);
            let valid = results.iter().filter(|r| r.is_empty()).count();
            out.extend(results.into_iter().flatten());
            if valid != self.all_of.len() {
                let none = if valid == 0 { ". None validated" } else { "" };
                let what = format!("must validate all the schemas (allOf){none}");
                out.push(composite(path, &what));
            }
        }
        if let Some(not) = &self.not
            && not.validate_value_at(v, path).is_empty()
        {
            out.push(composite(path, "must not validate the schema (not)"));
        }
    }

    fn validate_value_at(&self, v: &Value, path: &str) -> Vec<Cause> {
        let mut out = Vec::new();
        self.validate(v, path, &mut out);
        out
    }
}

/// The errors of `v` under each branch (empty = the branch holds).
fn branch_results(branches: &[Schema], v: &Value, path: &str) -> Vec<Vec<Cause>> {
    branches
        .iter()
        .map(|b| b.validate_value_at(v, path))
        .collect()
}

/// A combinator's error: upstream converts it to a field error on no field, value `""`, with
/// the node's path quoted in the detail.
fn composite(path: &str, what: &str) -> Cause {
    Cause::invalid("<nil>", "\"\"", &format!("{} {what}", go_quote(path)))
}
