//! Privileged tests against the real kernel. Each test runs on its own thread inside a private
//! network namespace (and creates more namespaces for "pods"), so the machine's own interfaces
//! are never touched and the tests run in parallel.
//!
//! Without the privilege to create namespaces they skip loudly; with `CI=true` they fail.

mod common;

mod addresses;
mod devices;
mod links;
mod netns;
mod nft;
mod policy;
mod routes;
mod steps;
mod sysctl;
mod tap;
mod vxlan;
