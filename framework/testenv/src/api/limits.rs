//! The size limits kube-apiserver puts on what a client sends and what it stores: the request
//! body (`MaxRequestBodyBytes`, 3 MiB, read bounded so nothing larger is ever buffered), the
//! bytes a JSON patch's `copy` operations may add (`JSONPatchMaxCopyBytes`, 3 MiB), the number of
//! JSON patch operations (10,000) and the size of a stored object (etcd's default request limit,
//! 1.5 MiB), each answered as upstream answers it.

use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use serde_json::Value;

use crate::api::status::ApiError;

/// Upstream's `MaxRequestBodyBytes` default: the largest request body read.
pub const MAX_REQUEST_BODY_BYTES: usize = 3 * 1024 * 1024;
/// Upstream's `JSONPatchMaxCopyBytes` default: what the `copy` operations of one JSON patch may
/// add in total.
pub const JSON_PATCH_MAX_COPY_BYTES: usize = 3 * 1024 * 1024;
/// Upstream's `maxJSONPatchOperations`.
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;
/// etcd's default `--max-request-bytes` (1.5 MiB): the largest object kube-apiserver can store.
pub const MAX_OBJECT_BYTES: usize = 1_572_864;

/// Reads a request body, refusing (413, as upstream's `limitedReadBody`) one larger than
/// [`MAX_REQUEST_BODY_BYTES`] as soon as its frames pass the limit, so at most the limit (plus
/// one frame) is ever held.
pub async fn read_body<B>(mut body: B) -> Result<Bytes, ApiError>
where
    B: http_body::Body<Data = Bytes> + Unpin,
{
    let mut buf = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else {
            // A connection that breaks mid-body: what arrived is all there is, as before.
            break;
        };
        if let Ok(data) = frame.into_data() {
            if buf.len() + data.len() > MAX_REQUEST_BODY_BYTES {
                return Err(too_large_body());
            }
            buf.extend_from_slice(&data);
        }
    }
    Ok(buf.freeze())
}

fn too_large_body() -> ApiError {
    ApiError::too_large(format!("limit is {MAX_REQUEST_BODY_BYTES}"))
}

/// The length of a value's compact JSON, counted without building it.
pub fn json_len(v: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    // Writing a Value to a sink that never fails cannot fail.
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}

/// An object about to be stored must fit etcd: upstream's answer is etcd's own error as a 500
/// without a reason (`etcdserver: request is too large`).
pub fn check_storable(obj: &Value) -> Result<(), ApiError> {
    if json_len(obj) > MAX_OBJECT_BYTES {
        return Err(ApiError::storage_too_large());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::Full;
    use serde_json::json;

    #[test]
    fn json_len_is_the_compact_length() {
        let v = json!({"a": [1, "x", null], "b": {"c": true}});
        assert_eq!(json_len(&v), serde_json::to_vec(&v).unwrap().len());
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_413() {
        let ok = read_body(Full::new(Bytes::from(vec![b' '; 10]))).await;
        assert_eq!(ok.unwrap().len(), 10);
        let big = Full::new(Bytes::from(vec![b' '; MAX_REQUEST_BODY_BYTES + 1]));
        let err = read_body(big).await.unwrap_err();
        assert_eq!(
            (err.code, err.reason.as_ref(), err.message.as_str()),
            (
                413,
                "RequestEntityTooLarge",
                "Request entity too large: limit is 3145728"
            )
        );
    }
}
