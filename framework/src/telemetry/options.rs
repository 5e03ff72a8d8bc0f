//! The tracing flags and their fallback to the standard `OTEL_*` environment variables.
//!
//! Resolution is a pure function of the flags and an environment lookup, so precedence is tested
//! without touching the process environment. Precedence for every setting: flag, then the
//! traces-specific variable, then the generic variable, then the default.
//!
//! Differences from the OpenTelemetry SDK environment specification, on purpose:
//! - an invalid value (unknown protocol or sampler, ratio outside `[0, 1]`) is an error that names
//!   the variable, instead of a warning and a silent default: sampling that differs from what the
//!   operator asked for is found only much later, in an empty Jaeger;
//! - `http/json` is rejected (the exporter speaks protobuf only).

use crate::options::EndHelpHeading;
use clap::{Args, ValueEnum};

use super::TelemetryError;

/// `OTEL_EXPORTER_OTLP_ENDPOINT`: base URL for every signal; `/v1/traces` is appended for HTTP.
pub const OTEL_EXPORTER_OTLP_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`: full URL for traces, used as it is.
pub const OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
/// `OTEL_EXPORTER_OTLP_PROTOCOL`: `grpc` or `http/protobuf` for every signal.
pub const OTEL_EXPORTER_OTLP_PROTOCOL: &str = "OTEL_EXPORTER_OTLP_PROTOCOL";
/// `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`: protocol for traces only.
pub const OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: &str = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL";
/// `OTEL_TRACES_EXPORTER`: `none` turns export off even when an endpoint is set.
pub const OTEL_TRACES_EXPORTER: &str = "OTEL_TRACES_EXPORTER";
/// `OTEL_TRACES_SAMPLER`: the sampler name (`parentbased_always_on` by default).
pub const OTEL_TRACES_SAMPLER: &str = "OTEL_TRACES_SAMPLER";
/// `OTEL_TRACES_SAMPLER_ARG`: the ratio for the `traceidratio` samplers.
pub const OTEL_TRACES_SAMPLER_ARG: &str = "OTEL_TRACES_SAMPLER_ARG";

/// Where traces go and which are kept; every flag falls back to the standard `OTEL_*` variable,
/// so the manager runs unchanged under an OpenTelemetry operator that injects them.
#[derive(Args, Clone, Debug, Default, PartialEq)]
#[command(next_help_heading = "Tracing flags", end_help_heading = true)]
pub struct TelemetryOptions {
    /// OTLP collector base URL, e.g. http://jaeger:4317 (grpc) or http://jaeger:4318 (http/protobuf; /v1/traces is appended). Falls back to OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, then OTEL_EXPORTER_OTLP_ENDPOINT. Unset: no traces are exported.
    #[arg(long, value_name = "URL", verbatim_doc_comment)]
    pub otlp_endpoint: Option<String>,

    /// OTLP protocol. Falls back to OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, then OTEL_EXPORTER_OTLP_PROTOCOL. [default: http/protobuf]
    #[arg(long, value_enum, verbatim_doc_comment)]
    pub otlp_protocol: Option<OtlpProtocol>,

    /// Trace sampler. Falls back to OTEL_TRACES_SAMPLER. [default: parentbased_always_on]
    #[arg(long, value_enum, verbatim_doc_comment)]
    pub otlp_sampler: Option<SamplerKind>,

    /// Sampling ratio in [0, 1] for the traceidratio samplers. Falls back to OTEL_TRACES_SAMPLER_ARG. [default: 1.0]
    #[arg(long, value_name = "RATIO", verbatim_doc_comment)]
    pub otlp_sampler_ratio: Option<f64>,
}

/// OTLP transport; Jaeger takes both (gRPC on 4317, HTTP on 4318).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OtlpProtocol {
    /// OTLP over gRPC (tonic); the exporter must be built inside a Tokio runtime.
    #[value(name = "grpc")]
    Grpc,
    /// OTLP protobuf over HTTP POST to `/v1/traces`; the OpenTelemetry default.
    #[value(name = "http/protobuf")]
    HttpProtobuf,
}

/// The samplers of `OTEL_TRACES_SAMPLER` that make sense for a controller manager.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SamplerKind {
    /// Keep every trace.
    #[value(name = "always_on")]
    AlwaysOn,
    /// Keep none.
    #[value(name = "always_off")]
    AlwaysOff,
    /// Keep a fraction of traces, by trace id.
    #[value(name = "traceidratio")]
    TraceIdRatio,
    /// Follow the parent's decision; keep every root (the default).
    #[value(name = "parentbased_always_on")]
    ParentBasedAlwaysOn,
    /// Follow the parent's decision; keep no root.
    #[value(name = "parentbased_always_off")]
    ParentBasedAlwaysOff,
    /// Follow the parent's decision; keep a fraction of roots.
    #[value(name = "parentbased_traceidratio")]
    ParentBasedTraceIdRatio,
}

/// Where to send spans, once flags and environment are merged.
#[derive(Clone, Debug, PartialEq)]
pub struct ExportTarget {
    /// Final URL: for HTTP the full `/v1/traces` URL, for gRPC the collector address.
    pub endpoint: String,
    /// Transport.
    pub protocol: OtlpProtocol,
}

/// Every tracing setting after precedence was applied; input of the provider builder.
#[derive(Clone, Debug, PartialEq)]
pub struct ResolvedTracing {
    /// `None`: spans are still made (trace ids in logs, `traceparent` on API calls) but not exported.
    pub export: Option<ExportTarget>,
    /// Sampler name.
    pub sampler: SamplerKind,
    /// Ratio for the ratio samplers.
    pub ratio: f64,
}

impl TelemetryOptions {
    /// Merges the flags with the environment read through `env` (empty values count as unset).
    pub fn resolve(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ResolvedTracing, TelemetryError> {
        let env = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        let protocol = self.protocol(&env)?;
        let endpoint = if let Some(flag) = &self.otlp_endpoint {
            Some(signal_url(flag, protocol))
        } else if let Some(full) = env(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) {
            Some(full)
        } else {
            env(OTEL_EXPORTER_OTLP_ENDPOINT).map(|base| signal_url(&base, protocol))
        };
        let disabled = env(OTEL_TRACES_EXPORTER).is_some_and(|v| v.trim() == "none");
        Ok(ResolvedTracing {
            export: endpoint
                .filter(|_| !disabled)
                .map(|endpoint| ExportTarget { endpoint, protocol }),
            sampler: self.sampler(&env)?,
            ratio: self.ratio(&env)?,
        })
    }

    /// Every problem with the tracing flags and `OTEL_*` variables of the process, each naming
    /// the flag or variable; empty means [`crate::telemetry::init`] will accept them.
    pub fn validate(&self) -> Vec<String> {
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let mut errors: Vec<String> = [
            self.protocol(&env).err(),
            self.sampler(&env).err(),
            self.ratio(&env).err(),
        ]
        .into_iter()
        .flatten()
        .map(|e| e.to_string())
        .collect();
        if let Err(e) = super::resource::resource_attributes("", "", &env) {
            errors.push(e.to_string());
        }
        errors
    }

    fn protocol(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<OtlpProtocol, TelemetryError> {
        if let Some(p) = self.otlp_protocol {
            return Ok(p);
        }
        match env(OTEL_EXPORTER_OTLP_TRACES_PROTOCOL)
            .map(|v| (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, v))
            .or_else(|| env(OTEL_EXPORTER_OTLP_PROTOCOL).map(|v| (OTEL_EXPORTER_OTLP_PROTOCOL, v)))
        {
            Some((var, value)) => parse_protocol(var, &value),
            None => Ok(OtlpProtocol::HttpProtobuf),
        }
    }

    fn sampler(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<SamplerKind, TelemetryError> {
        if let Some(s) = self.otlp_sampler {
            return Ok(s);
        }
        match env(OTEL_TRACES_SAMPLER) {
            Some(v) => SamplerKind::from_str(v.trim(), true).map_err(|_| {
                TelemetryError::InvalidSetting {
                    setting: OTEL_TRACES_SAMPLER,
                    message: format!(
                        "unknown sampler {v:?}; use one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio"
                    ),
                }
            }),
            None => Ok(SamplerKind::ParentBasedAlwaysOn),
        }
    }

    fn ratio(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<f64, TelemetryError> {
        let (source, ratio) = match self.otlp_sampler_ratio {
            Some(r) => ("--otlp-sampler-ratio", r),
            None => match env(OTEL_TRACES_SAMPLER_ARG) {
                Some(v) => (
                    OTEL_TRACES_SAMPLER_ARG,
                    v.trim()
                        .parse::<f64>()
                        .map_err(|e| TelemetryError::InvalidSetting {
                            setting: OTEL_TRACES_SAMPLER_ARG,
                            message: format!("{v:?} is not a number: {e}"),
                        })?,
                ),
                None => return Ok(1.0),
            },
        };
        if (0.0..=1.0).contains(&ratio) {
            Ok(ratio)
        } else {
            Err(TelemetryError::InvalidSetting {
                setting: source,
                message: format!("sampling ratio must be within [0, 1], got {ratio}"),
            })
        }
    }
}

fn parse_protocol(var: &'static str, value: &str) -> Result<OtlpProtocol, TelemetryError> {
    match value.trim() {
        "grpc" => Ok(OtlpProtocol::Grpc),
        "http/protobuf" => Ok(OtlpProtocol::HttpProtobuf),
        other => Err(TelemetryError::InvalidSetting {
            setting: var,
            message: format!("unsupported OTLP protocol {other:?}; use grpc or http/protobuf"),
        }),
    }
}

/// The spec's rule for base endpoints: HTTP appends the signal path, gRPC uses the address.
fn signal_url(base: &str, protocol: OtlpProtocol) -> String {
    match protocol {
        OtlpProtocol::Grpc => base.to_string(),
        OtlpProtocol::HttpProtobuf => format!("{}/v1/traces", base.trim_end_matches('/')),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::options::{group_command, parse_group};

    fn flags(args: &[&str]) -> TelemetryOptions {
        parse_group(args).unwrap()
    }

    fn resolve(args: &[&str], env: &[(&str, &str)]) -> Result<ResolvedTracing, TelemetryError> {
        let env: HashMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        flags(args).resolve(&|k| env.get(k).cloned())
    }

    #[test]
    fn nothing_configured_means_no_exporter_and_parent_based_always_on() {
        let r = resolve(&[], &[]).unwrap();
        assert_eq!(r.export, None);
        assert_eq!(r.sampler, SamplerKind::ParentBasedAlwaysOn);
        assert_eq!(r.ratio, 1.0);
    }

    #[test]
    fn generic_endpoint_gets_signal_path_for_http_only() {
        let r = resolve(&[], &[(OTEL_EXPORTER_OTLP_ENDPOINT, "http://c:4318/")]).unwrap();
        assert_eq!(
            r.export,
            Some(ExportTarget {
                endpoint: "http://c:4318/v1/traces".into(),
                protocol: OtlpProtocol::HttpProtobuf
            })
        );
        let r = resolve(
            &[],
            &[
                (OTEL_EXPORTER_OTLP_ENDPOINT, "http://c:4317"),
                (OTEL_EXPORTER_OTLP_PROTOCOL, "grpc"),
            ],
        )
        .unwrap();
        assert_eq!(r.export.unwrap().endpoint, "http://c:4317");
    }

    #[test]
    fn traces_endpoint_beats_generic_and_is_used_verbatim() {
        let r = resolve(
            &[],
            &[
                (OTEL_EXPORTER_OTLP_ENDPOINT, "http://generic:4318"),
                (
                    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
                    "http://traces:9999/custom",
                ),
            ],
        )
        .unwrap();
        assert_eq!(r.export.unwrap().endpoint, "http://traces:9999/custom");
    }

    #[test]
    fn flags_beat_every_variable() {
        let r = resolve(
            &[
                "--otlp-endpoint=http://flag:4317",
                "--otlp-protocol=grpc",
                "--otlp-sampler=traceidratio",
                "--otlp-sampler-ratio=0.25",
            ],
            &[
                (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, "http://traces:1"),
                (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, "http/protobuf"),
                (OTEL_TRACES_SAMPLER, "always_off"),
                (OTEL_TRACES_SAMPLER_ARG, "0.5"),
            ],
        )
        .unwrap();
        assert_eq!(
            r,
            ResolvedTracing {
                export: Some(ExportTarget {
                    endpoint: "http://flag:4317".into(),
                    protocol: OtlpProtocol::Grpc
                }),
                sampler: SamplerKind::TraceIdRatio,
                ratio: 0.25
            }
        );
    }

    #[test]
    fn traces_protocol_beats_generic_protocol() {
        let r = resolve(
            &["--otlp-endpoint=http://c:4317"],
            &[
                (OTEL_EXPORTER_OTLP_PROTOCOL, "http/protobuf"),
                (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, "grpc"),
            ],
        )
        .unwrap();
        assert_eq!(r.export.unwrap().protocol, OtlpProtocol::Grpc);
    }

    #[test]
    fn sampler_and_ratio_come_from_env_when_no_flag() {
        let r = resolve(
            &[],
            &[
                (OTEL_TRACES_SAMPLER, "parentbased_traceidratio"),
                (OTEL_TRACES_SAMPLER_ARG, "0.1"),
            ],
        )
        .unwrap();
        assert_eq!(r.sampler, SamplerKind::ParentBasedTraceIdRatio);
        assert_eq!(r.ratio, 0.1);
    }

    #[test]
    fn exporter_none_disables_export() {
        let r = resolve(
            &[],
            &[
                (OTEL_EXPORTER_OTLP_ENDPOINT, "http://c:4318"),
                (OTEL_TRACES_EXPORTER, "none"),
            ],
        )
        .unwrap();
        assert_eq!(r.export, None);
    }

    #[test]
    fn empty_variables_count_as_unset() {
        let r = resolve(
            &[],
            &[
                (OTEL_EXPORTER_OTLP_ENDPOINT, ""),
                (OTEL_TRACES_SAMPLER, " "),
            ],
        )
        .unwrap();
        assert_eq!(r.export, None);
        assert_eq!(r.sampler, SamplerKind::ParentBasedAlwaysOn);
    }

    #[test]
    fn validate_reports_flag_errors_by_flag_name() {
        let errors = flags(&["--otlp-sampler-ratio=1.5"]).validate();
        assert!(
            errors.iter().any(|e| e.contains("--otlp-sampler-ratio")),
            "{errors:?}"
        );
        // Flags override the environment, so valid flags leave nothing to report from it.
        let valid = flags(&[
            "--otlp-protocol=grpc",
            "--otlp-sampler=always_on",
            "--otlp-sampler-ratio=0.5",
        ]);
        assert!(
            valid
                .validate()
                .iter()
                .all(|e| e.starts_with("OTEL_RESOURCE_ATTRIBUTES")),
            "{:?}",
            valid.validate()
        );
    }

    #[test]
    fn flags_are_grouped_under_tracing_flags_in_help() {
        let help = group_command::<TelemetryOptions>()
            .render_help()
            .to_string();
        let section = help
            .split("Tracing flags:")
            .nth(1)
            .unwrap_or_else(|| panic!("no Tracing flags heading in {help}"));
        for flag in [
            "--otlp-endpoint",
            "--otlp-protocol",
            "--otlp-sampler",
            "--otlp-sampler-ratio",
        ] {
            assert!(
                section.contains(flag),
                "{flag} not under Tracing flags: {help}"
            );
        }
    }

    #[test]
    fn invalid_values_name_the_variable() {
        let err = resolve(&[], &[(OTEL_EXPORTER_OTLP_PROTOCOL, "http/json")]).unwrap_err();
        assert!(
            err.to_string().contains(OTEL_EXPORTER_OTLP_PROTOCOL),
            "{err}"
        );
        let err = resolve(&[], &[(OTEL_TRACES_SAMPLER, "jaeger_remote")]).unwrap_err();
        assert!(err.to_string().contains(OTEL_TRACES_SAMPLER), "{err}");
        let err = resolve(&[], &[(OTEL_TRACES_SAMPLER_ARG, "2")]).unwrap_err();
        assert!(err.to_string().contains(OTEL_TRACES_SAMPLER_ARG), "{err}");
        let err = resolve(&["--otlp-sampler-ratio=-1"], &[]).unwrap_err();
        assert!(err.to_string().contains("--otlp-sampler-ratio"), "{err}");
        assert!(parse_group::<TelemetryOptions>(&["--otlp-protocol=http"]).is_err());
    }
}
