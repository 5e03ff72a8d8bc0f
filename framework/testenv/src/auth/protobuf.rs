//! Protobuf request bodies of the auth APIs, decoded into their JSON form: client-go's typed
//! clients (so `kubectl auth can-i` and `kubectl create token`) send TokenRequest and the access
//! reviews as `application/vnd.kubernetes.protobuf`, the `k8s\0` envelope around a
//! `runtime.Unknown` whose `raw` is the object. Field numbers are those of k8s.io/api's
//! `authentication/v1` and `authorization/v1` generated.proto; fields not listed are skipped.

use serde_json::{Map, Value};

use crate::status::ApiError;

/// The protobuf content type.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

#[derive(Clone, Copy)]
enum Kind {
    Str,
    Strings,
    Int,
    Msg(&'static [Field]),
}

type Field = (u64, &'static str, Kind);

const TYPE_META: &[Field] = &[(1, "apiVersion", Kind::Str), (2, "kind", Kind::Str)];
const UNKNOWN: &[Field] = &[(1, "typeMeta", Kind::Msg(TYPE_META))];
const OBJECT_META: &[Field] = &[(1, "name", Kind::Str), (3, "namespace", Kind::Str)];
const RESOURCE_ATTRIBUTES: &[Field] = &[
    (1, "namespace", Kind::Str),
    (2, "verb", Kind::Str),
    (3, "group", Kind::Str),
    (4, "version", Kind::Str),
    (5, "resource", Kind::Str),
    (6, "subresource", Kind::Str),
    (7, "name", Kind::Str),
];
const NON_RESOURCE_ATTRIBUTES: &[Field] = &[(1, "path", Kind::Str), (2, "verb", Kind::Str)];
const ACCESS_REVIEW_SPEC: &[Field] = &[
    (1, "resourceAttributes", Kind::Msg(RESOURCE_ATTRIBUTES)),
    (
        2,
        "nonResourceAttributes",
        Kind::Msg(NON_RESOURCE_ATTRIBUTES),
    ),
    (3, "user", Kind::Str),
    (4, "groups", Kind::Strings),
    (6, "uid", Kind::Str),
];
const BOUND_OBJECT_REF: &[Field] = &[
    (1, "kind", Kind::Str),
    (2, "apiVersion", Kind::Str),
    (3, "name", Kind::Str),
    (4, "uid", Kind::Str),
];
const TOKEN_REQUEST_SPEC: &[Field] = &[
    (1, "audiences", Kind::Strings),
    (3, "boundObjectRef", Kind::Msg(BOUND_OBJECT_REF)),
    (4, "expirationSeconds", Kind::Int),
];
const RULES_REVIEW_SPEC: &[Field] = &[(1, "namespace", Kind::Str)];
const TOKEN_REVIEW_SPEC: &[Field] = &[(1, "token", Kind::Str), (2, "audiences", Kind::Strings)];

fn object(spec: &'static [Field]) -> [Field; 2] {
    [
        (1, "metadata", Kind::Msg(OBJECT_META)),
        (2, "spec", Kind::Msg(spec)),
    ]
}

fn unrecognized(why: &str) -> ApiError {
    ApiError::bad_request(format!("the object provided is unrecognized: {why}"))
}

/// Decodes an enveloped auth API object into its JSON form.
pub fn decode(body: &[u8]) -> Result<Value, ApiError> {
    let unknown = body
        .strip_prefix(b"k8s\0")
        .ok_or_else(|| unrecognized("no protobuf envelope"))?;
    let mut raw: &[u8] = &[];
    let envelope = message(unknown, UNKNOWN, &mut |n, v| {
        if n == 2 {
            raw = v;
        }
    })?;
    let api_version = envelope
        .pointer("/typeMeta/apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let kind = envelope
        .pointer("/typeMeta/kind")
        .and_then(Value::as_str)
        .unwrap_or("");
    let fields = match kind {
        "SubjectAccessReview" | "SelfSubjectAccessReview" | "LocalSubjectAccessReview" => {
            object(ACCESS_REVIEW_SPEC)
        }
        "SelfSubjectRulesReview" => object(RULES_REVIEW_SPEC),
        "TokenRequest" => object(TOKEN_REQUEST_SPEC),
        "TokenReview" => object(TOKEN_REVIEW_SPEC),
        other => {
            return Err(unrecognized(&format!(
                "no protobuf decoding for kind {other:?}"
            )));
        }
    };
    let mut obj = message(raw, &fields, &mut |_, _| {})?;
    obj["apiVersion"] = api_version.into();
    obj["kind"] = kind.into();
    Ok(obj)
}

fn varint(buf: &mut &[u8]) -> Result<u64, ApiError> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&b, rest) = buf
            .split_first()
            .ok_or_else(|| unrecognized("truncated varint"))?;
        *buf = rest;
        value |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(unrecognized("varint too long"))
}

/// Decodes one message by `fields`; length-delimited fields not in `fields` go to `other`.
fn message<'a>(
    mut buf: &'a [u8],
    fields: &[Field],
    other: &mut dyn FnMut(u64, &'a [u8]),
) -> Result<Value, ApiError> {
    let mut out = Map::new();
    while !buf.is_empty() {
        let key = varint(&mut buf)?;
        let (number, wire) = (key >> 3, key & 7);
        let field = fields.iter().find(|(n, _, _)| *n == number);
        match wire {
            0 => {
                let v = varint(&mut buf)?;
                if let Some((_, name, Kind::Int)) = field {
                    out.insert((*name).into(), (v as i64).into());
                }
            }
            1 | 5 => {
                let len = if wire == 1 { 8 } else { 4 };
                buf = buf
                    .get(len..)
                    .ok_or_else(|| unrecognized("truncated fixed field"))?;
            }
            2 => {
                let len = usize::try_from(varint(&mut buf)?)
                    .map_err(|_| unrecognized("field too long"))?;
                let (v, rest) = (buf.get(..len), buf.get(len..));
                let (Some(v), Some(rest)) = (v, rest) else {
                    return Err(unrecognized("truncated field"));
                };
                buf = rest;
                let text = || String::from_utf8_lossy(v).into_owned();
                match field {
                    Some((_, name, Kind::Str)) => {
                        out.insert((*name).into(), text().into());
                    }
                    Some((_, name, Kind::Strings)) => {
                        let list = out.entry(*name).or_insert_with(|| Value::Array(Vec::new()));
                        if let Value::Array(a) = list {
                            a.push(text().into());
                        }
                    }
                    Some((_, name, Kind::Msg(inner))) => {
                        out.insert((*name).into(), message(v, inner, &mut |_, _| {})?);
                    }
                    Some((_, _, Kind::Int)) | None => other(number, v),
                }
            }
            _ => return Err(unrecognized("unsupported wire type")),
        }
    }
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn field(n: u64, v: &[u8]) -> Vec<u8> {
        let mut out = vec![((n << 3) | 2) as u8, v.len() as u8];
        out.extend_from_slice(v);
        out
    }

    #[test]
    fn decodes_an_enveloped_self_subject_access_review() {
        let attrs = [field(2, b"list"), field(5, b"nodes")].concat();
        let spec = field(1, &attrs);
        let raw = [field(1, b""), field(2, &spec)].concat();
        let type_meta = [
            field(1, b"authorization.k8s.io/v1"),
            field(2, b"SelfSubjectAccessReview"),
        ]
        .concat();
        let unknown = [field(1, &type_meta), field(2, &raw)].concat();
        let body = [b"k8s\0".as_slice(), &unknown].concat();
        assert_eq!(
            decode(&body).unwrap(),
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                   "metadata": {}, "spec": {"resourceAttributes": {"verb": "list", "resource": "nodes"}}})
        );
        assert!(decode(b"{}").is_err());
        assert!(decode(&body[..body.len() - 1]).is_err());
    }

    #[test]
    fn decodes_token_request_expiry_and_audiences() {
        let spec = [field(1, b"a"), field(1, b"b"), vec![4 << 3, 0x90, 0x1c]].concat();
        let raw = field(2, &spec);
        let type_meta = [
            field(1, b"authentication.k8s.io/v1"),
            field(2, b"TokenRequest"),
        ]
        .concat();
        let body = [b"k8s\0".as_slice(), &field(1, &type_meta), &field(2, &raw)].concat();
        let v = decode(&body).unwrap();
        assert_eq!(
            v["spec"],
            json!({"audiences": ["a", "b"], "expirationSeconds": 3600})
        );
    }
}
