//! What an `Accept` header asks an answer to be, chosen as kube-apiserver's negotiation chooses:
//! its media type (JSON or protobuf) and the conversion it may ask for on the way
//! (`as=Table`, `as=PartialObjectMetadata`, `as=PartialObjectMetadataList`, each with
//! `g=meta.k8s.io` and `v=v1` or `v1beta1`).
//!
//! The clauses are sorted as goautoneg sorts them (an insertion sort where a clause goes first
//! when its q is higher or it is less of a wildcard, so equal clauses keep the client's order and
//! a `q=0` clause still counts), then the first clause the endpoint serves wins (upstream's
//! `AllowsMediaTypeTransform`):
//! - no conversion: JSON (`*/*` and `application/*` are JSON, the first served type), protobuf
//!   for built-in types only (custom resources have no protobuf form);
//! - a Table: JSON only;
//! - PartialObjectMetadata(List): JSON or protobuf, custom resources included.
//!
//! A clause asking for anything else (another kind, group or version, a server version `sv`, a
//! stream other than `watch`) is skipped; nothing acceptable is a 406.

use crate::api::status::ApiError;
use crate::http::protobuf::Format;

/// The conversion an answer goes through (`as=`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Conversion {
    /// The objects themselves.
    #[default]
    None,
    /// A `meta.k8s.io` Table (server-side printing).
    Table,
    /// Metadata only: `PartialObjectMetadata` of one object (`list: false`) or
    /// `PartialObjectMetadataList` of a list (`list: true`), in `meta.k8s.io/<version>`.
    Metadata {
        /// `as=PartialObjectMetadataList`.
        list: bool,
        /// `v1` or `v1beta1`.
        version: &'static str,
    },
}

/// The negotiated answer: its format and conversion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Answer {
    /// JSON or protobuf.
    pub format: Format,
    /// What the objects are turned into first.
    pub conversion: Conversion,
}

impl Answer {
    /// JSON of the objects themselves, what a request without `Accept` gets.
    pub const JSON: Answer = Answer {
        format: Format::Json,
        conversion: Conversion::None,
    };
}

struct Clause<'a> {
    ty: &'a str,
    sub: &'a str,
    q: f32,
    /// `as`, `g`, `v`.
    target: (Option<&'a str>, Option<&'a str>, Option<&'a str>),
    /// A parameter no endpoint serves (`sv`, a stream other than `watch`).
    refused: bool,
}

impl Clause<'_> {
    /// The conversion this clause asks for, if the server has it (`Err(())`: it has not).
    fn conversion(&self) -> Result<Conversion, ()> {
        let (kind, group, version) = self.target;
        if (kind, group, version) == (None, None, None) {
            return Ok(Conversion::None);
        }
        let version = match (group, version) {
            (Some("meta.k8s.io"), Some("v1")) => "v1",
            (Some("meta.k8s.io"), Some("v1beta1")) => "v1beta1",
            _ => return Err(()),
        };
        match kind {
            Some("Table") => Ok(Conversion::Table),
            Some("PartialObjectMetadata") => Ok(Conversion::Metadata {
                list: false,
                version,
            }),
            Some("PartialObjectMetadataList") => Ok(Conversion::Metadata {
                list: true,
                version,
            }),
            _ => Err(()),
        }
    }
}

fn clauses(accept: &str) -> Vec<Clause<'_>> {
    let mut clauses: Vec<Clause<'_>> = Vec::new();
    for clause in accept.split(',') {
        let mut parts = clause.trim().split(';');
        let (ty, sub) = match parts.next().unwrap_or("").split_once('/') {
            Some((t, s)) => (t.trim(), s.trim()),
            None if clause.trim() == "*" => ("*", "*"),
            None => continue,
        };
        let mut c = Clause {
            ty,
            sub,
            q: 1.0,
            target: (None, None, None),
            refused: false,
        };
        for p in parts {
            match p.split_once('=').map(|(k, v)| (k.trim(), v.trim())) {
                Some(("q", v)) => c.q = v.parse().unwrap_or(0.0),
                Some(("as", v)) => c.target.0 = Some(v),
                Some(("g", v)) => c.target.1 = Some(v),
                Some(("v", v)) => c.target.2 = Some(v),
                Some(("sv", _)) => c.refused = true,
                Some(("stream", v)) if v != "watch" && !v.is_empty() => c.refused = true,
                _ => {}
            }
        }
        clauses.push(c);
    }
    let first = |a: &Clause<'_>, b: &Clause<'_>| {
        a.q > b.q || (a.ty != "*" && b.ty == "*") || (a.sub != "*" && b.sub == "*")
    };
    for i in 1..clauses.len() {
        let mut j = i;
        while j > 0 && first(&clauses[j], &clauses[j - 1]) {
            clauses.swap(j, j - 1);
            j -= 1;
        }
    }
    clauses
}

/// The answer `accept` asks for from a resource; `protobuf` says whether the resource has a
/// protobuf form of its own (custom resources have none).
pub fn negotiate(accept: &str, protobuf: bool) -> Result<Answer, ApiError> {
    if accept.is_empty() {
        return Ok(Answer::JSON);
    }
    for c in clauses(accept) {
        let Ok(conversion) = c.conversion() else {
            continue;
        };
        let format = match (c.ty, c.sub) {
            _ if c.refused => continue,
            ("application", "json" | "*") | ("*", "*") => Format::Json,
            ("application", "vnd.kubernetes.protobuf") => Format::Protobuf,
            _ => continue,
        };
        let served = match (format, conversion) {
            (Format::Json, _) => true,
            (Format::Protobuf, Conversion::None) => protobuf,
            (Format::Protobuf, Conversion::Table) => false,
            (Format::Protobuf, Conversion::Metadata { .. }) => true,
        };
        if served {
            return Ok(Answer { format, conversion });
        }
    }
    Err(not_acceptable(protobuf))
}

fn not_acceptable(protobuf: bool) -> ApiError {
    let accepted = match protobuf {
        true => "application/json, application/vnd.kubernetes.protobuf",
        false => "application/json",
    };
    ApiError::not_acceptable(accepted)
}

#[cfg(test)]
mod tests {
    use super::*;

    const METADATA_LIST: Conversion = Conversion::Metadata {
        list: true,
        version: "v1",
    };

    #[test]
    fn metadata_is_served_in_json_and_protobuf_custom_resources_included() {
        let json = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
        let answer = negotiate(json, false).expect("served");
        assert_eq!(answer.conversion, METADATA_LIST);
        assert_eq!(answer.format, Format::Json);
        let pb = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
        for builtin in [true, false] {
            let answer = negotiate(pb, builtin).expect("served");
            assert_eq!(
                (answer.format, answer.conversion),
                (Format::Protobuf, METADATA_LIST)
            );
        }
        let beta = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1";
        assert_eq!(
            negotiate(beta, true).expect("served").conversion,
            Conversion::Metadata {
                list: false,
                version: "v1beta1"
            }
        );
    }

    #[test]
    fn a_conversion_the_server_lacks_falls_through_to_the_next_clause() {
        // Another group, version or kind is not served: the plain clause after it is.
        for accept in [
            "application/json;as=PartialObjectMetadata;g=example.com;v=v1,application/json",
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v2,application/json",
            "application/json;as=Something;g=meta.k8s.io;v=v1,application/json",
            "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1,application/json",
        ] {
            assert_eq!(
                negotiate(accept, true).expect(accept),
                Answer::JSON,
                "{accept}"
            );
        }
        let only = "application/json;as=PartialObjectMetadata;g=example.com;v=v1";
        assert_eq!(negotiate(only, true).expect_err("none").code, 406);
        let table = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
        assert_eq!(
            negotiate(table, false).expect("table").conversion,
            Conversion::Table
        );
    }

    #[test]
    fn plain_protobuf_is_for_built_in_types_only() {
        let pb = "application/vnd.kubernetes.protobuf";
        assert_eq!(
            negotiate(pb, true).expect("built-in").format,
            Format::Protobuf
        );
        assert_eq!(negotiate(pb, false).expect_err("custom").code, 406);
        let fallback = "application/vnd.kubernetes.protobuf, application/json";
        assert_eq!(negotiate(fallback, false).expect("json"), Answer::JSON);
    }
}
