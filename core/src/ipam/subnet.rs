//! Address arithmetic on a subnet: which of its addresses a host may take. Below the pools and
//! the network rules that both use it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

use crate::model::Family;

pub(super) fn to_u128(addr: IpAddr) -> u128 {
    match addr {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

pub(super) fn from_u128(family: Family, value: u128) -> IpAddr {
    match family {
        // Truncation is intended: IPv4 values never exceed u32 within an IPv4 subnet.
        Family::V4 => IpAddr::V4(Ipv4Addr::from(value as u32)),
        Family::V6 => IpAddr::V6(Ipv6Addr::from(value)),
    }
}

/// First and last candidate host values of a subnet (network and IPv4 broadcast excluded).
pub(super) fn host_range(net: &IpNet) -> (u128, u128) {
    let first = to_u128(net.network()) + 1;
    let last = match net {
        IpNet::V4(_) => to_u128(net.broadcast()) - 1,
        IpNet::V6(_) => to_u128(net.broadcast()),
    };
    (first, last)
}

/// The first host address of a subnet (the default gateway).
pub fn first_host(net: &IpNet) -> IpAddr {
    from_u128(Family::of(&net.addr()), host_range(net).0)
}

/// True when `addr` is in `net` and is neither its network address nor its IPv4 broadcast.
pub fn is_assignable(net: &IpNet, addr: IpAddr) -> bool {
    if !net.contains(&addr) {
        return false;
    }
    let (first, last) = host_range(net);
    (first..=last).contains(&to_u128(addr))
}
