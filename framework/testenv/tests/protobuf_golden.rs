//! The captured protobuf answers of a real kube-apiserver (tests/golden/protobuf-*.txt, copied
//! from the shared captures) against this server's: the envelope and watch framing byte for byte,
//! the objects field for field after blanking what differs on every run (uid, resourceVersion,
//! timestamps, managedFields) and reading proto2 defaults as unset, since upstream's encoder also
//! writes empty non-pointer fields (`generateName: ""`) that this server leaves out.

use http_body_util::BodyExt;
use k8s_pb::api::core::v1::ConfigMap;
use k8s_pb::apimachinery::pkg::apis::meta::v1::{Status, WatchEvent};
use k8s_pb::apimachinery::pkg::runtime::Unknown;
use kube_testenv::TestEnv;
use prost::Message;
use serde_json::json;

/// The request line, the response headers and the hex-dumped body of a capture.
fn capture(name: &str) -> (String, Vec<String>, Vec<u8>) {
    let path = format!("{}/tests/golden/{name}.txt", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    let request = text
        .lines()
        .next()
        .unwrap()
        .trim_start_matches("# ")
        .to_string();
    let headers = text
        .lines()
        .filter_map(|l| l.strip_prefix("#   "))
        .map(str::to_string)
        .collect();
    let mut body = Vec::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let hex = line.split_once(": ").unwrap().1.split("  ").next().unwrap();
        let hex: String = hex.split_whitespace().collect();
        for i in (0..hex.len()).step_by(2) {
            body.push(u8::from_str_radix(&hex[i..i + 2], 16).unwrap());
        }
    }
    (request, headers, body)
}

fn envelope(body: &[u8]) -> Unknown {
    Unknown::decode(body.strip_prefix(b"k8s\0").unwrap()).unwrap()
}

/// The object with run-specific values blanked and proto2 defaults read as unset.
fn normalized(mut cm: ConfigMap) -> String {
    let m = cm.metadata.as_mut().unwrap();
    (m.uid, m.resource_version, m.creation_timestamp) = (None, None, None);
    m.managed_fields.clear();
    proto2_defaults(format!("{cm:?}"))
}

fn proto2_defaults(debug: String) -> String {
    debug
        .replace("Some(\"\")", "None")
        .replace("Some(0)", "None")
}

/// Everything of the envelope but its raw object, which is compared decoded.
fn frame_bytes(body: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let u = envelope(body);
    let head = Unknown {
        raw: None,
        ..u.clone()
    }
    .encode_to_vec();
    (head, u.raw.unwrap())
}

async fn get(
    client: &kube::Client,
    path: &str,
    accept: &str,
) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let req = http::Request::builder()
        .uri(path)
        .header("accept", accept)
        .body(kube::client::Body::empty())
        .unwrap();
    let resp = client.send(req).await.unwrap();
    let headers = resp
        .headers()
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_string()))
        .collect();
    let code = resp.status().as_u16();
    (
        code,
        headers,
        resp.into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec(),
    )
}

fn assert_headers(got: &[(String, String)], want: &[String], ct: &str) {
    let has = |k: &str, v: &str| got.iter().any(|(gk, gv)| gk == k && gv == v);
    assert!(want.iter().any(|h| h == &format!("content-type: {ct}")));
    assert!(has("content-type", ct), "{got:?}");
    assert!(has("cache-control", "no-cache, private"), "{got:?}");
    assert!(got.iter().any(|(k, _)| k == "audit-id"));
}

async fn with_golden_configmap() -> (TestEnv, kube::Client) {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "golden-pb", "namespace": "default"}, "data": {"k": "v"}});
    let req = http::Request::post("/api/v1/namespaces/default/configmaps")
        .header("content-type", "application/json")
        .body(kube::client::Body::from(serde_json::to_vec(&cm).unwrap()))
        .unwrap();
    assert_eq!(client.send(req).await.unwrap().status(), 201);
    (env, client)
}

#[tokio::test]
async fn get_configmap_matches_the_capture() {
    let (_env, client) = with_golden_configmap().await;
    let (request, headers, want) = capture("protobuf-get-configmap");
    let path = request.strip_prefix("GET ").unwrap();
    let (code, got_headers, got) = get(&client, path, "application/vnd.kubernetes.protobuf").await;
    assert_eq!(code, 200);
    assert_headers(
        &got_headers,
        &headers,
        "application/vnd.kubernetes.protobuf",
    );
    assert_eq!(&got[..4], b"k8s\0");
    let ((want_head, want_raw), (got_head, got_raw)) = (frame_bytes(&want), frame_bytes(&got));
    assert_eq!(got_head, want_head);
    // The envelope's bytes around the object, as upstream writes them: magic, typeMeta and the
    // raw field's tag (its length differs: this server records no managedFields yet), then
    // contentEncoding and contentType.
    let typemeta = 4 + 2 + want[5] as usize + 1;
    assert_eq!(got[..typemeta], want[..typemeta]);
    assert_eq!(got[got.len() - 4..], want[want.len() - 4..]);
    let (got_cm, want_cm) = (
        ConfigMap::decode(&got_raw[..]).unwrap(),
        ConfigMap::decode(&want_raw[..]).unwrap(),
    );
    assert_eq!(normalized(got_cm), normalized(want_cm));
}

#[tokio::test]
async fn not_found_status_matches_the_capture() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let (request, headers, want) = capture("protobuf-get-notfound");
    let path = request.strip_prefix("GET ").unwrap();
    let (code, got_headers, got) = get(&client, path, "application/vnd.kubernetes.protobuf").await;
    assert_eq!(code, 404);
    assert_headers(
        &got_headers,
        &headers,
        "application/vnd.kubernetes.protobuf",
    );
    let ((want_head, want_raw), (got_head, got_raw)) = (frame_bytes(&want), frame_bytes(&got));
    assert_eq!(got_head, want_head);
    let (got, want) = (
        Status::decode(&got_raw[..]).unwrap(),
        Status::decode(&want_raw[..]).unwrap(),
    );
    assert_eq!(
        proto2_defaults(format!("{got:?}")),
        proto2_defaults(format!("{want:?}"))
    );
}

#[tokio::test]
async fn watch_frames_match_the_capture() {
    let (_env, client) = with_golden_configmap().await;
    let (request, headers, want) = capture("protobuf-watch-configmap");
    let path = request.strip_prefix("GET ").unwrap();
    let req = http::Request::builder()
        .uri(path)
        .header("accept", "application/vnd.kubernetes.protobuf;stream=watch")
        .body(kube::client::Body::empty())
        .unwrap();
    let resp = client.send(req).await.unwrap();
    let got_headers: Vec<_> = resp
        .headers()
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_string()))
        .collect();
    assert_headers(
        &got_headers,
        &headers,
        "application/vnd.kubernetes.protobuf;stream=watch",
    );
    // The capture's stream ended with its timeoutSeconds=2; this one is read to its first frame.
    let mut body = resp.into_body();
    let mut got = Vec::new();
    while got.len() < 4 || got.len() < 4 + u32::from_be_bytes(got[..4].try_into().unwrap()) as usize
    {
        got.extend_from_slice(body.frame().await.unwrap().unwrap().data_ref().unwrap());
    }
    let frame = |b: &[u8]| {
        let len = u32::from_be_bytes(b[..4].try_into().unwrap()) as usize;
        assert_eq!(b.len(), 4 + len, "one frame");
        WatchEvent::decode(&b[4..]).unwrap()
    };
    let (got, want) = (frame(&got), frame(&want));
    assert_eq!(got.r#type, want.r#type);
    let (got_obj, want_obj) = (
        got.object.unwrap().raw.unwrap(),
        want.object.unwrap().raw.unwrap(),
    );
    let ((want_head, want_raw), (got_head, got_raw)) =
        (frame_bytes(&want_obj), frame_bytes(&got_obj));
    assert_eq!(got_head, want_head);
    let (got_cm, want_cm) = (
        ConfigMap::decode(&got_raw[..]).unwrap(),
        ConfigMap::decode(&want_raw[..]).unwrap(),
    );
    assert_eq!(normalized(got_cm), normalized(want_cm));
}
