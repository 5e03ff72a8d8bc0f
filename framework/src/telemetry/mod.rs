//! (telemetry: being written)
