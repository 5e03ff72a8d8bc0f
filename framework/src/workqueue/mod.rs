//! (workqueue: being written)
