//! (client: being written)
