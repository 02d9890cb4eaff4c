//! The `knid.v1` protobuf messages and sync ttrpc bindings, generated at build time from
//! `proto/knid/v1/runtime.proto` (see `build.rs`). Messages are re-exported at this level, so
//! `pb::AttachRequest`; the service trait is [`Runtime`], its method map [`create_runtime`] and
//! the generated client [`RuntimeClient`].

// Generated code follows its generators' style, not ours.
#![allow(
    clippy::unwrap_used,
    clippy::uninlined_format_args,
    clippy::undocumented_unsafe_blocks,
    clippy::dbg_macro,
    clippy::todo
)]

include!(concat!(env!("OUT_DIR"), "/knid_v1.rs"));

pub use runtime::*;
pub use runtime_ttrpc::{create_runtime, Runtime, RuntimeClient};
