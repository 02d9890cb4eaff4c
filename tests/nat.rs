//! knid's nf_tables table end to end: egress masquerade and host ports, with an "outside"
//! namespace routed through the node (a stand-in for the rest of the network), all inside the
//! test node's private namespaces. The outside has no route back to the pod subnets, so a pod
//! reaches it only when the node masquerades.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use knid_transport::pb;
use testkit::cni::tool_in;
use testkit::{TestNode, RPC};

/// The node's address towards the outside, and the outside's own.
const NODE_V4: &str = "192.0.2.1";
const NODE_V6: &str = "2001:db8::1";
const OUTSIDE_V4: &str = "192.0.2.2";
const OUTSIDE_V6: &str = "2001:db8::2";

fn ip(text: &str) -> IpAddr {
    text.parse().expect("an IP address")
}

/// An "outside" netns linked to the node by a veth (`up0` on the node), with addresses on
/// both ends and no route to the pods.
fn outside(node: &TestNode) -> PathBuf {
    let out = node.netns("outside");
    let host = node.host_path();
    tool_in(
        host,
        "ip",
        &["link", "add", "up0", "type", "veth", "peer", "name", "out0"],
    );
    // `ip link set … netns` takes a name or a pid, not a path: move it by the netns's fd.
    let ns = knid_netops::NetnsHandle::open(&out).expect("open outside netns");
    let mut rtnl = testkit::rtnl_in(host);
    let out0 = rtnl.link_by_name("out0").expect("look up").expect("out0");
    rtnl.move_to_netns(out0.index, &ns, None)
        .expect("move out0 to the outside");
    for (ns_path, dev, v4, v6) in [
        (host, "up0", NODE_V4, NODE_V6),
        (out.as_path(), "out0", OUTSIDE_V4, OUTSIDE_V6),
    ] {
        tool_in(
            ns_path,
            "ip",
            &["addr", "add", &format!("{v4}/24"), "dev", dev],
        );
        tool_in(
            ns_path,
            "ip",
            &["addr", "add", &format!("{v6}/64"), "dev", dev, "nodad"],
        );
        tool_in(ns_path, "ip", &["link", "set", dev, "up"]);
        tool_in(ns_path, "ip", &["link", "set", "lo", "up"]);
    }
    out
}

/// Attaches `id` on network `network` in a new netns; its pod addresses (IPv4, IPv6).
fn attach(
    node: &TestNode,
    id: &str,
    network: &str,
    mappings: Vec<pb::PortMapping>,
) -> (PathBuf, IpAddr, IpAddr) {
    let netns = node.netns(id);
    let mut req = node.attach_req(id, &netns, "eth0");
    req.interfaces[0].network = network.to_owned();
    req.port_mappings = mappings;
    let sandbox = node
        .client()
        .attach(&req, RPC)
        .unwrap_or_else(|e| panic!("Attach {id}: {e}"));
    let addr = |v6: bool| {
        sandbox.interfaces[0]
            .ips
            .iter()
            .map(|c| c.address.parse::<ipnet::IpNet>().expect("CIDR").addr())
            .find(|a| a.is_ipv6() == v6)
            .expect("an address of each family")
    };
    (netns, addr(false), addr(true))
}

fn sock(addr: IpAddr, port: u16) -> SocketAddr {
    SocketAddr::new(addr, port)
}

/// The source address the outside sees when `pod` connects to it over TCP, per family.
fn seen_from_outside(outside: &Path, pod: &Path) -> [IpAddr; 2] {
    [OUTSIDE_V4, OUTSIDE_V6].map(|o| testkit::tcp_via(outside, sock(ip(o), 0), pod, None))
}

const NETWORKS: &str = r#"
[networks.default]
bridge = "knid0"
subnets = ["10.88.0.0/24", "fd00:88::/64"]

[networks.rt]
kind = "routed"
subnets = ["10.77.0.0/24", "fd00:77::/64"]

[networks.plain]
bridge = "knid1"
subnets = ["10.66.0.0/24", "fd00:66::/64"]
masquerade = false
"#;

#[test]
fn pods_reach_the_outside_as_the_node_unless_masquerade_is_off() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start(NETWORKS);
    let out = outside(&node);
    for network in ["default", "rt"] {
        let (pod, ..) = attach(&node, &format!("masq-{network}"), network, Vec::new());
        assert_eq!(
            seen_from_outside(&out, &pod),
            [ip(NODE_V4), ip(NODE_V6)],
            "pod on {network} seen by the outside"
        );
    }
    // Without masquerade the outside needs a route back, and sees the pod itself.
    tool_in(
        &out,
        "ip",
        &["route", "add", "10.66.0.0/24", "via", NODE_V4],
    );
    tool_in(
        &out,
        "ip",
        &["-6", "route", "add", "fd00:66::/64", "via", NODE_V6],
    );
    let (pod, v4, v6) = attach(&node, "plain", "plain", Vec::new());
    assert_eq!(seen_from_outside(&out, &pod), [v4, v6]);
}

#[test]
fn pod_to_pod_traffic_on_the_node_is_not_masqueraded() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start(NETWORKS);
    let (a, a4, a6) = attach(&node, "a", "default", Vec::new());
    let (b, b4, b6) = attach(&node, "b", "default", Vec::new());
    assert_eq!(testkit::tcp_exchange(&b, b4, &a), a4);
    assert_eq!(testkit::tcp_exchange(&b, b6, &a), a6);
    // Across networks too: the routed pod reaches the bridge pod with its own address.
    let (r, r4, _) = attach(&node, "r", "rt", Vec::new());
    assert_eq!(testkit::tcp_exchange(&a, a4, &r), r4);
}

#[test]
fn knids_table_is_rebuilt_after_deletion_by_setup_node_network_and_others_are_untouched() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start(NETWORKS);
    let host = node.host_path();
    tool_in(host, "nft", &["add", "table", "ip", "kube-proxy"]);
    let listing = tool_in(host, "nft", &["list", "table", "inet", "knid"]);
    for chain in ["masq-default", "masq-rt", "postrouting", "hostports"] {
        assert!(listing.contains(&format!("chain {chain} ")), "{listing}");
    }
    assert!(!listing.contains("masq-plain"), "{listing}");
    tool_in(host, "nft", &["delete", "table", "inet", "knid"]);
    node.client()
        .setup_node_network(RPC)
        .expect("SetupNodeNetwork");
    let again = tool_in(host, "nft", &["list", "table", "inet", "knid"]);
    assert_eq!(again, listing);
    let tables = tool_in(host, "nft", &["list", "tables"]);
    assert!(tables.contains("table ip kube-proxy"), "{tables}");
}
