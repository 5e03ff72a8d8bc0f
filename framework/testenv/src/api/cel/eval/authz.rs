//! The calls and the one field (`requestResource`) of the `authorizer` library's values
//! ([`crate::api::cel::authz`]): each builder call returns the next value of the chain, and
//! `check` asks the evaluation's authorizer at [`CHECK_COST`].

use std::sync::Arc;

use kube_cel::cel::Value as Cel;

use super::basics::{Error, no_overload};
use crate::api::cel::authz::{Authorizer, AuthzValue, CHECK_COST, Check, Stage, Verdict};

/// The library value `v` holds, if it holds one.
pub fn of(v: &Cel) -> Option<&AuthzValue> {
    match v {
        Cel::Opaque(o) => o.downcast_ref::<AuthzValue>(),
        _ => None,
    }
}

fn value(stage: Stage, check: Check) -> Cel {
    Cel::Opaque(Arc::new(AuthzValue { stage, check }))
}

/// `authorizer.requestResource`.
pub fn select(v: &AuthzValue, field: &str) -> Result<Cel, Error> {
    match (&v.stage, field) {
        (Stage::Authorizer, "requestResource") => Ok(value(Stage::Resource, v.check.clone())),
        _ => Err(no_overload()),
    }
}

/// `v.name(args)`, and its cost.
pub fn call(
    v: &AuthzValue,
    name: &str,
    args: &[Cel],
    authorizer: Option<&dyn Authorizer>,
) -> (Result<Cel, Error>, u64) {
    let strings: Option<Vec<String>> = args
        .iter()
        .map(|a| match a {
            Cel::String(s) => Some(s.to_string()),
            _ => None,
        })
        .collect();
    let mut check = v.check.clone();
    let fresh = || Check {
        service_account: v.check.service_account.clone(),
        ..Check::default()
    };
    let out = match (&v.stage, name, strings.as_deref()) {
        (Stage::Authorizer, "path", Some([p])) => Some(value(
            Stage::Path,
            Check {
                path: Some(p.clone()),
                ..fresh()
            },
        )),
        (Stage::Authorizer, "group", Some([g])) => Some(value(
            Stage::Group,
            Check {
                group: g.clone(),
                ..fresh()
            },
        )),
        (Stage::Authorizer, "serviceAccount", Some([ns, n])) => {
            check.service_account = Some((ns.clone(), n.clone()));
            Some(value(Stage::Authorizer, check))
        }
        (Stage::Group, "resource", Some([r])) => {
            check.resource = r.clone();
            Some(value(Stage::Resource, check))
        }
        (Stage::Resource, "subresource" | "namespace" | "name", Some([s])) => {
            let field = match name {
                "subresource" => &mut check.subresource,
                "namespace" => &mut check.namespace,
                _ => &mut check.name,
            };
            *field = s.clone();
            Some(value(Stage::Resource, check))
        }
        (Stage::Path | Stage::Resource, "check", Some([verb])) => {
            check.verb = verb.clone();
            let verdict = match authorizer {
                Some(a) => a.authorize(&check),
                None => Verdict {
                    allowed: true,
                    ..Verdict::default()
                },
            };
            return (Ok(value(Stage::Decision(verdict), check)), CHECK_COST);
        }
        (Stage::Decision(d), _, Some([])) => match name {
            "allowed" => Some(Cel::Bool(d.allowed)),
            "errored" => Some(Cel::Bool(!d.error.is_empty())),
            "reason" => Some(Cel::String(Arc::new(d.reason.clone()))),
            "error" => Some(Cel::String(Arc::new(d.error.clone()))),
            _ => None,
        },
        _ => None,
    };
    (out.ok_or_else(no_overload), 1)
}
