//! JSON ⇄ k8s-pb message conversion: one trait, implemented for the protobuf scalars, lists and
//! maps, by hand for the messages whose JSON form is not an object (Time, Quantity, IntOrString,
//! RawExtension, …), and by the `message!` macro for every other message (messages.rs, generated).

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use k8s_pb::apiextensions_apiserver::pkg::apis::apiextensions::v1 as ext;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::RawExtension;
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Map, Value};

/// A value that has a Kubernetes JSON form.
pub(crate) trait Json: Sized {
    /// Reads the JSON form; the error names what was expected.
    fn from_json(v: &Value) -> Result<Self, String>;
    /// The JSON form, `None` where Kubernetes omits the field (unset, empty list or map).
    fn to_json(&self) -> Option<Value>;
}

/// Implements [`Json`] for a k8s-pb message from its fields' JSON names; `inline` marks a Go
/// embedded struct, whose fields sit in the enclosing JSON object.
macro_rules! message {
    ($ty:path { $($field:ident : $json:tt),* $(,)? }) => {
        impl $crate::api::protobuf::convert::Json for $ty {
            #[allow(unused_variables)]
            fn from_json(v: &serde_json::Value) -> Result<Self, String> {
                let o = v.as_object().ok_or_else(|| format!("expected an object, got {v}"))?;
                #[allow(unused_mut)]
                let mut m = <Self as Default>::default();
                $( $crate::api::protobuf::convert::message!(@from m, v, o, $field, $json); )*
                Ok(m)
            }
            fn to_json(&self) -> Option<serde_json::Value> {
                #[allow(unused_mut)]
                let mut o = serde_json::Map::new();
                $( $crate::api::protobuf::convert::message!(@to self, o, $field, $json); )*
                Some(serde_json::Value::Object(o))
            }
        }
    };
    (@from $m:ident, $v:ident, $o:ident, $field:ident, inline) => {
        $m.$field = $crate::api::protobuf::convert::Json::from_json($v)?;
    };
    (@from $m:ident, $v:ident, $o:ident, $field:ident, $json:literal) => {
        if let Some(f) = $o.get($json).filter(|f| !f.is_null()) {
            $m.$field = $crate::api::protobuf::convert::Json::from_json(f)
                .map_err(|e| format!("{}: {e}", $json))?;
        }
    };
    (@to $s:ident, $o:ident, $field:ident, inline) => {
        if let Some(serde_json::Value::Object(inner)) =
            $crate::api::protobuf::convert::Json::to_json(&$s.$field)
        {
            $o.extend(inner);
        }
    };
    (@to $s:ident, $o:ident, $field:ident, $json:literal) => {
        if let Some(v) = $crate::api::protobuf::convert::Json::to_json(&$s.$field)
            && !$crate::api::protobuf::convert::omitted_zero($json, &v)
        {
            $o.insert($json.to_string(), v);
        }
    };
}
pub(crate) use message;

/// Fields whose zero value means something else than unset (Go pointers a client sets to zero
/// on purpose), so a zero on the wire is kept.
const MEANINGFUL_ZERO: &[&str] = &[
    "activeDeadlineSeconds",
    "allocateLoadBalancerNodePorts",
    "allowPrivilegeEscalation",
    "automountServiceAccountToken",
    "deletionGracePeriodSeconds",
    "enableServiceLinks",
    "expirationSeconds",
    "fsGroup",
    "gracePeriodSeconds",
    "hostUsers",
    "maxItems",
    "maxLength",
    "maxProperties",
    "maximum",
    "minItems",
    "minLength",
    "minProperties",
    "minimum",
    "multipleOf",
    "optional",
    "priority",
    "privileged",
    "readOnlyRootFilesystem",
    "ready",
    "replicas",
    "runAsGroup",
    "runAsNonRoot",
    "runAsUser",
    "served",
    "serving",
    "setHostnameAsFQDN",
    "shareProcessNamespace",
    "storage",
    "terminating",
    "terminationGracePeriodSeconds",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields",
];

/// Whether a decoded field is a Go zero value that kube-apiserver's JSON would omit. Go's
/// protobuf writes every non-pointer field, so `generateName: ""`, `nodePort: 0` or
/// `publishNotReadyAddresses: false` arrive on the wire where JSON (`omitempty`) has nothing;
/// dropping them gives the JSON a JSON client would have sent, and defaulting (a Secret's
/// `type`) then works as upstream's. Empty strings always go; zero and false stay for the
/// pointer fields where they mean something.
pub(crate) fn omitted_zero(json_name: &str, v: &Value) -> bool {
    match v {
        Value::String(s) => s.is_empty(),
        Value::Bool(false) => !MEANINGFUL_ZERO.contains(&json_name),
        Value::Number(n) => n.as_f64() == Some(0.0) && !MEANINGFUL_ZERO.contains(&json_name),
        _ => false,
    }
}

impl Json for String {
    fn from_json(v: &Value) -> Result<Self, String> {
        v.as_str()
            .map(String::from)
            .ok_or_else(|| format!("expected a string, got {v}"))
    }
    fn to_json(&self) -> Option<Value> {
        Some(Value::String(self.clone()))
    }
}

impl Json for bool {
    fn from_json(v: &Value) -> Result<Self, String> {
        v.as_bool()
            .ok_or_else(|| format!("expected a boolean, got {v}"))
    }
    fn to_json(&self) -> Option<Value> {
        Some(Value::Bool(*self))
    }
}

impl Json for i64 {
    fn from_json(v: &Value) -> Result<Self, String> {
        v.as_i64()
            .ok_or_else(|| format!("expected an integer, got {v}"))
    }
    fn to_json(&self) -> Option<Value> {
        Some(Value::from(*self))
    }
}

impl Json for i32 {
    fn from_json(v: &Value) -> Result<Self, String> {
        i64::from_json(v).and_then(|i| i32::try_from(i).map_err(|e| format!("{i}: {e}")))
    }
    fn to_json(&self) -> Option<Value> {
        Some(Value::from(*self))
    }
}

impl Json for f64 {
    fn from_json(v: &Value) -> Result<Self, String> {
        v.as_f64()
            .ok_or_else(|| format!("expected a number, got {v}"))
    }
    fn to_json(&self) -> Option<Value> {
        // An integral value keeps its integer JSON form (`maximum: 5`, not `5.0`).
        match self.fract() == 0.0 && self.abs() < 9e15 {
            true => Some(Value::from(*self as i64)),
            false => serde_json::Number::from_f64(*self).map(Value::Number),
        }
    }
}

/// `bytes`: base64 in JSON, as Go's `[]byte`.
impl Json for Vec<u8> {
    fn from_json(v: &Value) -> Result<Self, String> {
        let s = v
            .as_str()
            .ok_or_else(|| format!("expected base64 data, got {v}"))?;
        B64.decode(s)
            .map_err(|e| format!("illegal base64 data: {e}"))
    }
    fn to_json(&self) -> Option<Value> {
        Some(Value::String(B64.encode(self)))
    }
}

impl<T: Json> Json for Option<T> {
    fn from_json(v: &Value) -> Result<Self, String> {
        T::from_json(v).map(Some)
    }
    fn to_json(&self) -> Option<Value> {
        self.as_ref().and_then(T::to_json)
    }
}

impl<T: Json> Json for Box<T> {
    fn from_json(v: &Value) -> Result<Self, String> {
        T::from_json(v).map(Box::new)
    }
    fn to_json(&self) -> Option<Value> {
        (**self).to_json()
    }
}

impl<T: Json> Json for Vec<T> {
    fn from_json(v: &Value) -> Result<Self, String> {
        let a = v
            .as_array()
            .ok_or_else(|| format!("expected a list, got {v}"))?;
        a.iter()
            .enumerate()
            .map(|(i, e)| T::from_json(e).map_err(|err| format!("[{i}]: {err}")))
            .collect()
    }
    fn to_json(&self) -> Option<Value> {
        (!self.is_empty()).then(|| Value::Array(self.iter().filter_map(T::to_json).collect()))
    }
}

impl<T: Json> Json for BTreeMap<String, T> {
    fn from_json(v: &Value) -> Result<Self, String> {
        let o = v
            .as_object()
            .ok_or_else(|| format!("expected a map, got {v}"))?;
        o.iter()
            .map(|(k, e)| {
                Ok((
                    k.clone(),
                    T::from_json(e).map_err(|err| format!("{k}: {err}"))?,
                ))
            })
            .collect()
    }
    fn to_json(&self) -> Option<Value> {
        let o: Map<String, Value> = self
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), v.to_json()?)))
            .collect();
        (!o.is_empty()).then_some(Value::Object(o))
    }
}

fn timestamp(v: &Value) -> Result<jiff::Timestamp, String> {
    let s = v
        .as_str()
        .ok_or_else(|| format!("expected an RFC 3339 time, got {v}"))?;
    s.parse().map_err(|e| format!("{s}: {e}"))
}

/// Go's zero `time.Time` (0001-01-01T00:00:00Z) in Unix seconds.
const GO_ZERO_SECONDS: i64 = -62_135_596_800;

/// The time a protobuf Timestamp holds, `None` for Go's zero time: an empty message (what
/// client-go's marshaller writes for a zero non-pointer `Time`/`MicroTime`) or a Timestamp at
/// year 1. kube-apiserver decodes both as the zero time, which is unset (`null` in JSON).
fn go_time(seconds: Option<i64>, nanos: Option<i32>) -> Option<jiff::Timestamp> {
    if seconds.is_none() && nanos.is_none() {
        return None;
    }
    let t = jiff::Timestamp::new(seconds.unwrap_or(0), nanos.unwrap_or(0)).ok()?;
    (t != jiff::Timestamp::new(GO_ZERO_SECONDS, 0).ok()?).then_some(t)
}

/// `metav1.Time`: RFC 3339 to the second in JSON, seconds and nanos in protobuf.
impl Json for meta::Time {
    fn from_json(v: &Value) -> Result<Self, String> {
        let t = timestamp(v)?;
        // Go's protobuf Time always carries nanos (0: JSON Time has whole seconds).
        Ok(Self {
            seconds: Some(t.as_second()),
            nanos: Some(0),
        })
    }
    fn to_json(&self) -> Option<Value> {
        // Upstream drops the nanos of a protobuf Time.
        let t = go_time(self.seconds, self.nanos.map(|_| 0))?;
        Some(Value::String(t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()))
    }
}

/// `metav1.MicroTime`: RFC 3339 with six fractional digits.
impl Json for meta::MicroTime {
    fn from_json(v: &Value) -> Result<Self, String> {
        let t = timestamp(v)?;
        Ok(Self {
            seconds: Some(t.as_second()),
            nanos: Some(t.subsec_microsecond() * 1000),
        })
    }
    fn to_json(&self) -> Option<Value> {
        // Upstream truncates the nanos to microseconds before asking whether the time is zero.
        let t = go_time(self.seconds, self.nanos.map(|n| n - n % 1000))?;
        // The civil time's fraction: a Timestamp before 1970 counts its own backwards.
        let civil = jiff::tz::Offset::UTC.to_datetime(t);
        let s = civil.strftime("%Y-%m-%dT%H:%M:%S").to_string();
        Some(Value::String(format!(
            "{s}.{:06}Z",
            civil.subsec_nanosecond() / 1000
        )))
    }
}

/// `metav1.Duration`: Go's duration string (`1h2m3s`) in JSON, nanoseconds in protobuf.
impl Json for meta::Duration {
    fn from_json(v: &Value) -> Result<Self, String> {
        let s = v
            .as_str()
            .ok_or_else(|| format!("expected a duration, got {v}"))?;
        let span: jiff::SignedDuration = s.parse().map_err(|e| format!("{s}: {e}"))?;
        let nanos = i64::try_from(span.as_nanos()).map_err(|e| format!("{s}: {e}"))?;
        Ok(Self {
            duration: Some(nanos),
        })
    }
    fn to_json(&self) -> Option<Value> {
        let d = jiff::SignedDuration::from_nanos(self.duration?);
        Some(Value::String(format!("{d:#}")))
    }
}

/// JSON that protobuf carries as raw JSON bytes: `FieldsV1`, `RawExtension`, apiextensions' `JSON`.
macro_rules! raw_json {
    ($($ty:ty),*) => {$(
        impl Json for $ty {
            fn from_json(v: &Value) -> Result<Self, String> {
                Ok(Self { raw: Some(serde_json::to_vec(v).map_err(|e| e.to_string())?) })
            }
            fn to_json(&self) -> Option<Value> {
                serde_json::from_slice(self.raw.as_deref()?).ok()
            }
        }
    )*};
}
raw_json!(meta::FieldsV1, RawExtension, ext::Json);

impl Json for Quantity {
    fn from_json(v: &Value) -> Result<Self, String> {
        let s = match v {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            _ => return Err(format!("expected a quantity, got {v}")),
        };
        Ok(Self { string: Some(s) })
    }
    fn to_json(&self) -> Option<Value> {
        self.string.clone().map(Value::String)
    }
}

/// `intstr.IntOrString`: a JSON number or string; protobuf has type 0 (int) or 1 (string).
impl Json for IntOrString {
    fn from_json(v: &Value) -> Result<Self, String> {
        match v {
            Value::String(s) => Ok(Self {
                r#type: Some(1),
                int_val: Some(0),
                str_val: Some(s.clone()),
            }),
            _ => Ok(Self {
                r#type: Some(0),
                int_val: Some(i32::from_json(v)?),
                str_val: Some(String::new()),
            }),
        }
    }
    fn to_json(&self) -> Option<Value> {
        match self.r#type {
            Some(1) => self.str_val.clone().map(Value::String),
            _ => Some(Value::from(self.int_val.unwrap_or(0))),
        }
    }
}

/// A schema or a list of schemas (`items`).
impl Json for ext::JsonSchemaPropsOrArray {
    fn from_json(v: &Value) -> Result<Self, String> {
        match v {
            Value::Array(_) => Ok(Self {
                schema: None,
                j_son_schemas: Json::from_json(v)?,
            }),
            _ => Ok(Self {
                schema: Some(Json::from_json(v)?),
                j_son_schemas: Vec::new(),
            }),
        }
    }
    fn to_json(&self) -> Option<Value> {
        match &self.schema {
            Some(s) => s.to_json(),
            None => Some(
                self.j_son_schemas
                    .to_json()
                    .unwrap_or(Value::Array(Vec::new())),
            ),
        }
    }
}

/// A schema or a boolean (`additionalProperties`).
impl Json for ext::JsonSchemaPropsOrBool {
    fn from_json(v: &Value) -> Result<Self, String> {
        match v {
            Value::Bool(b) => Ok(Self {
                allows: Some(*b),
                schema: None,
            }),
            _ => Ok(Self {
                allows: Some(true),
                schema: Some(Json::from_json(v)?),
            }),
        }
    }
    fn to_json(&self) -> Option<Value> {
        match &self.schema {
            Some(s) => s.to_json(),
            None => Some(Value::Bool(self.allows.unwrap_or(false))),
        }
    }
}

/// A schema or a list of property names (`dependencies`).
impl Json for ext::JsonSchemaPropsOrStringArray {
    fn from_json(v: &Value) -> Result<Self, String> {
        match v {
            Value::Array(_) => Ok(Self {
                schema: None,
                property: Json::from_json(v)?,
            }),
            _ => Ok(Self {
                schema: Some(Json::from_json(v)?),
                property: Vec::new(),
            }),
        }
    }
    fn to_json(&self) -> Option<Value> {
        match &self.schema {
            Some(s) => s.to_json(),
            None => Some(self.property.to_json().unwrap_or(Value::Array(Vec::new()))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_zero_times_decode_as_unset() {
        let zero = [
            (None, None),
            (Some(GO_ZERO_SECONDS), None),
            (Some(GO_ZERO_SECONDS), Some(0)),
        ];
        for (seconds, nanos) in zero {
            assert_eq!(
                meta::Time { seconds, nanos }.to_json(),
                None,
                "{seconds:?} {nanos:?}"
            );
            assert_eq!(
                meta::MicroTime { seconds, nanos }.to_json(),
                None,
                "{seconds:?} {nanos:?}"
            );
        }
        // Upstream keeps no nanos of a Time and only microseconds of a MicroTime.
        let (seconds, nanos) = (Some(GO_ZERO_SECONDS), Some(999));
        assert_eq!(meta::Time { seconds, nanos }.to_json(), None);
        assert_eq!(meta::MicroTime { seconds, nanos }.to_json(), None);
        let micro = meta::MicroTime {
            seconds,
            nanos: Some(1000),
        }
        .to_json();
        assert_eq!(micro, Some(Value::from("0001-01-01T00:00:00.000001Z")));
        // The Unix epoch is a time like any other.
        let epoch = meta::Time {
            seconds: Some(0),
            nanos: None,
        }
        .to_json();
        assert_eq!(epoch, Some(Value::from("1970-01-01T00:00:00Z")));
        let epoch = meta::MicroTime {
            seconds: None,
            nanos: Some(0),
        }
        .to_json();
        assert_eq!(epoch, Some(Value::from("1970-01-01T00:00:00.000000Z")));
    }
}
