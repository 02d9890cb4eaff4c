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
    node.attach_pod(id, |req| {
        req.interfaces[0].network = network.to_owned();
        req.port_mappings = mappings;
    })
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

fn mapping(protocol: &str, host_port: u32, container_port: u32) -> pb::PortMapping {
    pb::PortMapping {
        host_port,
        container_port,
        protocol: protocol.to_owned(),
        ..Default::default()
    }
}

/// The elements of knid's host-port maps, as `nft` lists them.
fn listed_elements(node: &TestNode) -> Vec<String> {
    let listing = tool_in(node.host_path(), "nft", &["list", "table", "inet", "knid"]);
    listing
        .lines()
        .filter(|l| l.contains("elements = "))
        .map(|l| l.trim().to_owned())
        .collect()
}

/// Whether a TCP connection from `client` to `to` is refused or times out.
fn tcp_closed(client: &Path, to: SocketAddr) -> bool {
    let ns = knid_netops::NetnsHandle::open(client).expect("open netns");
    knid_netops::run_in(&ns, || {
        std::net::TcpStream::connect_timeout(&to, std::time::Duration::from_secs(2))
    })
    .expect("enter netns")
    .is_err()
}

#[test]
fn host_ports_reach_the_pod_from_outside_the_node_and_other_pods_until_detach() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start(NETWORKS);
    let out = outside(&node);
    let host = node.host_path().to_owned();
    let mappings = vec![mapping("tcp", 8080, 80), mapping("udp", 5353, 53)];
    let (web, w4, w6) = attach(&node, "web", "default", mappings);
    let (client, c4, _) = attach(&node, "client", "default", Vec::new());
    let elements = listed_elements(&node);
    assert_eq!(elements.len(), 2, "{elements:?}");

    for (node_addr, pod, outside_addr, gateway) in [
        (ip(NODE_V4), w4, ip(OUTSIDE_V4), ip("10.88.0.1")),
        (ip(NODE_V6), w6, ip(OUTSIDE_V6), ip("fd00:88::1")),
    ] {
        // From outside the node: DNAT only, the pod sees the real client.
        let seen = testkit::tcp_via(&web, sock(pod, 80), &out, Some(sock(node_addr, 8080)));
        assert_eq!(seen, outside_addr, "TCP from outside to {node_addr}");
        let seen = testkit::udp_via(&web, sock(pod, 53), &out, sock(node_addr, 5353));
        assert_eq!(seen, Some(outside_addr), "UDP from outside to {node_addr}");
        // From the node itself (locally generated).
        testkit::tcp_via(&web, sock(pod, 80), &host, Some(sock(node_addr, 8080)));
        assert!(testkit::udp_via(&web, sock(pod, 53), &host, sock(node_addr, 5353)).is_some());
        // From another pod of the node (hairpin): masqueraded, so the answer comes back
        // through the node.
        let seen = testkit::tcp_via(&web, sock(pod, 80), &client, Some(sock(node_addr, 8080)));
        assert_eq!(seen, gateway, "TCP hairpin to {node_addr}");
        let seen = testkit::udp_via(&web, sock(pod, 53), &client, sock(node_addr, 5353));
        assert_eq!(seen, Some(gateway), "UDP hairpin to {node_addr}");
    }
    // IPv4 loopback of the node.
    testkit::tcp_via(&web, sock(w4, 80), &host, Some(sock(ip("127.0.0.1"), 8080)));
    let _ = c4;

    node.client()
        .detach(&testkit::detach_req("web"), RPC)
        .expect("Detach");
    assert!(
        listed_elements(&node).is_empty(),
        "{:?}",
        listed_elements(&node)
    );
    assert!(tcp_closed(&out, sock(ip(NODE_V4), 8080)));
}

#[test]
fn a_host_port_held_by_another_sandbox_is_refused_naming_it_and_nothing_changes() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start(NETWORKS);
    attach(&node, "holder", "default", vec![mapping("tcp", 8080, 80)]);
    let before = tool_in(node.host_path(), "nft", &["list", "table", "inet", "knid"]);
    let links = node.host_kn_links().len();
    let netns = node.netns("late");
    let mut req = node.attach_req("late", &netns, "eth0");
    req.port_mappings = vec![mapping("udp", 8080, 80), mapping("", 8080, 81)];
    let err = node.client().attach(&req, RPC).expect_err("port taken");
    let text = err.to_string();
    assert!(
        text.contains("AlreadyExists")
            || text.contains("ALREADY_EXISTS")
            || text.contains("already"),
        "{text}"
    );
    assert!(
        text.contains("port_mappings[1]") && text.contains("holder"),
        "{text}"
    );
    assert_eq!(
        tool_in(node.host_path(), "nft", &["list", "table", "inet", "knid"]),
        before
    );
    assert_eq!(node.host_kn_links().len(), links);
    assert!(!node.list_ids().contains(&"late".to_owned()));
    // The same port on another protocol is free.
    req.port_mappings.truncate(1);
    node.client().attach(&req, RPC).expect("udp 8080 is free");
}

#[test]
fn host_ports_are_rebuilt_after_a_crash_and_removed_by_gc() {
    if !testkit::privileged() {
        return;
    }
    let mut node = TestNode::start(NETWORKS);
    let mappings = vec![mapping("tcp", 8080, 80), mapping("sctp", 9, 9)];
    attach(&node, "web", "default", mappings);
    let elements = listed_elements(&node);
    assert_eq!(elements.len(), 2, "{elements:?}");
    nix::sys::signal::kill(node.pid(), nix::sys::signal::Signal::SIGKILL).expect("SIGKILL knid");
    node.wait_exit(std::time::Duration::from_secs(10));
    tool_in(
        node.host_path(),
        "nft",
        &["delete", "table", "inet", "knid"],
    );
    node.restart();
    assert_eq!(listed_elements(&node), elements);
    // GC with no valid sandbox (meant: allow_detach_all) detaches it, and its host ports go
    // with it.
    let resp = node
        .client()
        .garbage_collect(
            &pb::GarbageCollectRequest {
                allow_detach_all: true,
                ..Default::default()
            },
            RPC,
        )
        .expect("GarbageCollect");
    assert!(resp.errors.is_empty(), "{:?}", resp.errors);
    assert!(
        listed_elements(&node).is_empty(),
        "{:?}",
        listed_elements(&node)
    );
}

#[test]
fn a_thousand_attach_detach_cycles_with_host_ports_leave_nothing_in_the_table() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start(NETWORKS);
    let empty = tool_in(node.host_path(), "nft", &["list", "table", "inet", "knid"]);
    let cycles: usize = std::env::var("KNID_NAT_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let netns = node.netns("cycling");
    for i in 0..cycles {
        let id = format!("c{i}");
        let mut req = node.attach_req(&id, &netns, "eth0");
        req.port_mappings = vec![mapping("tcp", 8080, 80), mapping("udp", 8080, 80)];
        node.client()
            .attach(&req, RPC)
            .unwrap_or_else(|e| panic!("Attach {id}: {e}"));
        node.client()
            .detach(&testkit::detach_req(&id), RPC)
            .unwrap_or_else(|e| panic!("Detach {id}: {e}"));
    }
    assert_eq!(
        tool_in(node.host_path(), "nft", &["list", "table", "inet", "knid"]),
        empty
    );
}

#[test]
fn an_attach_interrupted_after_its_host_ports_leaves_no_element_and_frees_the_ports() {
    if !testkit::privileged() || !testkit::failpoints_built() {
        return;
    }
    const FAILPOINTS: &str = "KNID_FAILPOINTS";
    for action in ["abort", "error"] {
        let failpoint = format!("attach.host_ports_added={action}");
        let mut node = TestNode::start_with(NETWORKS, &[(FAILPOINTS, &failpoint)], &[]);
        let netns = node.netns("cut");
        let mut req = node.attach_req("cut", &netns, "eth0");
        req.port_mappings = vec![mapping("tcp", 8080, 80), mapping("udp", 5353, 53)];
        assert!(
            node.client().attach(&req, RPC).is_err(),
            "{action}: the attach answered though it was cut after its host ports"
        );
        node.set_env(FAILPOINTS, None);
        if action == "abort" {
            node.wait_exit(std::time::Duration::from_secs(10));
            // knid is gone; the elements it added are still in the kernel, for recovery.
            node.restart();
        }
        // An abort is rolled back by recovery at start-up, an error before the reply.
        node.assert_not_found("cut");
        assert!(
            listed_elements(&node).is_empty(),
            "{action}: elements left: {:?}",
            listed_elements(&node)
        );
        if action == "error" {
            // Disarm the failpoint (it is read at start-up).
            node.stop();
            node.restart();
        }
        // The ports are free: another sandbox takes them, then leaves nothing.
        let (again_ns, _, _) = attach(
            &node,
            "again",
            "default",
            vec![mapping("tcp", 8080, 80), mapping("udp", 5353, 53)],
        );
        assert_eq!(listed_elements(&node).len(), 2, "{action}");
        node.client()
            .detach(&testkit::detach_req("again"), RPC)
            .expect("Detach");
        assert!(listed_elements(&node).is_empty(), "{action}");
        // Both pods' veth pairs are gone with their pod ends.
        testkit::wait_only_lo(&netns);
        testkit::wait_only_lo(&again_ns);
    }
}
