//! What the kernel holds, read with netlink (and /proc/sys) inside a given network namespace:
//! links, addresses, routes, sysctls and qdiscs, never through knid. Each probe opens the netns
//! by path, so it sees exactly that namespace.

use std::net::IpAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use ipnet::IpNet;
use knid_netops::{Link, NetnsHandle, Route, Rtnl};

use crate::wait::SETTLE;

/// A netlink socket opened inside the netns at `path`.
pub fn rtnl_in(path: &Path) -> Rtnl {
    let ns = NetnsHandle::open(path).expect("open netns");
    Rtnl::open_in(&ns).expect("open netlink socket in netns")
}

/// Every link of the netns at `path`.
pub fn links_in(path: &Path) -> Vec<Link> {
    rtnl_in(path).links().expect("dump links")
}

/// The link `name` of the netns at `path`, if any.
pub fn link_in(path: &Path, name: &str) -> Option<Link> {
    rtnl_in(path).link_by_name(name).expect("look up link")
}

/// Addresses (with prefix length) of link `name` in the netns at `path`.
pub fn addresses_in(path: &Path, name: &str) -> Vec<IpNet> {
    let mut rtnl = rtnl_in(path);
    let link = rtnl
        .link_by_name(name)
        .expect("look up link")
        .unwrap_or_else(|| panic!("{name} missing in {}", path.display()));
    rtnl.addresses(Some(link.index))
        .expect("dump addresses")
        .into_iter()
        .map(|a| a.net)
        .collect()
}

/// Main-table routes of one family in the netns at `path`.
pub fn routes_in(path: &Path, ipv6: bool) -> Vec<Route> {
    rtnl_in(path).routes(ipv6).expect("dump routes")
}

/// The default route of a family in the netns at `path`, if any.
pub fn default_route_in(path: &Path, ipv6: bool) -> Option<Route> {
    routes_in(path, ipv6)
        .into_iter()
        .find(|r| r.dst.prefix_len() == 0)
}

/// Link names of the netns at `path`, sorted.
pub fn link_names(path: &Path) -> Vec<String> {
    let mut names: Vec<String> = links_in(path).into_iter().map(|l| l.name).collect();
    names.sort();
    names
}

/// Waits until the netns at `path` holds nothing but `lo`.
pub fn wait_only_lo(path: &Path) {
    let started = Instant::now();
    loop {
        let names = link_names(path);
        if names == ["lo"] {
            return;
        }
        assert!(
            started.elapsed() < SETTLE,
            "links left in {}: {names:?}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// fe80::/10.
pub fn is_link_local(addr: IpAddr) -> bool {
    matches!(addr, IpAddr::V6(v6) if v6.segments()[0] & 0xffc0 == 0xfe80)
}

/// Global addresses of `ifname` in `netns`, sorted.
pub fn kernel_addresses(netns: &Path, ifname: &str) -> Vec<IpNet> {
    let mut list: Vec<IpNet> = addresses_in(netns, ifname)
        .into_iter()
        .filter(|a| !is_link_local(a.addr()))
        .collect();
    list.sort();
    list
}

/// Reads a sysctl inside the netns at `path`.
pub fn sysctl_in(path: &Path, key: &str) -> String {
    let ns = NetnsHandle::open(path).expect("open netns");
    knid_netops::run_in(&ns, || knid_netops::sysctl::read(key))
        .expect("enter netns")
        .unwrap_or_else(|e| panic!("read {key}: {e}"))
}

/// How many IPv6 routes of any table (the local table's multicast route among them) go out of
/// link `name` in the netns at `path`, from /proc/thread-self/net/ipv6_route read by a thread
/// in it (the kernel's own listing, whose last field names the device).
pub fn ipv6_routes_via(path: &Path, name: &str) -> usize {
    ipv6_routes_via_ns(&NetnsHandle::open(path).expect("open netns"), name)
}

/// [`ipv6_routes_via`] for a netns already open (one with no path of its own among them).
pub fn ipv6_routes_via_ns(ns: &NetnsHandle, name: &str) -> usize {
    let table = knid_netops::run_in(ns, || {
        std::fs::read_to_string("/proc/thread-self/net/ipv6_route")
    })
    .expect("enter netns")
    .unwrap_or_else(|e| panic!("read ipv6_route: {e}"));
    table
        .lines()
        .filter(|l| l.split_whitespace().last() == Some(name))
        .count()
}

/// Packets netns `path` has fragmented (IPv4 FragCreates plus IPv6 Ip6FragCreates, from
/// /proc/thread-self/net/snmp and snmp6 read by a thread in it: /proc/net is the process's
/// namespace, not the thread's).
pub fn fragments_created(path: &Path) -> u64 {
    let ns = knid_netops::NetnsHandle::open(path).expect("open netns");
    let read = |file: &'static str| {
        knid_netops::run_in(&ns, move || {
            std::fs::read_to_string(format!("/proc/thread-self/net/{file}"))
        })
        .expect("enter netns")
        .unwrap_or_else(|e| panic!("read {file}: {e}"))
    };
    let snmp = read("snmp");
    let mut lines = snmp.lines().filter(|l| l.starts_with("Ip: "));
    let (names, values) = (lines.next().unwrap_or(""), lines.next().unwrap_or(""));
    let v4 = names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == "FragCreates")
        .and_then(|(_, v)| v.parse::<u64>().ok())
        .expect("FragCreates in /proc/net/snmp");
    let snmp6 = read("snmp6");
    let v6 = snmp6
        .lines()
        .find_map(|l| l.strip_prefix("Ip6FragCreates"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .expect("Ip6FragCreates in /proc/net/snmp6");
    v4 + v6
}
