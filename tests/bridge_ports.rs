//! A Linux bridge takes at most 1,023 ports. On a bridge network whose pool is far larger
//! (a /16), that is the network's real capacity: knid reports it before it is reached (Networks,
//! NetworkSchedulable, metrics), and the 1,024th pod gets ResourceExhausted naming the network
//! and the limit, with nothing left behind, never an INTERNAL "Exchange full". And a port makes
//! no IPv6 address of its own.

use std::path::Path;

use knid_transport::pb;
use testkit::{expect_code, TestNode, RPC};

const WIDE: &str = r#"
[networks.wide]
bridge = "kwide0"
subnets = ["10.99.0.0/16"]
"#;

/// Pods share one netns, each with its own interface name, so 1,023 of them cost 1,023 veths
/// and no more.
fn req(node: &TestNode, i: usize, netns: &Path) -> pb::AttachRequest {
    let mut req = node.attach_req(&format!("p{i}"), netns, &format!("e{i}"));
    req.interfaces[0].network = "wide".to_owned();
    req
}

fn ports(node: &TestNode) -> pb::BridgePorts {
    node.network("wide")
        .bridge_ports
        .into_option()
        .expect("a bridge network reports its ports")
}

#[test]
fn the_1024th_pod_on_a_bridge_gets_resource_exhausted_and_capacity_said_so_first() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start(WIDE);
    let netns = node.netns("many");
    let client = node.client();
    let limit = 1023;
    let start = ports(&node);
    assert_eq!((start.bridge.as_str(), start.total), ("kwide0", limit));
    assert_eq!((start.used, start.free), (0, limit));
    for i in 0..limit as usize {
        client
            .attach(&req(&node, i, &netns), RPC)
            .unwrap_or_else(|e| panic!("attach {i}: {e}"));
    }
    // Just before the next attach: no free port, the network not schedulable, while its pool
    // still has ~64,000 addresses.
    let full = ports(&node);
    assert_eq!((full.used, full.free), (limit, 0), "{full:?}");
    let net = node.network("wide");
    assert!(!net.schedulable && net.ready, "{net:?}");
    assert!(net.capacity[0].free > 60_000, "{:?}", net.capacity);
    let cond = node.condition("NetworkSchedulable/wide");
    assert!(!cond.status && cond.reason == "Exhausted", "{cond:?}");
    assert!(
        cond.message.contains("kwide0") && cond.message.contains("1023 ports"),
        "{cond:?}"
    );
    assert!(
        node.client().status(RPC).expect("Status").ready,
        "a full bridge stops new pods, not the node"
    );
    let metrics = client.metrics(RPC).expect("Metrics");
    assert!(
        metrics
            .contains("knid_bridge_ports{bridge=\"kwide0\",network=\"wide\",state=\"used\"} 1023")
            && metrics.contains("knid_network_schedulable{network=\"wide\"} 0"),
        "{metrics}"
    );

    let message = expect_code(
        client.attach(&req(&node, 1023, &netns), RPC),
        ttrpc::Code::RESOURCE_EXHAUSTED,
        "the 1,024th pod",
    );
    assert!(
        message.contains("network wide")
            && message.contains("kwide0")
            && message.contains("1023 ports"),
        "{message}"
    );
    // Nothing of it is left: no record, no address, no link.
    node.assert_not_found("p1023");
    assert_eq!(node.capacity_used("wide"), limit);
    assert!(testkit::link_in(&netns, "e1023").is_none());
    assert_eq!(ports(&node).used, limit);

    // A pod gone frees its port: the next one fits again.
    client
        .detach(&testkit::detach_req("p0"), RPC)
        .expect("detach p0");
    testkit::wait_for(
        "p0's port freed",
        std::time::Duration::from_secs(30),
        || ports(&node).free == 1,
    );
    assert!(node.network("wide").schedulable);
    client
        .attach(&req(&node, 1023, &netns), RPC)
        .expect("attach once a port is free");
}

/// The counts knid keeps between its own port changes (a look costs ~40 ms with 5,000 ports)
/// still show a port put on the bridge, or taken off it, behind knid's back within a second.
#[test]
fn a_port_added_or_removed_behind_knids_back_is_counted_within_a_second() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start(WIDE);
    assert_eq!(ports(&node).used, 0);
    let by_hand = |add: bool| {
        knid_netops::run_in(&node.host(), move || {
            let mut rt = knid_netops::Rtnl::open().expect("netlink socket");
            if !add {
                assert!(rt.delete_link_by_name("xport0").expect("delete"));
                return;
            }
            let bridge = rt.link_by_name("kwide0").expect("look up").expect("bridge");
            let end = |name: &str| knid_netops::VethEnd {
                name: name.to_owned(),
                mtu: None,
                mac: None,
            };
            let spec = knid_netops::VethSpec {
                host: end("xport0"),
                peer: end("xport1"),
                peer_netns: None,
                host_controller: Some(bridge.index),
            };
            rt.create_veth(&spec).expect("a port by hand");
        })
        .expect("run in knid's netns")
    };
    by_hand(true);
    // Generous against a busy machine; the counts are kept for at most a second.
    let limit = std::time::Duration::from_secs(10);
    testkit::wait_for("the port counted", limit, || ports(&node).used == 1);
    by_hand(false);
    testkit::wait_for("the port gone", limit, || ports(&node).used == 0);
}

/// knid's host end of a veth on a bridge has IPv6 turned off: no address of its own (no
/// link-local address to detect, report and route) and no multicast route in the node's local
/// table, which the node's look-up for every multicast packet a bridge hands it goes through
/// (with thousands of ports that work kept the node's CPU busy), while the pod's end has its
/// link-local address.
#[test]
fn a_pods_host_end_on_a_bridge_has_no_ipv6() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    let netns = node.netns("v6");
    let sandbox = node
        .client()
        .attach(&node.attach_req("pod-v6", &netns, "eth0"), RPC)
        .expect("attach on the dual-stack bridge network");
    let host_name = &sandbox.interfaces[0].host_ifname;
    // The pair's link-local addresses come once it has carrier (the kernel's link watch, up to
    // a second after the pod end is up): the host end's would have come with the pod end's.
    testkit::wait_for(
        "the pod end's link-local address",
        std::time::Duration::from_secs(10),
        || {
            testkit::addresses_in(&netns, "eth0")
                .iter()
                .any(|a| testkit::is_link_local(a.addr()))
        },
    );
    let v6: Vec<_> = testkit::addresses_in(node.host_path(), host_name)
        .into_iter()
        .filter(|a| a.addr().is_ipv6())
        .collect();
    assert!(v6.is_empty(), "{host_name} has IPv6 addresses: {v6:?}");
    let key = format!("net/ipv6/conf/{host_name}/disable_ipv6");
    assert_eq!(
        testkit::kernel::sysctl_in(node.host_path(), &key),
        "1",
        "{key}"
    );
    // The pod end's own routes, read the same way, show the listing names devices.
    assert!(
        testkit::kernel::ipv6_routes_via(&netns, "eth0") > 0,
        "eth0 has no IPv6 route"
    );
    let routes = testkit::kernel::ipv6_routes_via(node.host_path(), host_name);
    assert_eq!(routes, 0, "{host_name} has IPv6 routes");
}

/// A host end with no IPv6 at all (its MTU below IPv6's 1,280: the kernel gives it none) has
/// no address to be kept from: its attach goes through.
#[test]
fn a_pod_on_a_bridge_below_ipv6s_mtu_attaches() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start(
        "[networks.small]\nbridge = \"ksmall0\"\nsubnets = [\"10.98.0.0/24\"]\nmtu = 1200\n",
    );
    let netns = node.netns("small");
    let mut req = node.attach_req("pod-small", &netns, "eth0");
    req.interfaces[0].network = "small".to_owned();
    let sandbox = node
        .client()
        .attach(&req, RPC)
        .expect("attach on a bridge network below IPv6's MTU");
    assert_eq!(sandbox.interfaces[0].mtu, 1200);
    let eth0 = testkit::link_in(&netns, "eth0").expect("eth0 in the pod netns");
    assert!(eth0.up, "{eth0:?}");
}
