//! (events: being written)
