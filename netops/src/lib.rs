//! knid-netops: the kernel side of knid — rtnetlink over a synchronous NETLINK_ROUTE socket,
//! network namespace handles and the scoped-thread netns executor, sysctls, and the glibc
//! allocator's tunables.
//!
//! It knows nothing of sandboxes, IPAM or the store. It is the only crate that touches
//! netlink-packet-* types (they change with every release) and the only one with `unsafe`;
//! everything it exposes is its own small types, but for [`decode::reply`], which reads a
//! deserialized message for the fuzz target of netlink replies.

pub mod error;
pub use error::{Error, Result};

pub mod netns;
pub use netns::{run_in, NetnsHandle, NetnsId};

pub mod netns_claim;

pub mod rtnl;
pub use rtnl::Rtnl;

pub mod link;
pub use link::{ChildKind, ChildSpec, IpvlanMode, Link, MacvlanMode, VethEnd, VethSpec};

pub mod link_names;
pub use link_names::link_names;

pub mod neigh;
pub use neigh::Neighbour;

pub mod address;
pub use address::Address;

pub mod route;
pub use route::{Route, RouteScope};

pub mod steps;
pub use steps::{Step, StepFailed};

pub mod tap;
pub use tap::{TapSpec, TapState};

pub mod tc;
pub use tc::{Qdisc, Redirect};

pub mod shaping;
pub use shaping::{Tbf, TbfFound};

pub mod sysctl;

pub mod sysfs;

pub mod decode;

pub mod malloc;

pub mod code_pages;

mod extack;
mod nlsocket;
mod reply_end;

/// An Ethernet (MAC) address.
pub type Mac = [u8; 6];

pub mod nft;
pub use nft::Nft;

pub mod vxlan;
pub use vxlan::{FdbEntry, Vxlan, VxlanSpec};
