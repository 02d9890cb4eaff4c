//! Attach and detach end to end: what knid answers is checked against the kernel (netlink from
//! the test), traffic flows between two sandboxes over IPv4 and IPv6, and detach leaves nothing —
//! not in the kernel, not in the API, not in the store.

use knid_transport::pb;
use testkit::{tcp_exchange, TestNode, BRIDGE, RPC};

#[test]
fn two_sandboxes_get_working_dual_stack_veths_and_detach_removes_everything() {
    if !testkit::privileged() {
        return;
    }
    let mut node = TestNode::start("");
    let client = node.client();
    let pods = [("pod-a", node.netns("a")), ("pod-b", node.netns("b"))];

    let mut results = Vec::new();
    for (id, netns) in &pods {
        let sandbox = client
            .attach(&node.attach_req(id, netns, "eth0"), RPC)
            .expect("Attach");
        assert_eq!(sandbox.id, *id);
        assert_eq!(sandbox.state, "attached");
        assert_eq!(sandbox.interfaces.len(), 1);
        let iface = &sandbox.interfaces[0];
        assert_eq!((iface.name.as_str(), iface.kind.as_str()), ("eth0", "veth"));
        assert_eq!(iface.network, "default");
        assert_eq!(iface.mtu, 1500);
        let (v4, gw4) = testkit::ip_of(iface, "ipv4");
        let (v6, gw6) = testkit::ip_of(iface, "ipv6");
        assert!("10.88.0.0/24"
            .parse::<ipnet::IpNet>()
            .expect("cidr")
            .contains(&v4));
        assert!("fd00:88::/64"
            .parse::<ipnet::IpNet>()
            .expect("cidr")
            .contains(&v6));
        assert_eq!((v4.prefix_len(), v6.prefix_len()), (24, 64));
        assert_eq!(gw4.to_string(), "10.88.0.1");
        assert_eq!(gw6.to_string(), "fd00:88::1");
        testkit::assert_pod_side(netns, iface);
        node.assert_host_side(iface);
        results.push(sandbox);
    }
    let (a, b) = (&results[0].interfaces[0], &results[1].interfaces[0]);
    assert_ne!(a.host_ifname, b.host_ifname);
    assert_ne!(testkit::ip_of(a, "ipv4").0, testkit::ip_of(b, "ipv4").0);
    assert_ne!(testkit::ip_of(a, "ipv6").0, testkit::ip_of(b, "ipv6").0);
    assert_eq!(node.bridge_ports(BRIDGE).len(), 2);
    // The bridge's MAC is pinned, not borrowed from its lowest port (netavark#844).
    let bridge_mac = |node: &TestNode| {
        let link = node.host_rtnl().link_by_name(BRIDGE).expect("look up");
        link.expect("bridge exists").mac.expect("bridge has a mac")
    };
    assert_eq!(bridge_mac(&node), knid_core::node::bridge_mac(BRIDGE));

    for family in ["ipv4", "ipv6"] {
        tcp_exchange(&pods[0].1, testkit::ip_of(a, family).0.addr(), &pods[1].1);
        tcp_exchange(&pods[1].1, testkit::ip_of(b, family).0.addr(), &pods[0].1);
    }

    for (id, _) in &pods {
        client
            .detach(&testkit::detach_req(id), RPC)
            .expect("Detach");
    }
    node.assert_host_clean();
    for sandbox in &results {
        let host_name = &sandbox.interfaces[0].host_ifname;
        assert!(
            node.host_rtnl()
                .link_by_name(host_name)
                .expect("look up")
                .is_none(),
            "{host_name} left in the host netns"
        );
    }
    for (_, netns) in &pods {
        testkit::wait_for("eth0 gone from the sandbox", testkit::SETTLE, || {
            testkit::link_in(netns, "eth0").is_none()
        });
    }
    node.wait_capacity_used("default", 0);
    assert_eq!(bridge_mac(&node), knid_core::node::bridge_mac(BRIDGE));
    assert!(node.list_ids().is_empty(), "List not empty");
    for (id, _) in &pods {
        node.assert_not_found(id);
    }
    drop(client);

    node.stop_with_empty_store("default");
}

#[test]
fn custom_mac_mtu_and_static_ips_are_honoured_in_the_kernel() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    let netns = node.netns("custom");
    let mut req = node.attach_req("pod-custom", &netns, "eth0");
    req.interfaces[0].mac = "02:42:ac:11:00:2a".to_owned();
    req.interfaces[0].mtu = 1400;
    req.interfaces[0].static_ips = vec!["10.88.0.200".to_owned(), "fd00:88::200".to_owned()];
    let sandbox = node.client().attach(&req, RPC).expect("Attach");
    let iface = &sandbox.interfaces[0];
    assert_eq!(iface.mac, "02:42:ac:11:00:2a");
    assert_eq!(iface.mtu, 1400);
    assert_eq!(
        testkit::ip_of(iface, "ipv4").0.to_string(),
        "10.88.0.200/24"
    );
    assert_eq!(
        testkit::ip_of(iface, "ipv6").0.to_string(),
        "fd00:88::200/64"
    );

    let link = testkit::link_in(&netns, "eth0").expect("eth0 in the sandbox");
    assert_eq!(link.mac, Some([0x02, 0x42, 0xac, 0x11, 0x00, 0x2a]));
    assert_eq!(link.mtu, 1400);
    let addrs = testkit::addresses_in(&netns, "eth0");
    for want in ["10.88.0.200/24", "fd00:88::200/64"] {
        let want: ipnet::IpNet = want.parse().expect("cidr");
        assert!(addrs.contains(&want), "{want} not on eth0: {addrs:?}");
    }
    testkit::assert_pod_side(&netns, iface);
    node.assert_host_side(iface);
    let host = node
        .host_rtnl()
        .link_by_name(&iface.host_ifname)
        .expect("look up host end")
        .expect("host end exists");
    assert_eq!(host.mtu, 1400, "host end MTU follows the pod end");
    assert_eq!(
        node.bridge(BRIDGE).mtu,
        1500,
        "a 1400-MTU pod lowered the bridge for every pod"
    );

    node.client()
        .detach(&testkit::detach_req("pod-custom"), RPC)
        .expect("Detach");
    node.assert_host_clean();
    node.wait_capacity_used("default", 0);
}

#[test]
fn detaching_one_of_two_interfaces_leaves_the_other_as_inspect_reports_it() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    let netns = node.netns("dual");
    let mut req = node.attach_req("pod-dual", &netns, "eth0");
    let mut second = req.interfaces[0].clone();
    second.name = "eth1".to_owned();
    req.interfaces.push(second);
    let sandbox = node.client().attach(&req, RPC).expect("Attach");
    let names: Vec<&str> = sandbox.interfaces.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["eth0", "eth1"]);
    for iface in &sandbox.interfaces {
        node.assert_host_side(iface);
    }
    assert_eq!(node.capacity_used("default"), 4);

    let mut only_eth1 = testkit::detach_req("pod-dual");
    only_eth1.ifname = "eth1".to_owned();
    node.client().detach(&only_eth1, RPC).expect("Detach eth1");
    testkit::wait_for("eth1 gone from the sandbox", testkit::SETTLE, || {
        testkit::link_in(&netns, "eth1").is_none()
    });
    node.wait_capacity_used("default", 2);
    let inspected = node.inspect("pod-dual");
    assert_eq!(inspected.interfaces.len(), 1);
    assert_eq!(inspected.interfaces[0], sandbox.interfaces[0]);
    assert!(
        inspected.generation > sandbox.generation,
        "generation did not bump"
    );
    // The remaining interface still has everything knid reports for it, default routes included.
    testkit::assert_pod_side(&netns, &inspected.interfaces[0]);
    node.assert_host_side(&inspected.interfaces[0]);
    assert_eq!(node.host_kn_links().len(), 1);
}

#[test]
fn check_verifies_a_veth_against_the_kernel_and_names_what_differs() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    let client = node.client();
    let netns = node.netns("chk");
    let sandbox = client
        .attach(&node.attach_req("chk", &netns, "eth0"), RPC)
        .expect("Attach");
    let req = pb::CheckRequest {
        sandbox_id: "chk".into(),
        ifname: "eth0".into(),
        ..Default::default()
    };
    client.check(&req, RPC).expect("Check of a healthy pod");
    // The pod's MAC changed behind knid's back.
    let mut pod = testkit::rtnl_in(&netns);
    let eth0 = pod.link_by_name("eth0").expect("dump").expect("eth0");
    pod.set_mac(eth0.index, [0x02, 0x11, 0x22, 0x33, 0x44, 0x55])
        .expect("set MAC");
    let message = testkit::expect_code(
        client.check(&req, RPC),
        ttrpc::Code::FAILED_PRECONDITION,
        "Check",
    );
    assert!(
        message.contains(&format!("not {}", sandbox.interfaces[0].mac)),
        "{message}"
    );
    client
        .detach(&testkit::detach_req("chk"), RPC)
        .expect("Detach");
}

#[test]
fn a_bridge_deleted_behind_knids_back_fails_the_next_attach_until_setup_node_network() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    let client = node.client();
    let first = node.netns("first");
    client
        .attach(&node.attach_req("first", &first, "eth0"), RPC)
        .expect("Attach first");
    let old = node.bridge(BRIDGE).index;
    // knid remembers the bridge's index from the first attach; the bridge goes (and its port
    // with it), so the second attach's veth fails on the stale index, and the look-up that
    // follows finds no bridge: knid does not set one up behind its pods' backs.
    assert!(node
        .host_rtnl()
        .delete_link_by_name(BRIDGE)
        .expect("delete the bridge"));
    let second = node.netns("second");
    let message = testkit::expect_code(
        client.attach(&node.attach_req("second", &second, "eth0"), RPC),
        ttrpc::Code::FAILED_PRECONDITION,
        "Attach after the bridge was deleted",
    );
    assert!(
        message.contains("network default: bridge knid0 is missing")
            && message.contains("SetupNodeNetwork"),
        "{message}"
    );
    assert!(
        node.host_rtnl()
            .link_by_name(BRIDGE)
            .expect("look up")
            .is_none(),
        "the failed attach set the bridge up"
    );
    testkit::wait_only_lo(&second);
    node.assert_not_found("second");

    client
        .setup_node_network(RPC)
        .expect("SetupNodeNetwork (knid.v1)");
    let sandbox = client
        .attach(&node.attach_req("second", &second, "eth0"), RPC)
        .expect("Attach after SetupNodeNetwork");
    let bridge = node.bridge(BRIDGE);
    assert_ne!(bridge.index, old, "a new bridge");
    assert!(bridge.up, "{BRIDGE} is up again");
    let iface = &sandbox.interfaces[0];
    node.assert_host_side(iface);
    testkit::assert_pod_side(&second, iface);
    for id in ["first", "second"] {
        client
            .detach(&testkit::detach_req(id), RPC)
            .expect("Detach");
    }
    node.assert_host_clean();
}

#[test]
fn an_mtu_above_the_networks_is_refused_and_leaves_nothing() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    let netns = node.netns("jumbo");
    let mut req = node.attach_req("pod-jumbo", &netns, "eth0");
    req.interfaces[0].mtu = 9000;
    let err = node
        .client()
        .attach(&req, RPC)
        .expect_err("a 9000 MTU on a 1500 network");
    let text = err.to_string();
    assert!(
        text.contains("interfaces[0].mtu") && text.contains("1500"),
        "the refusal does not name the field and the network's MTU: {text}"
    );
    node.assert_not_found("pod-jumbo");
    node.assert_host_clean();
    assert_eq!(testkit::links_in(&netns).len(), 1, "only lo in the sandbox");
    assert_eq!(node.bridge(BRIDGE).mtu, 1500);
}

/// Sandboxes after one another in one netns: each Detach must free `eth0` before it replies.
const REUSES: usize = 100;

#[test]
fn attach_detach_then_attach_of_another_sandbox_into_the_same_netns_never_fails() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    let netns = node.netns("reused");
    let client = node.client();
    for i in 0..REUSES {
        let id = format!("reuse-{i}");
        client
            .attach(&node.attach_req(&id, &netns, "eth0"), RPC)
            .unwrap_or_else(|e| panic!("Attach {id} after {i} detaches in this netns: {e}"));
        client
            .detach(&testkit::detach_req(&id), RPC)
            .unwrap_or_else(|e| panic!("Detach {id}: {e}"));
    }
    testkit::wait_only_lo(&netns);
    node.wait_no_kn_links();
    node.wait_capacity_used("default", 0);
}

/// Whether the bridge port `name` in the node's host netns is in hairpin mode, as `ip -d` reads it.
fn hairpin_of(node: &TestNode, name: &str) -> bool {
    let out = testkit::cni::tool_in(
        node.host_path(),
        "ip",
        &["-d", "-j", "link", "show", "dev", name],
    );
    let links: serde_json::Value = serde_json::from_str(&out).expect("ip -j output");
    links[0]["linkinfo"]["info_slave_data"]["hairpin"]
        .as_bool()
        .unwrap_or_else(|| panic!("{name} is not a bridge port: {out}"))
}

#[test]
fn bridge_ports_are_in_hairpin_mode_unless_the_network_turns_it_off() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start(
        r#"
[networks.default]
bridge = "knid0"
subnets = ["10.88.0.0/24"]

[networks.nohairpin]
bridge = "nohp0"
subnets = ["10.77.0.0/24"]
hairpin = false
"#,
    );
    let client = node.client();
    let on_ns = node.netns("hp-on");
    let on = client
        .attach(&node.attach_req("hp-on", &on_ns, "eth0"), RPC)
        .expect("Attach on the default network");
    assert!(
        hairpin_of(&node, &on.interfaces[0].host_ifname),
        "a pod cannot reach itself through a translated address"
    );
    let off_ns = node.netns("hp-off");
    let mut req = node.attach_req("hp-off", &off_ns, "eth0");
    req.interfaces[0].network = "nohairpin".to_owned();
    let off = client
        .attach(&req, RPC)
        .expect("Attach on the nohairpin network");
    assert!(!hairpin_of(&node, &off.interfaces[0].host_ifname));
    for id in ["hp-on", "hp-off"] {
        client
            .detach(&testkit::detach_req(id), RPC)
            .unwrap_or_else(|e| panic!("Detach {id}: {e}"));
    }
    node.wait_no_kn_links();
}
