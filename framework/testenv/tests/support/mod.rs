//! Helpers shared by the integration test targets.

pub mod kubectl;
