//! (admin: being written)
