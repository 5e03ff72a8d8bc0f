//! The node-route controller (placeholder while being written).
pub mod cidrs;
pub mod plan;
