//! The protobuf messages and sync ttrpc bindings, generated at build time (see `build.rs`):
//! `knid.v1` from `proto/knid/v1/{runtime,extension}.proto`, re-exported at this level
//! (`pb::AttachRequest`; service traits [`Runtime`] and [`Extension`], method maps
//! [`create_runtime`] and [`create_extension`], clients [`RuntimeClient`] and
//! [`ExtensionClient`]), and the KNI beta API `kni` from `proto/kni/beta/kni.proto` under
//! [`kni`] and [`kni_ttrpc`].

// Generated code follows its generators' style, not ours.
#![allow(
    clippy::unwrap_used,
    clippy::uninlined_format_args,
    clippy::undocumented_unsafe_blocks,
    clippy::dbg_macro,
    clippy::todo
)]

include!(concat!(env!("OUT_DIR"), "/knid_v1.rs"));

pub use extension::{ExtensionCallRequest, ExtensionCallResponse, HealthRequest, HealthResponse};
pub use extension_ttrpc::{create_extension, Extension, ExtensionClient};
pub use runtime::*;
pub use runtime_ttrpc::{create_runtime, Runtime, RuntimeClient};
