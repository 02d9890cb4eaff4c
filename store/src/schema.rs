//! The store's record schema: the types generated from `proto/store.proto` (rust-protobuf 3, pure
//! parser, see `build.rs`), whose version is [`crate::SCHEMA_VERSION`].
//!
//! The generated module is [`store`]; its messages are re-exported here.

// Generated code: rust-protobuf's own lint allowances cover everything but this workspace-level deny.
#![allow(clippy::unwrap_used)]

include!(concat!(env!("OUT_DIR"), "/schema/mod.rs"));

pub use self::store::{
    AttachmentRecord, AttachmentState, BandwidthRecord, ClusterRecord, CniRecord, DeviceRecord,
    DnsRecord, ExtensionRecord, InterfaceSpecRecord, IpRecord, NeighborRecord, NetnsRecord,
    NetworkRecord, OwnerRecord, PodRecord, PolicyRecord, PortMappingRecord, RouteRecord,
    SandboxRecord, TapRecord,
};
