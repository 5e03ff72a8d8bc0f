//! (controller: being written)
