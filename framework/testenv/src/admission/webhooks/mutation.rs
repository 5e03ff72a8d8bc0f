//! Mutating webhooks, one after another in configuration-name then list order, each seeing the
//! object as the ones before left it: a `JSONPatch` answer is applied (a patch that does not
//! apply fails the write with the patch library's words, `wh-mutating-bad-path`), the object is
//! defaulted again, and when a webhook changed it every earlier webhook with
//! `reinvocationPolicy: IfNeeded` is called once more after the others
//! (`wh-mutating-order-reinvocation`), as upstream's reinvocation context does.

use std::collections::HashSet;

use serde_json::Value;

use super::call::call;
use super::config::Hook;
use super::equivalent;
use super::failure::{self, Failure};
use super::matching::{self, Invocation};
use super::review::Verdict;
use super::{Objects, Request};
use crate::api::status::{ApiError, go_quote};
use crate::storage::store::Store;
use crate::webhook_client::gojson;

/// Decode-time defaults of the written kind, applied to a patched object (a built-in kind's
/// defaults, a custom resource pruned and defaulted by its schema); an object its type cannot
/// hold is the error.
pub type Redefault<'a> = &'a (dyn Fn(&mut Value) -> Result<(), String> + Sync);

/// What the mutating webhooks did: the objects after them (the write's version), their
/// warnings, and the refusal if any.
#[derive(Debug)]
pub struct Mutated {
    /// The objects as the last webhook left them.
    pub objects: Objects,
    /// Every webhook's warnings, in call order.
    pub warnings: Vec<String>,
    /// The write's error, if a webhook refused it or failed under `failurePolicy: Fail`.
    pub refusal: Option<ApiError>,
}

/// Calls the matching webhooks of `hooks` about `req`, starting from `objects`.
pub async fn run(
    store: &Store,
    hooks: &[Hook],
    req: &Request,
    objects: Objects,
    redefault: Redefault<'_>,
) -> Mutated {
    let mut m = Mutated {
        objects,
        warnings: Vec::new(),
        refusal: None,
    };
    let mut invoked_reinvocable: HashSet<String> = HashSet::new();
    let mut reinvoke: HashSet<String> = HashSet::new();
    let mut any_change = false;
    for round in 0..2 {
        if round == 1 && !any_change {
            break;
        }
        for hook in hooks {
            let inv = match store.with(|s| matching::invocation(s, hook, req, &m.objects)) {
                Err(e) => return refuse(m, e),
                Ok(None) => continue,
                Ok(Some(inv)) => inv,
            };
            if round == 1 && !reinvoke.contains(&hook.uid) {
                continue;
            }
            let (changed, error) = match one(&inv, req, &mut m, redefault).await {
                Ok(changed) => (changed, None),
                Err(f) => (false, f.into_error(&hook.name, hook.fail_open)),
            };
            if changed {
                reinvoke.extend(invoked_reinvocable.drain());
                any_change = true;
            }
            if hook.reinvoke {
                invoked_reinvocable.insert(hook.uid.clone());
            }
            if let Some(e) = error {
                return refuse(m, e);
            }
        }
    }
    m
}

fn refuse(mut m: Mutated, e: ApiError) -> Mutated {
    m.refusal = Some(e);
    m
}

/// One call; whether it changed the object.
async fn one(
    inv: &Invocation,
    req: &Request,
    m: &mut Mutated,
    redefault: Redefault<'_>,
) -> Result<bool, Failure> {
    let versioned = match &inv.conversion {
        None => m.objects.clone(),
        Some(c) => equivalent::convert(c, m.objects.clone(), &inv.resource.api_version())
            .await
            .map_err(Failure::Refused)?,
    };
    let verdict = call(inv, req, &versioned, true).await?;
    m.warnings.extend(verdict.warnings.iter().cloned());
    if !verdict.allowed {
        let denial = failure::denial(&inv.hook.name, verdict.status.as_ref());
        return Err(Failure::Refused(denial));
    }
    let Some(patched) = patched(
        &inv.hook.name,
        &verdict,
        versioned.object.as_ref(),
        redefault,
    )?
    else {
        return Ok(false);
    };
    if Some(&patched) == versioned.object.as_ref() {
        return Ok(false);
    }
    let back = match &inv.conversion {
        None => Some(patched),
        Some(c) => {
            let api_version = req.resource.api_version();
            let only = Objects {
                object: Some(patched),
                old: None,
            };
            let converted = equivalent::convert(c, only, &api_version).await;
            converted.map_err(Failure::Refused)?.object
        }
    };
    m.objects.object = back;
    Ok(true)
}

/// The object after the verdict's patch, defaulted again; `None` when there is no patch.
fn patched(
    name: &str,
    verdict: &Verdict,
    object: Option<&Value>,
    redefault: Redefault<'_>,
) -> Result<Option<Value>, Failure> {
    if verdict.patch.is_empty() {
        return Ok(None);
    }
    let undecodable = |why: String| {
        Failure::Calling(format!(
            "received undecodable patch in webhook response: {why}"
        ))
    };
    if let Some(e) = gojson::syntax_error(&verdict.patch) {
        return Err(undecodable(e));
    }
    let ops: Value = serde_json::from_slice(&verdict.patch).unwrap_or(Value::Null);
    let list = match &ops {
        Value::Array(list) => list,
        Value::Null => return Ok(None),
        other => {
            return Err(undecodable(format!(
                "json: cannot unmarshal {} into Go value of type jsonpatch.Patch",
                gojson::kind(other)
            )));
        }
    };
    if let Some(bad) = list.iter().find(|op| !op.is_object() && !op.is_null()) {
        return Err(undecodable(format!(
            "json: cannot unmarshal {} into Go value of type jsonpatch.Operation",
            gojson::kind(bad)
        )));
    }
    if list.is_empty() {
        return Ok(None);
    }
    let Some(object) = object else {
        return Err(Failure::Refused(ApiError::internal(&format!(
            "admission webhook {} attempted to modify the object, which is not supported for this operation",
            go_quote(name)
        ))));
    };
    if verdict.patch_type != "JSONPatch" {
        return Err(Failure::Calling(format!(
            "unsupported patch type {}",
            go_quote(&verdict.patch_type)
        )));
    }
    let internal = |m: &str| Failure::Refused(ApiError::internal(m));
    let mut patched =
        crate::patch::json_patch::apply(object, &ops).map_err(|e| internal(&e.message))?;
    redefault(&mut patched).map_err(|e| internal(&e))?;
    Ok(Some(patched))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn verdict(patch: &str) -> Verdict {
        Verdict {
            allowed: true,
            patch: patch.as_bytes().to_vec(),
            patch_type: "JSONPatch".into(),
            ..Verdict::default()
        }
    }

    fn none(_: &mut Value) -> Result<(), String> {
        Ok(())
    }

    #[test]
    fn a_patch_applies_and_a_bad_path_is_the_librarys_error() {
        let cm =
            json!({"kind": "ConfigMap", "metadata": {"name": "a", "labels": {"wh": "mutate"}}});
        let add = r#"[{"op": "add", "path": "/metadata/labels/mutated", "value": "yes"}]"#;
        let out = patched("m", &verdict(add), Some(&cm), &none)
            .unwrap()
            .unwrap();
        assert_eq!(out["metadata"]["labels"]["mutated"], "yes");
        // wh-mutating-bad-path.txt
        let bad = r#"[{"op": "replace", "path": "/spec/nothing/here", "value": 1}]"#;
        let Err(Failure::Refused(e)) = patched("m", &verdict(bad), Some(&cm), &none) else {
            panic!("a bad path must fail the write");
        };
        assert_eq!(
            e.message,
            "Internal error occurred: replace operation does not apply: doc is missing path: /spec/nothing/here: missing value"
        );
    }

    #[test]
    fn an_unreadable_patch_is_a_failed_call() {
        let cm = json!({"metadata": {}});
        assert_eq!(
            patched("m", &verdict("{}"), Some(&cm), &none),
            Err(Failure::Calling(
                "received undecodable patch in webhook response: json: cannot unmarshal object into Go value of type jsonpatch.Patch".into()
            ))
        );
        let delete = patched(
            "m",
            &verdict(r#"[{"op": "add", "path": "/x", "value": 1}]"#),
            None,
            &none,
        );
        assert!(
            matches!(delete, Err(Failure::Refused(e)) if e.message.contains("attempted to modify the object"))
        );
    }
}
