//! Address ranges: what a peer of a policy rule stands for (a pod's address, an ipBlock less its
//! exceptions, every address of a family), as inclusive first–last pairs of one family.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

/// An inclusive range of addresses of one family.
pub type Range = (IpAddr, IpAddr);

/// One address as a range.
pub fn single(addr: IpAddr) -> Range {
    (addr, addr)
}

/// Every address of the family of `v6`.
pub fn everything(v6: bool) -> Range {
    if v6 {
        (
            IpAddr::V6(Ipv6Addr::UNSPECIFIED),
            IpAddr::V6(Ipv6Addr::from(u128::MAX)),
        )
    } else {
        (
            IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            IpAddr::V4(Ipv4Addr::BROADCAST),
        )
    }
}

/// The addresses of `net`.
pub fn of_net(net: &IpNet) -> Range {
    (net.network(), net.broadcast())
}

/// An address as a number of its family's width.
pub(crate) fn number(addr: IpAddr) -> u128 {
    match addr {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

/// The address `n` in the family of `like`.
fn address(n: u128, like: IpAddr) -> IpAddr {
    match like {
        // Ranges of one family never leave its width.
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from(u32::try_from(n).unwrap_or(u32::MAX))),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from(n)),
    }
}

/// `net` less every one of `except` (of the same family; others are ignored), as sorted
/// disjoint ranges.
pub fn net_except(net: &IpNet, except: &[IpNet]) -> Vec<Range> {
    let (first, last) = of_net(net);
    let mut holes: Vec<(u128, u128)> = except
        .iter()
        .filter(|e| e.addr().is_ipv6() == net.addr().is_ipv6())
        .map(|e| (number(e.network()), number(e.broadcast())))
        .collect();
    holes.sort_unstable();
    let mut out = Vec::new();
    let mut next = number(first);
    let end = number(last);
    let mut open = true;
    for (hole_first, hole_last) in holes {
        if hole_last < next || hole_first > end {
            continue;
        }
        if hole_first > next {
            out.push((address(next, first), address(hole_first - 1, first)));
        }
        if hole_last >= end {
            open = false;
            break;
        }
        next = hole_last + 1;
    }
    if open {
        out.push((address(next, first), last));
    }
    out
}

/// Whether `addr` is in `range`.
pub fn contains(range: &Range, addr: IpAddr) -> bool {
    addr.is_ipv6() == range.0.is_ipv6()
        && number(range.0) <= number(addr)
        && number(addr) <= number(range.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> IpNet {
        s.parse().expect("a CIDR")
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("an address")
    }

    #[test]
    fn a_block_less_its_exceptions_is_what_is_left_in_order() {
        let left = net_except(
            &net("10.0.0.0/24"),
            &[net("10.0.0.128/25"), net("10.0.0.0/30")],
        );
        assert_eq!(left, vec![(ip("10.0.0.4"), ip("10.0.0.127"))]);
        let left = net_except(&net("10.0.0.0/24"), &[net("10.0.0.16/28")]);
        assert_eq!(
            left,
            vec![
                (ip("10.0.0.0"), ip("10.0.0.15")),
                (ip("10.0.0.32"), ip("10.0.0.255"))
            ]
        );
        assert!(net_except(&net("10.0.0.0/24"), &[net("10.0.0.0/16")]).is_empty());
        let all = net_except(&net("::/0"), &[net("fd00::/8")]);
        assert_eq!(all.len(), 2);
        assert_eq!(all[1].1, ip("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"));
        // An exception of the other family takes nothing away.
        assert_eq!(
            net_except(&net("0.0.0.0/0"), &[net("fd00::/8")]),
            vec![everything(false)]
        );
    }

    #[test]
    fn containment_respects_the_family() {
        assert!(contains(&everything(false), ip("192.0.2.1")));
        assert!(!contains(&everything(false), ip("2001:db8::1")));
        assert!(contains(&everything(true), ip("::")));
    }
}
