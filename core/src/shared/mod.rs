//! What every room of the core shares: its error type, the [`Context`] every operation takes,
//! and the plumbing of knid's threads (locks that outlive a panic, a role's relay thread, memory
//! handed back when a burst of work ends), and the crash tests' failpoints. Nothing here
//! imports a room above it, except the leaf types the context holds.

pub mod context;
pub mod error;
pub mod failpoint;
pub mod locks;
pub mod memory;
pub mod relay;

pub(crate) use context::Context;
