//! (informer: being written)
