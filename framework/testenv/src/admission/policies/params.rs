//! A binding's params, as upstream's `CollectParams` finds them in its informer: none to find
//! (one evaluation with `params` null) without a `paramKind` or a `paramRef`; else the object
//! `paramRef.name` names, or every object `paramRef.selector` selects, of the `paramKind`, in
//! `paramRef.namespace` or the write's namespace when the kind is namespaced. None found with
//! `parameterNotFoundAction: Deny` is an error (the binding cannot be configured); with
//! `Allow`, no evaluation.

use std::sync::Arc;

use serde_json::Value;

use super::Request;
use crate::storage::selectors::LabelSelector;
use crate::storage::store::State;

/// The params to evaluate the policy with, one evaluation each (`None`: `params` is null).
pub fn collect(
    state: &State,
    kind: Option<&Value>,
    param_ref: Option<&Value>,
    req: &Request,
) -> Result<Vec<Option<Arc<Value>>>, String> {
    let (Some(kind), Some(r)) = (
        kind.filter(|k| k.is_object()),
        param_ref.filter(|r| r.is_object()),
    ) else {
        return Ok(vec![None]);
    };
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let (api_version, kind_name) = (text(kind, "apiVersion"), text(kind, "kind"));
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", &api_version));
    let served = state
        .types()
        .all()
        .into_iter()
        .find(|(_, s)| s.group() == group && s.version() == version && s.kind() == kind_name);
    let Some((res, served)) = served else {
        return Err(format!(
            "paramKind kind `&ParamKind{{APIVersion:{api_version},Kind:{kind_name},}}` not known"
        ));
    };
    let namespace = text(r, "namespace");
    let ns = match (served.namespaced(), namespace.as_str()) {
        (false, "") => String::new(),
        (false, _) => {
            return Err(
                "paramRef.namespace must not be provided for a cluster-scoped `paramKind`".into(),
            );
        }
        (true, "") if req.namespace.is_empty() => {
            return Err("cannot use namespaced paramRef in policy binding that matches cluster-scoped resources".into());
        }
        (true, "") => req.namespace.clone(),
        (true, ns) => ns.to_string(),
    };
    let name = text(r, "name");
    let found: Vec<Option<Arc<Value>>> = if !name.is_empty() {
        state
            .get(res, &ns, &name)
            .cloned()
            .into_iter()
            .map(Some)
            .collect()
    } else if let Some(sel) = r.get("selector").filter(|s| s.is_object()) {
        let sel = LabelSelector::from_object(sel)?;
        let scope = served.namespaced().then_some(ns.as_str());
        state
            .iter(res, scope, None)
            .filter(|(_, o)| sel.matches(o))
            .map(|(_, o)| Some(o.clone()))
            .collect()
    } else {
        return Err("one of name or selector must be provided".into());
    };
    if found.is_empty() && text(r, "parameterNotFoundAction") == "Deny" {
        return Err(
            "no params found for policy binding with `Deny` parameterNotFoundAction".into(),
        );
    }
    Ok(found)
}
