//! What `Status` and `Networks` report: readiness conditions, node status, and each network's
//! pool capacity.

use std::net::IpAddr;

use ipnet::IpNet;

use super::{now_ms, Family};

/// A readiness condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    /// `NetworkReady`, `PluginsAvailable`, ...
    pub kind: String,
    /// Whether it holds.
    pub status: bool,
    /// Machine-readable reason (`Exhausted`, `BridgeMissing`, ...), empty when fine.
    pub reason: String,
    /// Human-readable detail.
    pub message: String,
    /// When the status last changed, ms since the Unix epoch.
    pub since_ms: i64,
}

impl Condition {
    /// A condition whose status changes now.
    pub fn now(kind: &str, status: bool, reason: &str, message: &str) -> Condition {
        Condition {
            kind: kind.to_owned(),
            status,
            reason: reason.to_owned(),
            message: message.to_owned(),
            since_ms: now_ms(),
        }
    }
}

/// Node network status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// True when every condition holds.
    pub ready: bool,
    /// Conditions.
    pub conditions: Vec<Condition>,
    /// knid version.
    pub version: String,
    /// Kernel boot id.
    pub boot_id: String,
    /// The alias of every host link this knid creates (`knid:<store id>`).
    pub link_mark: String,
    /// Cluster mode's state; `None` when it is off.
    pub cluster: Option<super::ClusterInfo>,
}

/// Capacity of one family of a network's pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capacity {
    /// Family.
    pub family: Family,
    /// Assignable addresses (gateway, network and broadcast excluded), saturated at `u64::MAX`.
    pub total: u64,
    /// Reserved addresses.
    pub used: u64,
    /// `total - used`.
    pub free: u64,
}

/// The ports of a bridge network's bridge: a Linux bridge takes at most
/// [`BridgePorts::LIMIT`], whoever's they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BridgePorts {
    /// The bridge.
    pub bridge: String,
    /// Ports the bridge can take: [`BridgePorts::LIMIT`].
    pub total: u64,
    /// Ports it has (knid's pods' and any other link's).
    pub used: u64,
    /// `total - used`.
    pub free: u64,
}

impl BridgePorts {
    /// A Linux bridge's port numbers are 10 bits (`BR_PORT_BITS`) and 0 is never given, so its
    /// 1,024th port is refused (EXFULL).
    pub const LIMIT: u64 = 1023;

    /// Bridge `bridge` with `used` ports.
    pub fn of(bridge: &str, used: u64) -> BridgePorts {
        BridgePorts {
            bridge: bridge.to_owned(),
            total: Self::LIMIT,
            used,
            free: Self::LIMIT.saturating_sub(used),
        }
    }
}

/// A configured network as reported by `Networks`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkInfo {
    /// Network name.
    pub name: String,
    /// Driver kind (`bridge`, `routed`, `macvlan`, `ipvlan`, `host-device`).
    pub kind: String,
    /// Subnets.
    pub subnets: Vec<IpNet>,
    /// Gateways, one per subnet.
    pub gateways: Vec<IpAddr>,
    /// Default MTU.
    pub mtu: u32,
    /// Bridge name; empty unless a bridge network.
    pub bridge: String,
    /// Parent device of macvlan and ipvlan networks; empty otherwise.
    pub parent: String,
    /// macvlan or ipvlan mode; empty otherwise.
    pub mode: String,
    /// Capacity per family.
    pub capacity: Vec<Capacity>,
    /// Its bridge's ports (bridge networks whose bridge exists); `None` otherwise.
    pub ports: Option<BridgePorts>,
    /// Whether it works: its node side is set up (and, for a cni network, its plugins' STATUS
    /// passes). A full pool does not make it not ready: see `schedulable`.
    pub ready: bool,
    /// Whether it has room for another pod: every family of its pool has a free address, and
    /// its bridge a free port.
    pub schedulable: bool,
    /// Why not ready: `NodeNetworkBroken` or `PluginNotAvailable`; empty when ready.
    pub reason: String,
    /// Detail of `reason`.
    pub message: String,
    /// Where the subnets come from when not from the configuration: `Node <name>
    /// spec.podCIDRs` for the network marked `pod_cidr_from_node`; empty otherwise.
    pub subnets_from: String,
}

#[cfg(test)]
mod tests;
