//! The OpenTelemetry resource: who sent a span (service, instance, pod), from the environment.

use std::collections::BTreeMap;

use super::TelemetryError;

/// `OTEL_SERVICE_NAME`: overrides the service name given to `init`.
pub const OTEL_SERVICE_NAME: &str = "OTEL_SERVICE_NAME";
/// `OTEL_RESOURCE_ATTRIBUTES`: `key=value,...` added to the resource (values percent-encoded).
pub const OTEL_RESOURCE_ATTRIBUTES: &str = "OTEL_RESOURCE_ATTRIBUTES";
/// Pod name from the downward API; becomes `k8s.pod.name`.
pub const POD_NAME: &str = "POD_NAME";
/// Pod namespace from the downward API; becomes `k8s.namespace.name`.
pub const POD_NAMESPACE: &str = "POD_NAMESPACE";

/// Resource attributes, sorted by key. Precedence for `service.name`: `OTEL_SERVICE_NAME`, then
/// `service.name` in `OTEL_RESOURCE_ATTRIBUTES`, then `default_service_name`. Any other key set in
/// `OTEL_RESOURCE_ATTRIBUTES` wins over the detected value (`service.instance.id` defaults to
/// `instance_id`, the pod attributes come from `POD_NAME` / `POD_NAMESPACE`).
pub fn resource_attributes(
    default_service_name: &str,
    instance_id: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<BTreeMap<String, String>, TelemetryError> {
    let env = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    let mut attrs = BTreeMap::new();
    attrs.insert("service.name".to_string(), default_service_name.to_string());
    attrs.insert("service.instance.id".to_string(), instance_id.to_string());
    if let Some(pod) = env(POD_NAME) {
        attrs.insert("k8s.pod.name".to_string(), pod);
    }
    if let Some(ns) = env(POD_NAMESPACE) {
        attrs.insert("k8s.namespace.name".to_string(), ns);
    }
    if let Some(raw) = env(OTEL_RESOURCE_ATTRIBUTES) {
        attrs.extend(parse_resource_attributes(&raw)?);
    }
    if let Some(name) = env(OTEL_SERVICE_NAME) {
        attrs.insert("service.name".to_string(), name.trim().to_string());
    }
    Ok(attrs)
}

/// `hostname_<uuid>`, the identity upstream uses for leader election, so a trace and a Lease
/// holder can be matched to one process.
pub fn default_instance_id() -> String {
    crate::leader::default_identity()
}

/// The W3C Baggage-like `key=value,key2=value2` format of `OTEL_RESOURCE_ATTRIBUTES`.
fn parse_resource_attributes(raw: &str) -> Result<Vec<(String, String)>, TelemetryError> {
    raw.split(',')
        .filter(|entry| !entry.trim().is_empty())
        .map(|entry| {
            let invalid = |message: String| TelemetryError::InvalidSetting {
                setting: OTEL_RESOURCE_ATTRIBUTES,
                message,
            };
            let (key, value) = entry
                .split_once('=')
                .ok_or_else(|| invalid(format!("entry {entry:?} is not key=value")))?;
            let key = key.trim();
            if key.is_empty() {
                return Err(invalid(format!("entry {entry:?} has an empty key")));
            }
            let value = percent_decode(value.trim())
                .ok_or_else(|| invalid(format!("value of {key:?} has a bad percent escape")))?;
            Ok((key.to_string(), value))
        })
        .collect()
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn attrs(env: &[(&str, &str)]) -> Result<BTreeMap<String, String>, TelemetryError> {
        let env: HashMap<&str, &str> = env.iter().copied().collect();
        resource_attributes("cloud-controller-manager", "host_1", &|k| {
            env.get(k).map(|v| v.to_string())
        })
    }

    #[test]
    fn defaults_are_service_name_and_instance_id() {
        let a = attrs(&[]).unwrap();
        assert_eq!(a["service.name"], "cloud-controller-manager");
        assert_eq!(a["service.instance.id"], "host_1");
        assert_eq!(a.len(), 2);
    }

    #[test]
    fn pod_and_namespace_come_from_downward_api_variables() {
        let a = attrs(&[(POD_NAME, "ccm-0"), (POD_NAMESPACE, "kube-system")]).unwrap();
        assert_eq!(a["k8s.pod.name"], "ccm-0");
        assert_eq!(a["k8s.namespace.name"], "kube-system");
    }

    #[test]
    fn service_name_precedence_is_env_then_attributes_then_default() {
        let a = attrs(&[(OTEL_RESOURCE_ATTRIBUTES, "service.name=from-attrs")]).unwrap();
        assert_eq!(a["service.name"], "from-attrs");
        let a = attrs(&[
            (OTEL_RESOURCE_ATTRIBUTES, "service.name=from-attrs"),
            (OTEL_SERVICE_NAME, "from-env"),
        ])
        .unwrap();
        assert_eq!(a["service.name"], "from-env");
    }

    #[test]
    fn resource_attributes_are_split_trimmed_decoded_and_override_detection() {
        let a = attrs(&[
            (POD_NAME, "detected"),
            (
                OTEL_RESOURCE_ATTRIBUTES,
                " deployment.environment = prod ,k8s.pod.name=explicit,note=a%2Cb%3Dc,",
            ),
        ])
        .unwrap();
        assert_eq!(a["deployment.environment"], "prod");
        assert_eq!(a["k8s.pod.name"], "explicit");
        assert_eq!(a["note"], "a,b=c");
    }

    #[test]
    fn malformed_resource_attributes_are_errors() {
        assert!(attrs(&[(OTEL_RESOURCE_ATTRIBUTES, "novalue")]).is_err());
        assert!(attrs(&[(OTEL_RESOURCE_ATTRIBUTES, "=x")]).is_err());
        assert!(attrs(&[(OTEL_RESOURCE_ATTRIBUTES, "k=%zz")]).is_err());
    }

    #[test]
    fn instance_id_is_hostname_underscore_uuid() {
        let id = default_instance_id();
        let (host, uuid) = id.rsplit_once('_').unwrap();
        assert!(!host.is_empty());
        assert!(uuid::Uuid::parse_str(uuid).is_ok(), "{id}");
    }
}
