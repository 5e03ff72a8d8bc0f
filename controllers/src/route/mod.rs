//! The node-route controller (placeholder while being written).
