//! What an interface is given on layer 3: its addresses, routes and static neighbours, and the
//! address family they belong to.

use std::net::IpAddr;

use ipnet::IpNet;

use super::MacAddr;

/// One address of an interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpConfig {
    /// Address with prefix length.
    pub address: IpNet,
    /// Gateway of its subnet, if the network has one.
    pub gateway: Option<IpAddr>,
}

/// The scope of a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteScope {
    /// Via a gateway.
    Universe,
    /// Directly on the link.
    Link,
    /// On this host only.
    Host,
}

impl RouteScope {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Universe => "universe",
            Self::Link => "link",
            Self::Host => "host",
        }
    }

    /// Parses the lower-case name.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "universe" => Some(Self::Universe),
            "link" => Some(Self::Link),
            "host" => Some(Self::Host),
            _ => None,
        }
    }
}

/// The kernel's main routing table: what a route without a table means.
pub const MAIN_TABLE: u32 = 254;

/// A route inside the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteInfo {
    /// Destination (`0.0.0.0/0` or `::/0` for default).
    pub dst: IpNet,
    /// Next hop.
    pub gateway: Option<IpAddr>,
    /// Route MTU, when set.
    pub mtu: Option<u32>,
    /// Scope.
    pub scope: RouteScope,
    /// Routing table (254 = main).
    pub table: u32,
    /// Metric (lower wins), when set.
    pub metric: Option<u32>,
}

/// A static neighbour entry inside the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Neighbor {
    /// Neighbour address.
    pub ip: IpAddr,
    /// Its MAC.
    pub mac: MacAddr,
}

/// Address family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

impl Family {
    /// The family of an address.
    pub fn of(addr: &IpAddr) -> Self {
        match addr {
            IpAddr::V4(_) => Self::V4,
            IpAddr::V6(_) => Self::V6,
        }
    }

    /// `ipv4` or `ipv6`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::V4 => "ipv4",
            Self::V6 => "ipv6",
        }
    }
}
