//! knid-core: the domain of knid — sandboxes, the attach/detach lifecycle, IPAM, drivers and the
//! shard engine that runs them. It speaks its own types ([`model`]); protobuf stops at the transport
//! and netlink at `knid-netops`.

pub mod cni;
pub mod config;
pub mod decode;
pub mod engine;
pub mod error;
pub mod extension;
pub mod ipam;
pub mod model;
pub mod names;
pub mod podcheck;
pub mod validate;

pub use config::{Config, NetworkConfig};
pub use engine::Runtime;
pub use error::{Error, ErrorKind, Result};
pub use extension::{ExtensionCall, ExtensionCaller, ExtensionInfo, ExtensionSpec, Phase};
pub use model::*;

mod attach;
mod check;
mod child;
mod dan;
mod detach;
mod dispatch;
pub mod failpoint;
mod gc;
mod hostdev;
mod lifecycle;
pub mod memory;
pub mod metrics;
mod netns;
pub mod node;
mod phases;
mod plan;
mod podside;
mod reaper;
mod reconciler;
pub mod records;
mod recovery;
mod rollback;
mod store_health;
mod tap;
mod teardown;
mod veth;
mod worker;
