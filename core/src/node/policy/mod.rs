//! Kubernetes NetworkPolicy, enforced by knid for the pods it attached on this node.
//!
//! - [`objects`]: what is kept of NetworkPolicies, Namespaces and Pods (parsed from the API's
//!   types), and [`selector`]: label selectors;
//! - [`compile`]: objects and local pods in, isolated pod addresses and allowed flows out;
//! - [`explain`]: one flow checked against the compiled rules of both its ends;
//! - [`ranges`]: the address ranges peers stand for;
//! - [`engine`]: the objects kept, compiled and moved into the kernel's table, on whichever
//!   thread has work for it ([`handle`]: what it shares with attaches and status, [`summary`]:
//!   where it stands); [`mode`]: the watches that feed it and its turns on the cluster thread.
//!
//! Semantics are NetworkPolicy v1's: a pod is isolated for a direction when a policy of its
//! namespace selects it with that policy type; a flow starts only when the source's egress and
//! the destination's ingress both allow it (each side enforced on its pod's node); replies of
//! an allowed connection pass; traffic from the pod's own node is never filtered.

pub mod compile;
pub mod engine;
pub mod explain;
pub mod handle;
mod kernel;
pub mod local;
pub mod mode;
pub mod objects;
pub mod ranges;
pub mod selector;
pub mod snapshot;
pub mod summary;
pub mod watched;

#[cfg(test)]
mod tests;

pub use compile::{compile, Compiled, Direction, Grant, LocalPod};
pub use engine::TABLE;
pub use explain::{explain, Endpoint, Explanation, Side};
pub use handle::Policies;
pub use mode::PolicyMode;
pub use objects::{PodInfo, Policy, World};
pub use summary::Summary;
