//! What a policy table holds: the isolated pod directions and the allowed flows, the drop
//! counters read back, and the rules every allow must meet to be held.

use std::collections::BTreeSet;
use std::fmt;
use std::io;
use std::net::IpAddr;

use crate::error::{Error, Result};

/// An address as a number (IPv4 in the low 32 bits).
pub(super) fn ordinal(a: IpAddr) -> u128 {
    match a {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

/// Which end of a flow a rule guards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Direction {
    /// Traffic to the pod.
    Ingress,
    /// Traffic from the pod.
    Egress,
}

impl Direction {
    /// Both directions.
    pub const ALL: [Direction; 2] = [Direction::Ingress, Direction::Egress];

    /// `ingress` or `egress`, as set and chain names spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ingress => "ingress",
            Self::Egress => "egress",
        }
    }
}

/// Ports of one transport protocol, inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PortRange {
    /// TCP (6), UDP (17) or SCTP (132).
    pub protocol: u8,
    /// The first port.
    pub first: u16,
    /// The last port (`first` for one port).
    pub last: u16,
}

/// One allowed flow of a pod of this node: for [`Direction::Ingress`] `pod` is the destination
/// and `peers` the range of sources, for [`Direction::Egress`] `pod` is the source and `peers`
/// the range of destinations. Pod and peers are of one family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Allow {
    /// Which way the flow goes.
    pub direction: Direction,
    /// The pod's address.
    pub pod: IpAddr,
    /// The first and last address of the peers, inclusive.
    pub peers: (IpAddr, IpAddr),
    /// The protocol and destination ports allowed; `None`: every protocol and port (ICMP too).
    pub ports: Option<PortRange>,
}

/// The whole content of a policy table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicyState {
    /// Pods isolated in a direction: their traffic that way must match an [`Allow`].
    pub isolated: BTreeSet<(Direction, IpAddr)>,
    /// The flows allowed. Those of a pod not isolated in their direction change nothing.
    pub allows: BTreeSet<Allow>,
}

/// The new connections the policy dropped, of one pod in one direction, since its isolation
/// was installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct PolicyDrops {
    /// Which way the dropped packets went.
    pub direction: Direction,
    /// The pod's address.
    pub pod: IpAddr,
    /// Packets dropped.
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// `egress 10.88.0.5 -> 10.88.0.0-10.88.255.255 tcp/80-90`.
impl fmt::Display for Allow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let arrow = match self.direction {
            Direction::Ingress => "<-",
            Direction::Egress => "->",
        };
        write!(
            f,
            "{} {} {arrow} {}-{}",
            self.direction.as_str(),
            self.pod,
            self.peers.0,
            self.peers.1
        )?;
        match self.ports {
            Some(p) => write!(f, " {}/{}-{}", p.protocol, p.first, p.last),
            None => f.write_str(" any"),
        }
    }
}

impl Allow {
    /// Why the kernel could not hold this allow, if it cannot.
    pub(super) fn invalid(&self) -> Option<&'static str> {
        let family = |a: IpAddr| a.is_ipv6();
        if family(self.peers.0) != family(self.pod) || family(self.peers.1) != family(self.pod) {
            return Some("pod and peers of different families");
        }
        if ordinal(self.peers.0) > ordinal(self.peers.1) {
            return Some("first peer after the last");
        }
        match self.ports {
            Some(p) if !matches!(p.protocol, 6 | 17 | 132) => {
                Some("ports of a protocol other than TCP, UDP or SCTP")
            }
            Some(p) if p.first > p.last => Some("first port after the last"),
            _ => None,
        }
    }
}

impl PolicyState {
    /// Refuses a state with an allow the table cannot hold.
    pub(super) fn check(&self, op: &'static str, table: &str) -> Result<()> {
        match self.allows.iter().find_map(|a| Some((a, a.invalid()?))) {
            None => Ok(()),
            Some((allow, why)) => Err(Error::io(
                format!("{op} {table}: {allow}"),
                io::Error::new(io::ErrorKind::InvalidInput, why),
            )),
        }
    }
}
