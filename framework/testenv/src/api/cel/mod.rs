//! CEL as kube-apiserver runs it: parsing with cel-go's limits (`parse`), the types of a
//! structural schema in CEL (`types`), type checking against them (`check`), and the Kubernetes
//! CEL libraries through the `kube-cel` crate; `admission` is the environment of admission's
//! expressions (policies and match conditions).

pub mod admission;
pub mod check;
pub mod compile;
pub mod cost;
pub mod eval;
pub mod parse;
pub mod types;
pub mod validate;
pub mod values;
