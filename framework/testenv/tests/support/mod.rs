//! Helpers shared by the integration test targets.

pub mod capture;
pub mod kubectl;
