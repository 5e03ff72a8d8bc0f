//! (manager: being written)
