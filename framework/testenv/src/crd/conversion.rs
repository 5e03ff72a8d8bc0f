//! CRD conversion webhooks (`spec.conversion.strategy: Webhook`), as apiextensions-apiserver's
//! webhook converter calls them: objects stored in the storage version are sent in one
//! `ConversionReview` (`apiextensions.k8s.io/v1`, or `v1beta1` when the CRD asks only for that)
//! whenever a request goes through another served version, and the answer is checked as upstream
//! checks it, with its wording (conv-webhook-*.txt): the uid, a `Success` result, the count, then
//! per object its `apiVersion` and kind, its name, namespace and uid unchanged; the converted
//! object keeps its own labels and annotations and gets the rest of `metadata` back from the
//! original (conv-webhook-changes-labels.txt). Every failure is a 500 whose message names the
//! converted objects' version and kind. No store lock is held while the webhook is called.

use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::api::kinds::lookup;
use crate::api::status::ApiError;
use crate::api::types::Served;
use crate::storage::store::State;
use crate::webhook_client::{self, ClientConfig, Target};

/// Where upstream's webhook client decoder says it was made, in its "no kind" errors.
const SCHEME: &str = "k8s.io/apiserver/pkg/util/webhook/client.go:69";
/// The `ConversionReview` version sent unless the CRD asks only for `v1beta1`.
const V1: &str = "apiextensions.k8s.io/v1";
/// The deadline of one conversion call (the captures' `?timeout=30s`).
const TIMEOUT: Duration = Duration::from_secs(30);

/// A custom type's conversion webhook, read under the store lock and called without it.
#[derive(Debug, Clone)]
pub struct Converter {
    target: Result<Target, String>,
    /// `apiextensions.k8s.io/v1` or `v1beta1`.
    review_version: &'static str,
}

/// The conversion webhook a request through `rt` needs: `None` for a built-in kind, a CRD
/// without `strategy: Webhook`, or a request through the storage version.
pub fn needed(state: &State, rt: &Served) -> Option<Converter> {
    let c = rt.custom()?;
    if c.version == c.storage_version {
        return None;
    }
    of_crd(state, &c.crd)
}

/// The conversion webhook of the CRD named `crd`, if its strategy is `Webhook`.
pub fn of_crd(state: &State, crd: &str) -> Option<Converter> {
    let res = lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions")?;
    let conversion = state.get(res, "", crd)?.pointer("/spec/conversion")?;
    if conversion.get("strategy").and_then(Value::as_str) != Some("Webhook") {
        return None;
    }
    let webhook = conversion.get("webhook").unwrap_or(&Value::Null);
    let client = ClientConfig::from_json(webhook.get("clientConfig").unwrap_or(&Value::Null));
    let versions = crate::api::validation::string_list(webhook.get("conversionReviewVersions"));
    let review_version = match versions.iter().any(|v| v == "v1") || versions.is_empty() {
        true => V1,
        false => "apiextensions.k8s.io/v1beta1",
    };
    Some(Converter {
        target: client.resolve(state).map_err(|e| e.to_string()),
        review_version,
    })
}

/// `objects` (one version and kind, all of them) converted to `desired` (`group/version`).
pub async fn convert(
    converter: &Converter,
    objects: Vec<Value>,
    desired: &str,
) -> Result<Vec<Value>, ApiError> {
    let Some(first) = objects.first() else {
        return Ok(objects);
    };
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let (from_version, kind) = (text(first, "apiVersion"), text(first, "kind"));
    if from_version == desired {
        return Ok(objects);
    }
    let from = format!("{from_version}, Kind={kind}");
    let failed = |why: String| error(format!("conversion webhook for {from} failed: {why}"));
    let target = converter.target.as_ref().map_err(|e| failed(e.clone()))?;
    let uid = uuid::Uuid::new_v4().to_string();
    let sent: Vec<Value> = objects.iter().map(without_resource_version).collect();
    let review = json!({
        "kind": "ConversionReview",
        "apiVersion": converter.review_version,
        "request": {"uid": uid, "desiredAPIVersion": desired, "objects": sent},
        "response": {"uid": "", "convertedObjects": null, "result": {"metadata": {}}},
    });
    let body = serde_json::to_vec(&review).unwrap_or_default();
    let answer = webhook_client::post(target, body, TIMEOUT)
        .await
        .map_err(|e| failed(e.to_string()))?;
    let known = [
        (converter.review_version, "ConversionReview"),
        ("apiextensions.k8s.io/v1", "ConversionReview"),
        ("apiextensions.k8s.io/v1beta1", "ConversionReview"),
    ];
    let answer =
        webhook_client::decode(&answer, &known, SCHEME).map_err(|e| failed(e.to_string()))?;
    let uid_checked = (converter.review_version == V1).then_some(uid.as_str());
    let converted = converted_objects(&answer, uid_checked).map_err(failed)?;
    if converted.len() != objects.len() {
        return Err(error(format!(
            "conversion webhook for {from} returned {} objects, expected {}",
            converted.len(),
            objects.len()
        )));
    }
    let list = objects.len() > 1;
    let mut out = Vec::with_capacity(objects.len());
    for (i, (original, converted)) in objects.iter().zip(converted).enumerate() {
        let checked =
            check(original, converted, desired).map_err(|(at_index, why)| match (list, at_index) {
                (true, true) => format!("returned invalid converted object at index {i}: {why}"),
                (true, false) => format!("returned invalid converted object: {why}"),
                (false, true) => format!("returned invalid object at index 0: {why}"),
                (false, false) => format!("returned invalid object: {why}"),
            });
        out.push(checked.map_err(|why| error(format!("conversion webhook for {from} {why}")))?);
    }
    Ok(out)
}

/// Stored objects read through `rt` (their `apiVersion` already `rt`'s, as `crd::to_version`
/// leaves them): converted by `converter` from the storage version when there is one.
pub async fn read(
    converter: Option<&Converter>,
    rt: &Served,
    mut objects: Vec<Value>,
) -> Result<Vec<Value>, ApiError> {
    let (Some(converter), Some(c)) = (converter, rt.custom()) else {
        return Ok(objects);
    };
    let stored = format!("{}/{}", c.group, c.storage_version);
    let desired = rt.api_version();
    let mut out = Vec::with_capacity(objects.len());
    // One review per object, a list's items too. A LIST through v1alpha1 on kube-apiserver
    // v1.23 (conv-list-old-version.txt, two Widgets) sent three reviews of one object each and
    // none with the whole list: its storage decodes what it reads from etcd item by item, and
    // each item is converted on its own as it is decoded (the third review, w2 again, is the
    // server's own, its watch cache's). The webhook converter can take a whole list in one
    // review, and a server that converts a list at once when it encodes it would send one;
    // no capture shows that, so a list here makes as many reviews as it has items, as the
    // capture does, and a webhook written against kube-testenv must answer both shapes anyway.
    for mut o in objects.drain(..) {
        if o.is_object() {
            o["apiVersion"] = stored.clone().into();
            o["kind"] = c.kind.clone().into();
        }
        out.extend(convert(converter, vec![o], &desired).await?);
    }
    Ok(out)
}

/// How a watch sends an event's object once converted (a Table row, its metadata), by the
/// event's type.
pub type Shape = dyn Fn(&str, Value) -> Value + Send + Sync;

/// A chunk of a JSON watch through `rt` (whole `{"type", "object"}` lines) with each event's
/// object converted, then shaped by `shape` (bookmarks are only shaped); a conversion that
/// fails ends in an `ERROR` event with its Status, and anything else passes through.
pub async fn watch_chunk(
    converter: &Converter,
    rt: &Served,
    shape: &Shape,
    chunk: bytes::Bytes,
) -> bytes::Bytes {
    let Ok(text) = std::str::from_utf8(&chunk) else {
        return chunk;
    };
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let event: Option<Value> = serde_json::from_str(line).ok();
        let converted = match event {
            Some(mut e) if matches!(e["type"].as_str(), Some("ADDED" | "MODIFIED" | "DELETED")) => {
                let object = e["object"].take();
                match read(Some(converter), rt, vec![object]).await {
                    Ok(mut o) => {
                        let ty = e["type"].as_str().unwrap_or("").to_string();
                        e["object"] = shape(&ty, o.pop().unwrap_or_default());
                    }
                    Err(err) => e = json!({"type": "ERROR", "object": err.to_status()}),
                }
                Some(e)
            }
            Some(mut e) if e["type"].as_str() == Some("BOOKMARK") => {
                e["object"] = shape("BOOKMARK", e["object"].take());
                Some(e)
            }
            _ => None,
        };
        match converted {
            Some(e) => {
                out.push_str(&e.to_string());
                out.push('\n');
            }
            None => out.push_str(line),
        }
    }
    bytes::Bytes::from(out)
}

/// The write's or read's error: a bare 500, as upstream's (conv-webhook-failure-get.txt).
fn error(message: String) -> ApiError {
    ApiError {
        code: 500,
        reason: "".into(),
        message,
        details: None,
        retry_after: None,
    }
}

/// The stored object as the review carries it: the storage sets `resourceVersion` after
/// conversion, so the webhook never sees it.
fn without_resource_version(o: &Value) -> Value {
    let mut o = o.clone();
    if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
    }
    o
}

/// `response.convertedObjects` of a `Success`, as upstream's `getConvertedObjectsFromResponse`:
/// the uid is checked (`uid`) only in a `v1` review, as upstream skips it for `v1beta1`, whose
/// first implementation did not check it. (A review of the other version than the one sent
/// never gets here: decoding it is already the "unknown conversion" error.)
fn converted_objects(review: &Value, uid: Option<&str>) -> Result<Vec<Value>, String> {
    let Some(response) = review.get("response").filter(|r| r.is_object()) else {
        return Err("no response provided".into());
    };
    let got = response.get("uid").and_then(Value::as_str).unwrap_or("");
    if let Some(uid) = uid.filter(|uid| got != *uid) {
        return Err(format!("expected response.uid={uid:?}, got {got:?}"));
    }
    let result = response.get("result").unwrap_or(&Value::Null);
    let status = result.get("status").and_then(Value::as_str).unwrap_or("");
    if status != "Success" {
        return match result.get("message").and_then(Value::as_str) {
            Some(m) if !m.is_empty() => Err(m.to_string()),
            _ => Err(format!(
                "response.result.status was '{status}', not 'Success'"
            )),
        };
    }
    Ok(response
        .get("convertedObjects")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default())
}

/// One converted object checked against its original and given back the original's metadata
/// but for labels and annotations; the error says whether upstream words it "at index".
fn check(original: &Value, mut converted: Value, desired: &str) -> Result<Value, (bool, String)> {
    let text = |v: &Value, p: &str| {
        v.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let received = text(&converted, "/apiVersion");
    if received != desired {
        return Err((
            true,
            format!("invalid groupVersion (expected {desired}, received {received})"),
        ));
    }
    let (want, got) = (text(original, "/kind"), text(&converted, "/kind"));
    if want != got {
        return Err((
            true,
            format!("invalid kind (expected {want}, received {got})"),
        ));
    }
    for (field, what) in [
        ("/metadata/name", "name"),
        ("/metadata/namespace", "namespace"),
        ("/metadata/uid", "UID"),
    ] {
        let (a, b) = (text(original, field), text(&converted, field));
        if a != b {
            return Err((false, format!("must have the same {what}: {a} != {b}")));
        }
    }
    let mut meta: Map<String, Value> = original
        .get("metadata")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for field in ["labels", "annotations"] {
        match converted.pointer(&format!("/metadata/{field}")) {
            Some(v) if !v.is_null() => meta.insert(field.into(), v.clone()),
            _ => meta.remove(field),
        };
    }
    converted["metadata"] = Value::Object(meta);
    Ok(converted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn widget(version: &str, name: &str) -> Value {
        json!({"apiVersion": format!("wh.example.com/{version}"), "kind": "Widget",
            "metadata": {"name": name, "namespace": "wh-cap", "uid": "u", "resourceVersion": "7", "labels": {"a": "1"}},
            "spec": {"replicas": 3}})
    }

    #[test]
    fn a_converted_object_is_checked_and_keeps_the_original_metadata() {
        let original = widget("v1", "w1");
        let mut good = widget("v1alpha1", "w1");
        good["metadata"] =
            json!({"name": "w1", "namespace": "wh-cap", "uid": "u", "labels": {"b": "2"}});
        let out = check(&original, good, "wh.example.com/v1alpha1").unwrap();
        // conv-webhook-changes-labels.txt: the webhook's labels, the original's resourceVersion.
        assert_eq!(out["metadata"]["labels"], json!({"b": "2"}));
        assert_eq!(out["metadata"]["resourceVersion"], "7");
        // conv-webhook-renames.txt, conv-webhook-wrong-version.txt
        let renamed = widget("v1alpha1", "w1-renamed");
        assert_eq!(
            check(&original, renamed, "wh.example.com/v1alpha1").unwrap_err(),
            (
                false,
                "must have the same name: w1 != w1-renamed".to_string()
            )
        );
        let wrong = widget("v9", "w1");
        assert_eq!(
            check(&original, wrong, "wh.example.com/v1alpha1")
                .unwrap_err()
                .1,
            "invalid groupVersion (expected wh.example.com/v1alpha1, received wh.example.com/v9)"
        );
    }

    #[test]
    fn a_failed_result_is_the_webhooks_message() {
        // conv-webhook-failure-get.txt
        let review = json!({"response": {"uid": "x", "result": {"status": "Failure", "message": "cannot convert widget: size out of range"}}});
        assert_eq!(
            converted_objects(&review, Some("x")).unwrap_err(),
            "cannot convert widget: size out of range"
        );
        assert_eq!(
            converted_objects(&json!({"response": {"uid": "y"}}), Some("x")).unwrap_err(),
            "expected response.uid=\"x\", got \"y\""
        );
        assert_eq!(
            converted_objects(&json!({}), Some("x")).unwrap_err(),
            "no response provided"
        );
    }
}
