//! The API is idempotent (docs/api.md#conventions): a repeated Attach returns the existing result
//! and creates nothing, a conflicting one is AlreadyExists naming the field, Detach of something
//! unknown or already detached succeeds.

use knid_transport::pb;
use testkit::{TestNode, RPC};

fn link_names(links: Vec<knid_netops::Link>) -> Vec<String> {
    let mut names: Vec<String> = links.into_iter().map(|l| l.name).collect();
    names.sort();
    names
}

#[test]
fn repeated_identical_attach_returns_the_same_sandbox_and_creates_nothing() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    let netns = node.netns("twice");
    let req = node.attach_req("pod-twice", &netns, "eth0");
    let first = node.client().attach(&req, RPC).expect("first Attach");
    let host_links = link_names(testkit::links_in(node.host_path()));
    let pod_links = link_names(testkit::links_in(&netns));
    let used = node.capacity_used("default");
    assert_eq!(used, 2, "one IPv4 and one IPv6 address reserved");

    let second = node.client().attach(&req, RPC).expect("second Attach");
    assert_eq!(
        second, first,
        "a repeated Attach must return the same Sandbox"
    );
    assert_eq!(link_names(testkit::links_in(node.host_path())), host_links);
    assert_eq!(link_names(testkit::links_in(&netns)), pod_links);
    assert_eq!(node.capacity_used("default"), used);
    assert_eq!(node.list_ids(), vec!["pod-twice".to_owned()]);
    testkit::assert_pod_side(&netns, &first.interfaces[0]);
}

#[test]
fn concurrent_identical_attaches_both_succeed_with_one_result() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    let netns = node.netns("racy");
    let req = node.attach_req("pod-racy", &netns, "eth0");
    let replies: Vec<pb::Sandbox> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|_| s.spawn(|| node.client().attach(&req, RPC).expect("Attach")))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("attach thread"))
            .collect()
    });
    assert_eq!(replies[0], replies[1]);
    assert_eq!(node.host_kn_links().len(), 1, "exactly one host veth");
    assert_eq!(node.capacity_used("default"), 2);
    testkit::assert_pod_side(&netns, &replies[0].interfaces[0]);
}

#[test]
fn conflicting_attach_is_already_exists_naming_the_field() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    let netns = node.netns("conflict");
    let other_netns = node.netns("elsewhere");
    let req = node.attach_req("pod-conflict", &netns, "eth0");
    let original = node.client().attach(&req, RPC).expect("Attach");

    let mut other_mac = req.clone();
    other_mac.interfaces[0].mac = "02:00:00:00:00:99".to_owned();
    let mut other_mtu = req.clone();
    other_mtu.interfaces[0].mtu = 1280;
    let mut other_path = req.clone();
    other_path.netns_path = other_netns.display().to_string();
    for (conflict, field) in [
        (&other_mac, "interfaces[0].mac"),
        (&other_mtu, "interfaces[0].mtu"),
        (&other_path, "netns_path"),
    ] {
        let message = testkit::expect_code(
            node.client().attach(conflict, RPC),
            ttrpc::Code::ALREADY_EXISTS,
            field,
        );
        assert!(
            testkit::names_field(&message, field),
            "{message:?} does not name {field}"
        );
    }

    // The refused requests changed nothing.
    let inspected = node.inspect("pod-conflict");
    assert_eq!(inspected, original);
    testkit::assert_pod_side(&netns, &original.interfaces[0]);
    assert!(
        testkit::link_in(&other_netns, "eth0").is_none(),
        "something was created in the other netns"
    );
    assert_eq!(node.host_kn_links().len(), 1);
    assert_eq!(node.capacity_used("default"), 2);
}

#[test]
fn static_ip_held_by_another_sandbox_is_already_exists_and_leaves_nothing() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    let first_ns = node.netns("holder");
    let second_ns = node.netns("taker");
    let mut req = node.attach_req("pod-holder", &first_ns, "eth0");
    req.interfaces[0].static_ips = vec!["10.88.0.50".to_owned()];
    node.client().attach(&req, RPC).expect("Attach holder");

    req.sandbox_id = "pod-taker".to_owned();
    req.netns_path = second_ns.display().to_string();
    let message = testkit::expect_code(
        node.client().attach(&req, RPC),
        ttrpc::Code::ALREADY_EXISTS,
        "static address held by another sandbox",
    );
    assert!(message.contains("10.88.0.50"), "{message:?}");
    assert!(testkit::link_in(&second_ns, "eth0").is_none());
    assert_eq!(node.list_ids(), ["pod-holder"]);
    assert_eq!(node.host_kn_links().len(), 1);
    assert_eq!(node.capacity_used("default"), 2);
}

#[test]
fn detach_of_unknown_sandbox_or_interface_succeeds() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    node.client()
        .detach(&testkit::detach_req("never-attached"), RPC)
        .expect("Detach of an unknown sandbox");
    let mut one_if = testkit::detach_req("never-attached");
    one_if.ifname = "eth3".to_owned();
    node.client()
        .detach(&one_if, RPC)
        .expect("Detach of an unknown interface of an unknown sandbox");
    assert!(node.list_ids().is_empty());

    // An unknown interface of a known sandbox: success, and the sandbox is untouched.
    let netns = node.netns("known");
    let sandbox = node
        .client()
        .attach(&node.attach_req("pod-known", &netns, "eth0"), RPC)
        .expect("Attach");
    let mut other_if = testkit::detach_req("pod-known");
    other_if.ifname = "eth7".to_owned();
    node.client()
        .detach(&other_if, RPC)
        .expect("Detach of an unknown interface of a known sandbox");
    let inspected = node.inspect("pod-known");
    assert_eq!(inspected, sandbox);
    testkit::assert_pod_side(&netns, &sandbox.interfaces[0]);
}

#[test]
fn detach_twice_succeeds_and_leaves_nothing() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    let netns = node.netns("gone");
    node.client()
        .attach(&node.attach_req("pod-gone", &netns, "eth0"), RPC)
        .expect("Attach");
    for round in ["first", "second"] {
        node.client()
            .detach(&testkit::detach_req("pod-gone"), RPC)
            .unwrap_or_else(|e| panic!("{round} Detach: {e}"));
    }
    node.assert_host_clean();
    assert!(testkit::link_in(&netns, "eth0").is_none());
    assert!(node.list_ids().is_empty());
    node.assert_not_found("pod-gone");
    node.wait_capacity_used("default", 0);
}
