//! knid-core: the domain of knid — sandboxes, the attach/detach lifecycle, IPAM, drivers and the
//! shard runtime that runs them. It speaks its own types ([`model`]); protobuf stops at the
//! transport and netlink at `knid-netops`.
//!
//! Where things live (docs/architecture.md has the whole map):
//! - [`runtime`]: the public face ([`Runtime`]), start-up, readiness, shard routing, threads;
//! - `lifecycle`: the attachment state machine and one file per operation on it;
//! - `drivers`: the pod side of each interface kind, behind one dispatch on the kind;
//! - [`node`]: the node side of each network (bridges, forwarding, NAT, routes to other nodes);
//! - [`cluster`]: cluster mode (the Node watch: the pod CIDR, the other nodes);
//! - `gc`: garbage collection and the periodic reconciler;
//! - [`cni`]: the CNI protocol; [`extension`]: extensions; [`metrics`]: metrics;
//! - [`model`] (with [`validate`], the input rules), [`config`], [`ipam`], [`records`]: types,
//!   configuration, addresses and the mapping to the store's records.

#![forbid(unsafe_code)]

pub mod cluster;
pub mod cni;
pub mod config;
mod context;
mod drivers;
pub mod error;
pub mod extension;
pub mod failpoint;
pub mod fuzz;
mod gc;
pub mod ipam;
mod lifecycle;
pub mod locks;
pub mod memory;
pub mod metrics;
pub mod model;
mod netns;
pub mod node;
pub mod records;
mod relay;
pub mod runtime;

pub use config::{Config, NetworkConfig};
pub use drivers::names;
pub use error::{Error, ErrorKind, Result};
pub use extension::{ExtensionCall, ExtensionCaller, ExtensionInfo, ExtensionSpec, Phase};
pub use model::validate;
pub use model::*;
pub use runtime::Runtime;
