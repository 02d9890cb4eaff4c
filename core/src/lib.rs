//! knid-core: the domain of knid — sandboxes, the attach/detach lifecycle, IPAM, drivers and the
//! shard runtime that runs them. It speaks its own types ([`model`]); protobuf stops at the
//! transport and netlink at `knid-netops`.
//!
//! Where things live (docs/architecture.md has the whole map):
//! - [`runtime`]: the public face ([`Runtime`]), start-up, readiness, shard routing, threads;
//! - `lifecycle`: the attachment state machine and one file per operation on it;
//! - `drivers`: the pod side of each interface kind, behind one dispatch on the kind;
//! - [`node`]: the node side of each network (bridges, forwarding, NAT, routes to other nodes);
//! - [`cluster`] (in `node/`): cluster mode (the Node watch: the pod CIDR, the other nodes);
//! - `gc`: garbage collection and the periodic reconciler;
//! - [`cni`]: the CNI protocol; [`extension`]: extensions; [`metrics`]: metrics;
//! - [`model`] (with [`validate`], the input rules), [`config`], [`ipam`], [`records`]: types,
//!   configuration, addresses and the mapping to the store's records;
//! - `shared`: what every room shares: the [`error`] type, the `Context` every operation takes,
//!   [`locks`] that outlive a panic, the threads' plumbing, [`failpoint`]s.

#![forbid(unsafe_code)]

pub mod cni;
pub mod config;
mod drivers;
pub mod extension;
mod gc;
pub mod ipam;
mod lifecycle;
pub mod metrics;
pub mod model;
mod netns;
pub mod node;

pub mod records;
pub mod runtime;
mod shared;

pub use node::cluster;
pub use node::policy;
pub use records::fuzz;
pub use shared::{error, failpoint, locks, memory};

pub use config::{Config, NetworkConfig};
pub use drivers::names;
pub use error::{Error, ErrorKind, Result};
pub use extension::{ExtensionCall, ExtensionCaller, ExtensionInfo, ExtensionSpec, Phase};
pub use model::validate;
pub use model::*;
pub use runtime::Runtime;
pub use runtime::{KernelCheck, PolicyEntry, PolicyListing, PolicyVerdict, Resolved};
