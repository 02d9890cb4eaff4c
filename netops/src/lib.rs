//! knid-netops: the kernel side of knid — rtnetlink over a synchronous NETLINK_ROUTE socket,
//! network namespace handles and the scoped-thread netns executor, and sysctls.
//!
//! It knows nothing of sandboxes, IPAM or the store. It is the only crate that touches
//! netlink-packet-* types (they change with every release) and the only one with `unsafe`;
//! everything it exposes is its own small types.

pub mod error;
pub use error::{Error, Result};

pub mod netns;
pub use netns::{run_in, NetnsHandle, NetnsId};

pub mod rtnl;
pub use rtnl::Rtnl;

pub mod link;
pub use link::{Link, VethEnd, VethSpec};

pub mod address;
pub use address::Address;

pub mod route;
pub use route::{Route, RouteScope};

pub mod sysctl;

mod extack;

/// An Ethernet (MAC) address.
pub type Mac = [u8; 6];
