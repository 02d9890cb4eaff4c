//! knid-store: the daemon's persistent state in sled 0.34.
//!
//! Trees: `meta` (schema version, boot id), `sandboxes` (key: sandbox id), `networks` (the
//! subnets each network last applied, key: network name), `attachments`
//! (key: `sandbox_id/ifname`), one `ipam/<network>` per network (key: address octets, value: owner)
//! `ipam_cursor` (key: `<network>/4` or `<network>/6`), `netns` (knid-created namespaces, key: owner)
//! and `extensions` (key: name). Records are protobuf messages
//! ([`schema`]) so fields can be added without a migration; `meta/schema` guards real migrations.
//!
//! Every change goes through a [`Batch`] committed as one sled transaction and flushed before
//! [`Store::commit`] returns; concurrent commits share one flush (group commit). A batch whose
//! every prefix is a consistent state (an attach's intent) may be applied one key at a time
//! instead, cheaper in sled ([`Store::apply_in_order`]).
//!
//! Durability caveat: sled 0.34.7's flush ends in `sync_file_range`, not `fsync`, so an acknowledged
//! commit survives a crash of the daemon but not necessarily a power cut or kernel crash (sled's
//! background flusher does a real `sync_all` every `flush_every_ms`). That is acceptable here: a reboot
//! destroys every netns and link anyway, and the boot-id rule reconciles the store with the kernel.

#![forbid(unsafe_code)]

mod batch;
pub mod codec;
mod config;
mod db;
mod error;
mod flusher;
mod group_flush;
mod keys;
pub mod migrate;
mod records;
mod reservation;
mod retired;
pub mod schema;
mod transaction;
mod trees;

pub use batch::{Batch, Committed, Record};
pub use config::StoreConfig;
pub use db::{Durable, Store};
pub use error::{Error, Result};
pub use records::{Decoded, Records, Undecodable};
pub use reservation::{Owner, Reservation};
pub use retired::reclaim as reclaim_retired;
pub use schema::{
    AttachmentRecord, AttachmentState, BandwidthRecord, ClusterRecord, CniRecord, DeviceRecord,
    DnsRecord, ExtensionRecord, InterfaceSpecRecord, IpRecord, NeighborRecord, NetnsRecord,
    NetworkRecord, OwnerRecord, PodRecord, PolicyRecord, PortMappingRecord, RouteRecord,
    SandboxRecord, TapRecord,
};

/// Current on-disk schema version stored in `meta/schema` (see [`migrate`] for what each
/// version added and how an older store is brought up to it).
pub const SCHEMA_VERSION: u32 = 2;
