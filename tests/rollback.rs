//! A failed Attach is all or nothing: whatever it created is removed, its addresses and records
//! are released, and nothing stale blocks the next attempt of the same sandbox.

use std::path::Path;

use knid_netops::NetnsHandle;
use testkit::{TestNode, RPC};

/// Creates a bridge named `name` inside the netns at `netns`, in knid's way.
fn occupy(netns: &Path, name: &str) -> knid_netops::Link {
    let ns = NetnsHandle::open(netns).expect("open netns");
    let mut rtnl = knid_netops::Rtnl::open_in(&ns).expect("netlink in netns");
    rtnl.create_bridge(name, None).expect("create squatter");
    rtnl.link_by_name(name)
        .expect("look up squatter")
        .expect("squatter exists")
}

/// Nothing of sandbox `id` is left: no host veth, no address reserved, no record.
fn assert_nothing_left(node: &TestNode, id: &str) {
    node.assert_host_clean();
    node.wait_capacity_used("default", 0);
    assert!(node.list_ids().is_empty(), "List not empty");
    node.assert_not_found(id);
}

#[test]
fn attach_onto_an_existing_interface_fails_cleanly_and_a_retry_with_another_name_works() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    let netns = node.netns("squatted");
    let squatter = occupy(&netns, "eth0");

    let message = testkit::expect_code(
        node.client()
            .attach(&node.attach_req("pod-squat", &netns, "eth0"), RPC),
        ttrpc::Code::FAILED_PRECONDITION,
        "attach onto an existing eth0",
    );
    assert!(
        message.contains("eth0") && message.contains("already exists"),
        "unclear error: {message:?}"
    );
    assert_nothing_left(&node, "pod-squat");
    assert_eq!(
        testkit::link_in(&netns, "eth0"),
        Some(squatter.clone()),
        "the pre-existing eth0 was touched"
    );

    let sandbox = node
        .client()
        .attach(&node.attach_req("pod-squat", &netns, "eth1"), RPC)
        .expect("retry with eth1");
    assert_eq!(sandbox.interfaces.len(), 1, "stale interfaces: {sandbox:?}");
    assert_eq!(sandbox.interfaces[0].name, "eth1");
    testkit::assert_pod_side(&netns, &sandbox.interfaces[0]);
    node.assert_host_side(&sandbox.interfaces[0]);
    assert_eq!(testkit::link_in(&netns, "eth0"), Some(squatter));
    assert_eq!(node.capacity_used("default"), 2);
}

#[test]
fn failure_on_the_second_interface_rolls_back_the_first() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    let netns = node.netns("half");
    let squatter = occupy(&netns, "eth1");
    let mut req = node.attach_req("pod-half", &netns, "eth0");
    let mut second = req.interfaces[0].clone();
    second.name = "eth1".to_owned();
    req.interfaces.push(second);

    let message = testkit::expect_code(
        node.client().attach(&req, RPC),
        ttrpc::Code::FAILED_PRECONDITION,
        "attach whose second interface collides",
    );
    assert!(message.contains("eth1"), "unclear error: {message:?}");
    assert!(
        testkit::link_in(&netns, "eth0").is_none(),
        "eth0, created before the failure, was not rolled back"
    );
    assert_eq!(testkit::link_in(&netns, "eth1"), Some(squatter));
    assert_nothing_left(&node, "pod-half");

    req.interfaces[1].name = "eth2".to_owned();
    let sandbox = node.client().attach(&req, RPC).expect("retry");
    let names: Vec<&str> = sandbox.interfaces.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["eth0", "eth2"]);
    for iface in &sandbox.interfaces {
        node.assert_host_side(iface);
        assert!(testkit::link_in(&netns, &iface.name).is_some());
    }
}

#[test]
fn attach_to_a_path_that_is_not_a_netns_is_failed_precondition() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    let missing = node.missing_netns_path("nothing-here");
    let regular = node.missing_netns_path("plain-file");
    std::fs::write(&regular, b"not a namespace").expect("write regular file");
    for (what, path) in [("missing path", &missing), ("regular file", &regular)] {
        let message = testkit::expect_code(
            node.client()
                .attach(&node.attach_req("pod-nowhere", path, "eth0"), RPC),
            ttrpc::Code::FAILED_PRECONDITION,
            what,
        );
        assert!(
            message.contains(&path.display().to_string()),
            "{what}: {message:?} does not name the path"
        );
        assert_nothing_left(&node, "pod-nowhere");
    }
}

#[test]
fn failed_attaches_do_not_use_up_sandbox_slots() {
    if !testkit::privileged() {
        return;
    }
    let mut node = TestNode::start(&format!("max_sandboxes = 1\n{}", testkit::DEFAULT_NETWORK));
    let netns = node.netns("slot");
    occupy(&netns, "eth0");
    for attempt in 0..3 {
        testkit::expect_code(
            node.client().attach(
                &node.attach_req(&format!("pod-fail-{attempt}"), &netns, "eth0"),
                RPC,
            ),
            ttrpc::Code::FAILED_PRECONDITION,
            "attach onto an existing eth0",
        );
    }
    // The one slot is still free.
    node.client()
        .attach(&node.attach_req("pod-slot", &netns, "eth1"), RPC)
        .expect("attach into the only slot");
    let other = node.netns("over");
    testkit::expect_code(
        node.client()
            .attach(&node.attach_req("pod-over", &other, "eth0"), RPC),
        ttrpc::Code::RESOURCE_EXHAUSTED,
        "attach past max_sandboxes",
    );
    assert!(testkit::link_in(&other, "eth0").is_none());
    assert_eq!(node.list_ids(), ["pod-slot"]);
    assert_eq!(node.capacity_used("default"), 2);
    // Started again, knid counts the sandbox it recorded (from recovery's read of the records):
    // the slot stays taken.
    let status = node.stop();
    assert!(status.success(), "SIGTERM: {status}");
    node.restart();
    testkit::expect_code(
        node.client()
            .attach(&node.attach_req("pod-over", &other, "eth0"), RPC),
        ttrpc::Code::RESOURCE_EXHAUSTED,
        "attach past max_sandboxes after a restart",
    );
    assert_eq!(node.list_ids(), ["pod-slot"]);
}

#[test]
fn a_stale_host_link_with_the_deterministic_name_is_replaced() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    // What an attach interrupted between the kernel call and the store write leaves behind.
    let stale = knid_core::names::host_ifname("pod-stale", "eth0");
    node.host_rtnl()
        .create_bridge(&stale, None)
        .expect("plant a stale link");
    let netns = node.netns("stale");
    let sandbox = node
        .client()
        .attach(&node.attach_req("pod-stale", &netns, "eth0"), RPC)
        .expect("Attach over a stale host link");
    let iface = &sandbox.interfaces[0];
    assert_eq!(iface.host_ifname, stale);
    let link = node
        .host_rtnl()
        .link_by_name(&stale)
        .expect("look up")
        .expect("host end exists");
    assert_eq!(
        link.kind.as_deref(),
        Some("veth"),
        "stale bridge was not replaced"
    );
    node.assert_host_side(iface);
    testkit::assert_pod_side(&netns, iface);
    node.client()
        .detach(&testkit::detach_req("pod-stale"), RPC)
        .expect("Detach");
    node.assert_host_clean();
}
