use super::*;

fn nets(list: &[&str]) -> Vec<IpNet> {
    list.iter().map(|s| s.parse().expect("net")).collect()
}
fn ips(list: &[&str]) -> Vec<IpAddr> {
    list.iter().map(|s| s.parse().expect("ip")).collect()
}

#[test]
fn a_peer_on_a_connected_subnet_is_routed_per_family() {
    let (cidrs, addrs) = (
        nets(&["10.244.2.0/24", "fd00:10:244:2::/64"]),
        ips(&["192.168.100.2", "fd00:100::2"]),
    );
    let peers = [Peer {
        name: "b",
        pod_cidrs: &cidrs,
        internal_ips: &addrs,
    }];
    let local = nets(&["192.168.100.1/24", "fd00:100::1/64", "127.0.0.1/8"]);
    let routes = plan(&peers, &nets(&["10.244.1.0/24"]), &local);
    assert_eq!(routes.len(), 2);
    assert!(
        routes.iter().all(|r| r.state == RouteState::Installed),
        "{routes:?}"
    );
    assert_eq!(routes[0].via, Some("192.168.100.2".parse().expect("ip")));
    assert_eq!(routes[1].via, Some("fd00:100::2".parse().expect("ip")));
}

#[test]
fn a_peer_behind_a_router_or_without_the_family_is_unreachable() {
    let cidrs = nets(&["10.244.3.0/24", "fd00:10:244:3::/64"]);
    let addrs = ips(&["10.9.0.3"]);
    let peers = [Peer {
        name: "c",
        pod_cidrs: &cidrs,
        internal_ips: &addrs,
    }];
    // A /32 of our own is no connected subnet.
    let routes = plan(&peers, &[], &nets(&["192.168.100.1/24", "10.9.0.1/32"]));
    assert_eq!(routes[0].state, RouteState::Unreachable);
    assert!(
        routes[0].message.contains("10.9.0.3"),
        "{}",
        routes[0].message
    );
    assert_eq!(routes[1].state, RouteState::Unreachable);
    assert!(routes[1].message.contains("IPv6"), "{}", routes[1].message);
}

#[test]
fn a_peer_cidr_overlapping_ours_is_never_routed() {
    let cidrs = nets(&["10.244.1.0/24"]);
    let addrs = ips(&["192.168.100.2"]);
    let peers = [Peer {
        name: "b",
        pod_cidrs: &cidrs,
        internal_ips: &addrs,
    }];
    let routes = plan(
        &peers,
        &nets(&["10.244.0.0/16"]),
        &nets(&["192.168.100.1/24"]),
    );
    assert_eq!(routes[0].state, RouteState::Failed);
    assert_eq!(routes[0].via, None);
}
