//! Routed networks end to end (Calico-style, no bridge): pods own a /32 and a /128 and reach
//! everything through link-local gateways answered by static neighbour entries; the host routes
//! each pod address to its veth. Checked against the kernel on both sides, with TCP between
//! pods and between the host and pods over both families, and nothing left after detach.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use ipnet::IpNet;
use knid_netops::{Link, Route, RouteScope};
use knid_transport::pb;
use testkit::{TestNode, RPC, SETTLE};

const ROUTED_NETWORK: &str = r#"
[networks.rt]
kind = "routed"
subnets = ["10.77.0.0/24", "fd00:77::/64"]
"#;
const GATEWAY_V4: &str = "169.254.1.1";
const GATEWAY_V6: &str = "fe80::1";
/// Global addresses the test gives the host netns, so the host has a source for its
/// connections to pods (knid puts none on the host for routed networks).
const HOST_V4: &str = "192.0.2.1";
const HOST_V6: &str = "2001:db8::1";

/// Attaches sandbox `id` (one eth0 on `rt`) in a new netns of the same name.
fn attach(node: &TestNode, id: &str) -> (PathBuf, pb::Sandbox) {
    let netns = node.netns(id);
    let mut req = node.attach_req(id, &netns, "eth0");
    req.interfaces[0].network = "rt".to_owned();
    let sandbox = node
        .client()
        .attach(&req, RPC)
        .unwrap_or_else(|e| panic!("Attach {id}: {e}"));
    (netns, sandbox)
}

fn ip(text: &str) -> IpAddr {
    text.parse().expect("an IP address")
}

/// The host end of a routed interface: an up veth on no bridge.
fn host_end(node: &TestNode, iface: &pb::InterfaceResult) -> Link {
    let link = testkit::link_in(node.host_path(), &iface.host_ifname)
        .unwrap_or_else(|| panic!("host end {} missing", iface.host_ifname));
    assert_eq!(link.kind.as_deref(), Some("veth"), "kind of {}", link.name);
    assert_eq!(link.controller, None, "{} is on a bridge", link.name);
    assert!(link.up, "{} is down", link.name);
    link
}

/// Host routes (both families) to `addrs` out of the link with index `oif`.
fn host_routes_to(node: &TestNode, addrs: &[IpAddr], oif: u32) -> Vec<Route> {
    [false, true]
        .into_iter()
        .flat_map(|ipv6| testkit::routes_in(node.host_path(), ipv6))
        .filter(|r| r.oif == Some(oif) && addrs.contains(&r.dst.addr()))
        .collect()
}

/// Host routes (both families) whose destination is one of `addrs`, through any link.
fn host_routes_for(node: &TestNode, addrs: &[IpAddr]) -> Vec<Route> {
    [false, true]
        .into_iter()
        .flat_map(|ipv6| testkit::routes_in(node.host_path(), ipv6))
        .filter(|r| addrs.contains(&r.dst.addr()) && r.dst.prefix_len() == r.dst.max_prefix_len())
        .collect()
}

/// The pod's addresses of an interface result, without prefix length.
fn pod_ips(iface: &pb::InterfaceResult) -> Vec<IpAddr> {
    ["ipv4", "ipv6"]
        .into_iter()
        .map(|family| testkit::ip_of(iface, family).0.addr())
        .collect()
}

/// Checks everything a routed interface has in the reply and in the kernel on both sides.
fn check_routed(node: &TestNode, netns: &Path, iface: &pb::InterfaceResult) {
    assert_eq!(
        (
            iface.kind.as_str(),
            iface.network.as_str(),
            iface.state.as_str()
        ),
        ("veth", "rt", "attached")
    );
    let (v4, gw4) = testkit::ip_of(iface, "ipv4");
    let (v6, gw6) = testkit::ip_of(iface, "ipv6");
    assert_eq!(
        (v4.prefix_len(), v6.prefix_len()),
        (32, 128),
        "pod prefixes"
    );
    let subnets: [IpNet; 2] = ["10.77.0.0/24", "fd00:77::/64"].map(|s| s.parse().expect("cidr"));
    assert!(
        subnets[0].contains(&v4.addr()),
        "{v4} outside {}",
        subnets[0]
    );
    assert!(
        subnets[1].contains(&v6.addr()),
        "{v6} outside {}",
        subnets[1]
    );
    assert_eq!((gw4, gw6), (ip(GATEWAY_V4), ip(GATEWAY_V6)), "gateways");

    // Reported routes: the IPv4 gateway on-link, then a default route per family.
    let routes: Vec<(&str, &str, &str)> = iface
        .routes
        .iter()
        .map(|r| (r.dst.as_str(), r.gateway.as_str(), r.scope.as_str()))
        .collect();
    assert_eq!(
        routes,
        [
            ("169.254.1.1/32", "", "link"),
            ("0.0.0.0/0", GATEWAY_V4, "universe"),
            ("::/0", GATEWAY_V6, "universe"),
        ],
        "reported routes"
    );

    // The gateways' neighbour entries point at the host end's fixed MAC.
    let host = host_end(node, iface);
    let host_mac = host.mac.expect("the host end has a MAC");
    let neighbours: Vec<(IpAddr, [u8; 6])> = iface
        .neighbors
        .iter()
        .map(|n| (ip(&n.ip), testkit::parse_mac(&n.mac)))
        .collect();
    assert_eq!(
        neighbours,
        [(ip(GATEWAY_V4), host_mac), (ip(GATEWAY_V6), host_mac)],
        "reported neighbours"
    );

    // Pod side: link, addresses and default routes as reported...
    testkit::assert_pod_side(netns, iface);
    let pod = testkit::link_in(netns, &iface.name).expect("eth0 in the sandbox");
    let pod_mac = pod.mac.expect("eth0 has a MAC");
    // ...the on-link route to the IPv4 gateway...
    let onlink = testkit::routes_in(netns, false)
        .into_iter()
        .find(|r| r.dst == IpNet::from(gw4))
        .unwrap_or_else(|| panic!("no route to {gw4} in {}", netns.display()));
    assert_eq!(
        (onlink.gateway, onlink.oif, onlink.scope),
        (None, Some(pod.index), RouteScope::Link),
        "route to {gw4}"
    );
    // ...and static neighbour entries for both gateways.
    let mut rtnl = testkit::rtnl_in(netns);
    for (gateway, ipv6) in [(gw4, false), (gw6, true)] {
        let entry = rtnl
            .neighbours(pod.index, ipv6)
            .expect("dump pod neighbours")
            .into_iter()
            .find(|n| n.ip == gateway)
            .unwrap_or_else(|| panic!("no neighbour entry for {gateway} in the pod"));
        assert!(entry.permanent, "{gateway} is not a static entry");
        assert_eq!(entry.mac, Some(host_mac), "MAC of {gateway} in the pod");
    }

    // Host side: a route to each pod address out of the host end, and static entries for them.
    let mut routes = host_routes_to(node, &pod_ips(iface), host.index);
    routes.sort_by_key(|r| r.dst);
    let dsts: Vec<IpNet> = routes.iter().map(|r| r.dst).collect();
    assert_eq!(dsts, [v4, v6], "host routes via {}", host.name);
    for route in &routes {
        assert_eq!(
            route.gateway, None,
            "host route {} has a gateway",
            route.dst
        );
        // IPv6 routes have no scope in the kernel: it always reports universe.
        if route.dst.addr().is_ipv4() {
            assert_eq!(
                route.scope,
                RouteScope::Link,
                "scope of host route {}",
                route.dst
            );
        }
    }
    let mut host_rtnl = node.host_rtnl();
    for (addr, ipv6) in [(v4.addr(), false), (v6.addr(), true)] {
        let entry = host_rtnl
            .neighbours(host.index, ipv6)
            .expect("dump host neighbours")
            .into_iter()
            .find(|n| n.ip == addr)
            .unwrap_or_else(|| panic!("no neighbour entry for {addr} on {}", host.name));
        assert!(entry.permanent, "{addr} is not a static entry on the host");
        assert_eq!(entry.mac, Some(pod_mac), "MAC of {addr} on the host");
    }
}

#[test]
fn routed_pods_get_host_routes_and_static_gateway_neighbours_and_detach_removes_them() {
    if !testkit::privileged() {
        return;
    }
    let mut node = TestNode::start(ROUTED_NETWORK);
    let networks = node.client().networks(RPC).expect("Networks").networks;
    let rt = networks
        .iter()
        .find(|n| n.name == "rt")
        .expect("rt in Networks");
    assert_eq!(rt.kind, "routed");
    assert_eq!(rt.gateways, [GATEWAY_V4, GATEWAY_V6]);
    assert_eq!((rt.bridge.as_str(), rt.parent.as_str()), ("", ""));

    let (a_ns, a) = attach(&node, "pod-a");
    let (b_ns, b) = attach(&node, "pod-b");
    let (a_if, b_if) = (&a.interfaces[0], &b.interfaces[0]);
    check_routed(&node, &a_ns, a_if);
    check_routed(&node, &b_ns, b_if);
    assert_ne!(a_if.host_ifname, b_if.host_ifname);
    assert_ne!(pod_ips(a_if), pod_ips(b_if));
    let bridges: Vec<String> = testkit::links_in(node.host_path())
        .into_iter()
        .filter(|l| l.kind.as_deref() == Some("bridge"))
        .map(|l| l.name)
        .collect();
    assert!(
        bridges.is_empty(),
        "a routed network made bridges: {bridges:?}"
    );
    assert_eq!(node.capacity_used("rt"), 4);

    node.client()
        .detach(&testkit::detach_req("pod-a"), RPC)
        .expect("Detach pod-a");
    testkit::wait_for("pod-a's host routes to go", SETTLE, || {
        host_routes_for(&node, &pod_ips(a_if)).is_empty()
    });
    testkit::wait_for("pod-a's host end to go", SETTLE, || {
        testkit::link_in(node.host_path(), &a_if.host_ifname).is_none()
    });
    testkit::wait_for("eth0 gone from pod-a", SETTLE, || {
        testkit::link_in(&a_ns, "eth0").is_none()
    });
    node.wait_capacity_used("rt", 2);
    // pod-b keeps all of it.
    check_routed(&node, &b_ns, b_if);

    node.client()
        .detach(&testkit::detach_req("pod-b"), RPC)
        .expect("Detach pod-b");
    testkit::wait_for("pod-b's host routes to go", SETTLE, || {
        host_routes_for(&node, &pod_ips(b_if)).is_empty()
    });
    node.wait_no_kn_links();
    node.wait_capacity_used("rt", 0);
    assert!(node.list_ids().is_empty(), "List: {:?}", node.list_ids());
    node.stop_with_empty_store("rt");
}

#[test]
fn routed_pods_reach_each_other_and_the_host_over_tcp_on_both_families() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start(ROUTED_NETWORK);
    // The host's own addresses live on a test device in knid's private host netns.
    let src = node.host_test_device("hostsrc0", None, true);
    let mut rtnl = node.host_rtnl();
    for addr in [HOST_V4, HOST_V6] {
        rtnl.add_address(src.index, IpNet::from(ip(addr)))
            .unwrap_or_else(|e| panic!("add {addr} to {}: {e}", src.name));
    }
    let (a_ns, a) = attach(&node, "pod-a");
    let (b_ns, b) = attach(&node, "pod-b");
    let host = node.host_path();

    for (family, host_ip) in [("ipv4", HOST_V4), ("ipv6", HOST_V6)] {
        let a_ip = testkit::ip_of(&a.interfaces[0], family).0.addr();
        let b_ip = testkit::ip_of(&b.interfaces[0], family).0.addr();
        testkit::tcp_exchange(&b_ns, b_ip, &a_ns);
        testkit::tcp_exchange(&a_ns, a_ip, &b_ns);
        testkit::tcp_exchange(&a_ns, a_ip, host);
        testkit::tcp_exchange(&b_ns, b_ip, host);
        testkit::tcp_exchange(host, ip(host_ip), &a_ns);
    }

    for id in ["pod-a", "pod-b"] {
        node.client()
            .detach(&testkit::detach_req(id), RPC)
            .unwrap_or_else(|e| panic!("Detach {id}: {e}"));
    }
    node.wait_no_kn_links();
    node.wait_capacity_used("rt", 0);
}
