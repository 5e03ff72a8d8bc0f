//! (leader: being written)
