//! A webhook's answer read as client-go's `Result.Into` reads it into a typed object of the
//! webhook scheme: a status outside 200-206 is client-go's generic error (`an error on the
//! server ("boom") has prevented the request from succeeding`), an empty body is refused, and
//! the body is decoded as apimachinery decodes it: Go's JSON errors after `couldn't get
//! version/kind; json parse error: `, a missing `kind`/`apiVersion` taken from the expected
//! type, an unregistered one refused naming the scheme.

use serde_json::Value;

use super::connect::Answer;
use super::error::CallError;
use super::gojson;
use crate::api::status::go_quote;

/// What Go's `encoding/json` says of a top-level value that is no object, when it reads
/// `kind` and `apiVersion` out of it.
const KIND_FINDER: &str = "struct { APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }";

/// Decodes `answer` as one of `known` (`(apiVersion, kind)`; the first is the type asked
/// for), in a scheme named `scheme` for the errors.
pub fn decode(answer: &Answer, known: &[(&str, &str)], scheme: &str) -> Result<Value, CallError> {
    let fail = |m: String| CallError::Call(m);
    if !(200..=206).contains(&answer.status) {
        return Err(fail(generic_server_response(answer)));
    }
    if answer.body.is_empty() {
        let ct = answer.content_type.as_deref().unwrap_or("application/json");
        return Err(fail(format!(
            "0-length response with status code: {} and content type: {ct}",
            answer.status
        )));
    }
    let json_like = answer
        .body
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|b| *b == b'{');
    let parse = |why: String| {
        fail(format!(
            "couldn't get version/kind; json parse error: {why}"
        ))
    };
    if json_like && let Some(e) = gojson::syntax_error(&answer.body) {
        return Err(parse(e));
    }
    // Anything else goes through the YAML decoder, which turns a bare word into a string.
    let value: Value = serde_json::from_slice(&answer.body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&answer.body).into()));
    if !value.is_object() && !value.is_null() {
        return Err(parse(format!(
            "json: cannot unmarshal {} into Go value of type {KIND_FINDER}",
            gojson::kind(&value)
        )));
    }
    let field = |k: &str| match value.get(k) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(parse(format!(
            "json: cannot unmarshal {} into Go struct field .{k} of type string",
            gojson::kind(other)
        ))),
    };
    let (mut api_version, mut kind) = (field("apiVersion")?, field("kind")?);
    let (want_version, want_kind) = known.first().copied().unwrap_or_default();
    if kind.is_empty() {
        kind = want_kind.to_string();
    }
    if api_version.is_empty() {
        api_version = want_version.to_string();
    }
    if !known.contains(&(api_version.as_str(), kind.as_str())) {
        return Err(fail(format!(
            "no kind {} is registered for version {} in scheme {}",
            go_quote(&kind),
            go_quote(&api_version),
            go_quote(scheme)
        )));
    }
    if (api_version.as_str(), kind.as_str()) != (want_version, want_kind) {
        let go_type = |v: &str, k: &str| format!("{}.{k}", v.rsplit('/').next().unwrap_or(v));
        return Err(fail(format!(
            "converting ({}) to ({}): unknown conversion",
            go_type(&api_version, &kind),
            go_type(want_version, want_kind)
        )));
    }
    Ok(value)
}

/// client-go's error for an unexpected status (apimachinery's `NewGenericServerResponse`): a
/// text answer's first 2 KiB are quoted, any other is "unknown".
fn generic_server_response(answer: &Answer) -> String {
    let text = answer.content_type.as_deref().is_none_or(|ct| {
        ct.split(';')
            .next()
            .is_some_and(|m| m.trim().to_ascii_lowercase().starts_with("text/"))
    });
    let body = &answer.body[..answer.body.len().min(2048)];
    let message = match text {
        true => String::from_utf8_lossy(body).trim().to_string(),
        false => "unknown".to_string(),
    };
    let code = answer.status;
    match code {
        409 => "the server reported a conflict".into(),
        404 => "the server could not find the requested resource".into(),
        400 => "the server rejected our request for an unknown reason".into(),
        401 => "the server has asked for the client to provide credentials".into(),
        403 | 415 => message,
        406 if message.is_empty() || message == "unknown" => {
            "the server was unable to respond with a content type that the client supports".into()
        }
        406 => message,
        405 => "the server does not allow this method on the requested resource".into(),
        422 => "the server rejected our request due to an error in our request".into(),
        503 => "the server is currently unable to handle the request".into(),
        504 => "the server was unable to return a response in the time allotted, but may still be processing the request".into(),
        429 => "the server has received too many requests and has asked us to try again later".into(),
        c if c >= 500 => format!(
            "an error on the server ({}) has prevented the request from succeeding",
            go_quote(&message)
        ),
        c => format!("the server responded with the status code {c} but did not return more information"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use serde_json::json;

    const KNOWN: &[(&str, &str)] = &[
        ("admission.k8s.io/v1", "AdmissionReview"),
        ("admission.k8s.io/v1beta1", "AdmissionReview"),
    ];
    const SCHEME: &str = "k8s.io/apiserver/pkg/util/webhook/client.go:69";

    fn answer(status: u16, ct: Option<&str>, body: &str) -> Answer {
        Answer {
            url: "https://127.0.0.1:1/x?timeout=5s".into(),
            status,
            content_type: ct.map(String::from),
            body: Bytes::from(body.to_string()),
        }
    }

    fn err(a: Answer) -> String {
        decode(&a, KNOWN, SCHEME).unwrap_err().to_string()
    }

    #[test]
    fn a_500_with_text_quotes_it() {
        // wh-validating-http-500.txt
        assert_eq!(
            err(answer(500, Some("text/plain; charset=utf-8"), "boom\n")),
            "an error on the server (\"boom\") has prevented the request from succeeding"
        );
        assert_eq!(
            err(answer(500, Some("application/json"), "{}")),
            "an error on the server (\"unknown\") has prevented the request from succeeding"
        );
        assert_eq!(
            err(answer(404, None, "")),
            "the server could not find the requested resource"
        );
    }

    #[test]
    fn bad_json_is_worded_as_go_words_it() {
        // wh-validating-bad-json.txt
        assert_eq!(
            err(answer(200, Some("application/json"), "{not json")),
            "couldn't get version/kind; json parse error: invalid character 'n' looking for beginning of object key string"
        );
        assert_eq!(
            err(answer(200, None, "")),
            "0-length response with status code: 200 and content type: application/json"
        );
        assert!(err(answer(200, Some("text/html"), "<html>")).contains("cannot unmarshal string"));
    }

    #[test]
    fn an_unknown_kind_names_the_scheme() {
        // wh-validating-wrong-kind.txt
        assert_eq!(
            err(answer(
                200,
                None,
                r#"{"apiVersion":"admission.k8s.io/v1","kind":"Nope"}"#
            )),
            "no kind \"Nope\" is registered for version \"admission.k8s.io/v1\" in scheme \"k8s.io/apiserver/pkg/util/webhook/client.go:69\""
        );
    }

    #[test]
    fn a_missing_kind_is_the_asked_type() {
        let v = decode(&answer(200, None, r#"{"response": {}}"#), KNOWN, SCHEME).unwrap();
        assert_eq!(v, json!({"response": {}}));
        assert!(
            err(answer(
                200,
                None,
                r#"{"apiVersion":"admission.k8s.io/v1beta1"}"#
            ))
            .contains("unknown conversion")
        );
    }
}
