//! What kube-apiserver checks in a conversion webhook's answer, checked before the answer
//! leaves, with the server's wording (the `conv-webhook-*` captures): as many objects as were
//! sent, each in the desired apiVersion, with the kind, name, namespace and uid it was sent
//! with. A refused answer becomes a `Failure` the server passes on (`conversion webhook for ...
//! failed: MESSAGE`), and is logged here, where it was made. Then, as the server does, the
//! metadata of each converted object is the sent object's, except the labels and annotations
//! the conversion set (`conv-webhook-changes-labels`).

use kube::core::Status;
use kube::core::conversion::ConversionResponse;
use serde_json::Value;

/// Refuses `answer` unless it is a sound conversion of `sent` to `desired`, and restores each
/// converted object's metadata; a `Failure` answer is left as it is.
pub(crate) fn checked(
    sent: &[Value],
    desired: &str,
    mut answer: ConversionResponse,
) -> ConversionResponse {
    if answer.result.is_failure() {
        return answer;
    }
    if let Err(message) = check(sent, desired, &answer.converted_objects) {
        tracing::error!(%message, "refusing a conversion answer the API server would refuse");
        answer.converted_objects = Vec::new();
        answer.result = Status::failure(&message, "");
        return answer;
    }
    for (original, converted) in sent.iter().zip(answer.converted_objects.iter_mut()) {
        restore_metadata(original, converted);
    }
    answer
}

/// The first problem the server would find in `converted`, in its words.
fn check(sent: &[Value], desired: &str, converted: &[Value]) -> Result<(), String> {
    let Some(first) = sent.first() else {
        return Ok(());
    };
    if converted.len() != sent.len() {
        return Err(format!(
            "conversion webhook for {} returned {} objects, expected {}",
            gvk(first),
            converted.len(),
            sent.len()
        ));
    }
    for (index, (original, converted)) in sent.iter().zip(converted).enumerate() {
        let received = text(converted, &["apiVersion"]);
        if received != desired {
            return Err(format!(
                "conversion webhook for {} returned invalid object at index {index}: invalid groupVersion (expected {desired}, received {received})",
                gvk(original)
            ));
        }
        if let Err(problem) = same_identity(original, converted) {
            return Err(match sent.len() {
                1 => format!(
                    "conversion webhook for {} returned invalid object: {problem}",
                    gvk(original)
                ),
                _ => format!(
                    "conversion webhook for {} returned invalid metadata in object at index {index}: {problem}",
                    gvk(original)
                ),
            });
        }
    }
    Ok(())
}

/// The server's `validateConvertedObject`: kind, name, namespace and uid unchanged.
fn same_identity(original: &Value, converted: &Value) -> Result<(), String> {
    for (field, path) in [
        ("kind", &["kind"][..]),
        ("name", &["metadata", "name"][..]),
        ("namespace", &["metadata", "namespace"][..]),
        ("UID", &["metadata", "uid"][..]),
    ] {
        let (e, a) = (text(original, path), text(converted, path));
        if e != a {
            return Err(format!("must have the same {field}: {e} != {a}"));
        }
    }
    Ok(())
}

/// The original metadata, with the converted object's labels and annotations.
fn restore_metadata(original: &Value, converted: &mut Value) {
    let Some(mut metadata) = original.get("metadata").cloned() else {
        return;
    };
    let Some(object) = converted.as_object_mut() else {
        return;
    };
    let set = object.get("metadata").cloned().unwrap_or(Value::Null);
    if let Some(meta) = metadata.as_object_mut() {
        for field in ["labels", "annotations"] {
            match set.get(field) {
                Some(value) if !value.is_null() => meta.insert(field.to_string(), value.clone()),
                _ => meta.remove(field),
            };
        }
    }
    object.insert("metadata".to_string(), metadata);
}

/// The string at `path`, or "" as Go's unstructured getters read a missing one.
fn text<'a>(value: &'a Value, path: &[&str]) -> &'a str {
    path.iter()
        .try_fold(value, |v, key| v.get(key))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// `group/version, Kind=kind`, as the server prints the kind of what it sent.
fn gvk(object: &Value) -> String {
    format!(
        "{}, Kind={}",
        text(object, &["apiVersion"]),
        text(object, &["kind"])
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn widget(api_version: &str, name: &str) -> Value {
        json!({"apiVersion": api_version, "kind": "Widget",
               "metadata": {"name": name, "namespace": "wh-cap", "uid": "a3056d4d", "generation": 2},
               "spec": {"replicas": 4}})
    }

    fn answer(objects: Vec<Value>) -> ConversionResponse {
        ConversionResponse::invalid(Status::default()).success(objects)
    }

    fn refused(sent: &[Value], objects: Vec<Value>) -> String {
        let answered = checked(sent, "wh.example.com/v1alpha1", answer(objects));
        assert!(answered.result.is_failure());
        assert!(answered.converted_objects.is_empty());
        answered.result.message
    }

    #[test]
    fn renames_wrong_versions_and_wrong_counts_are_refused_in_the_servers_words() {
        let sent = [widget("wh.example.com/v1", "w1")];
        assert_eq!(
            refused(&sent, vec![widget("wh.example.com/v1alpha1", "w1-renamed")]),
            "conversion webhook for wh.example.com/v1, Kind=Widget returned invalid object: must have the same name: w1 != w1-renamed"
        );
        assert_eq!(
            refused(&sent, vec![widget("wh.example.com/v9", "w1")]),
            "conversion webhook for wh.example.com/v1, Kind=Widget returned invalid object at index 0: invalid groupVersion (expected wh.example.com/v1alpha1, received wh.example.com/v9)"
        );
        assert_eq!(
            refused(&sent, vec![]),
            "conversion webhook for wh.example.com/v1, Kind=Widget returned 0 objects, expected 1"
        );
        let mut moved = widget("wh.example.com/v1alpha1", "w1");
        moved["metadata"]["uid"] = json!("other");
        assert_eq!(
            refused(&sent, vec![moved]),
            "conversion webhook for wh.example.com/v1, Kind=Widget returned invalid object: must have the same UID: a3056d4d != other"
        );
    }

    #[test]
    fn labels_and_annotations_are_kept_and_other_metadata_restored() {
        let sent = [widget("wh.example.com/v1", "w1")];
        let mut converted = widget("wh.example.com/v1alpha1", "w1");
        converted["metadata"]["labels"] = json!({"converted-by": "webhook"});
        converted["metadata"]["generation"] = json!(9);
        let answered = checked(&sent, "wh.example.com/v1alpha1", answer(vec![converted]));
        assert!(answered.result.is_success(), "{:?}", answered.result);
        let metadata = &answered.converted_objects[0]["metadata"];
        assert_eq!(metadata["labels"], json!({"converted-by": "webhook"}));
        assert_eq!(metadata["generation"], json!(2));
    }
}
