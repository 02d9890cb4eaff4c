//! Detach and the reaper: Detach replies once the link is out of service (its pod end down and
//! marked retired, the host end off the bridge and in the reaper's link group); the reaper
//! deletes it and only then releases its addresses; an attach short of addresses lets the
//! reaper finish instead of failing.

use testkit::{TestNode, BRIDGE, RPC};

/// Five assignable IPv4 addresses (/29 minus network, broadcast and gateway); IPv6 plenty.
const TINY_NETWORK: &str = r#"
[networks.default]
bridge = "knid0"
subnets = ["10.89.0.0/29", "fd00:89::/64"]
"#;

#[test]
fn detach_replies_with_the_link_retired_and_the_reaper_deletes_it() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("reaper_group = 4242");
    let netns = node.netns("retired");
    let attached = node
        .client()
        .attach(&node.attach_req("pod-retired", &netns, "eth0"), RPC)
        .expect("Attach");
    let host_ifname = attached.interfaces[0].host_ifname.clone();
    node.assert_host_side(&attached.interfaces[0]);

    node.client()
        .detach(&testkit::detach_req("pod-retired"), RPC)
        .expect("Detach");
    // At the reply the sandbox is gone from the API and its link out of service, if the reaper
    // has not deleted it yet: the host end off the bridge and in the reaper's group, the pod
    // end down and marked retired (nothing here reuses its name).
    node.assert_not_found("pod-retired");
    assert!(node.list_ids().is_empty());
    if let Some(link) = node
        .host_rtnl()
        .link_by_name(&host_ifname)
        .expect("look up the host link")
    {
        assert_eq!(link.group, 4242, "{host_ifname} not in the reaper's group");
        assert_eq!(link.controller, None, "{host_ifname} still on the bridge");
        assert!(
            node.bridge_ports(BRIDGE).is_empty(),
            "no port left on the bridge"
        );
        if let Some(pod_end) = testkit::link_in(&netns, "eth0") {
            assert!(!pod_end.up, "the pod end is still up after Detach");
            assert_eq!(
                pod_end.alias,
                Some(format!("knid-retired:{host_ifname}")),
                "the pod end is not marked retired"
            );
        }
    }

    // The reaper deletes it, the bridge port with it.
    node.assert_host_clean();
    node.wait_capacity_used("default", 0);
    assert_eq!(
        testkit::links_in(&netns)
            .into_iter()
            .map(|l| l.name)
            .collect::<Vec<_>>(),
        vec!["lo".to_owned()],
        "the pod end goes with the host end"
    );
}

#[test]
fn an_attach_short_of_addresses_waits_for_the_reaper_instead_of_failing() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start(TINY_NETWORK);
    let client = node.client();
    for i in 0..5 {
        let netns = node.netns(&format!("full-{i}"));
        client
            .attach(&node.attach_req(&format!("pod-{i}"), &netns, "eth0"), RPC)
            .expect("Attach within capacity");
    }
    let extra = node.netns("extra");
    let message = testkit::expect_code(
        client.attach(&node.attach_req("pod-extra", &extra, "eth0"), RPC),
        ttrpc::Code::RESOURCE_EXHAUSTED,
        "attach beyond capacity",
    );
    assert!(message.contains("ipv4 pool exhausted"), "{message}");

    // The freed address is still held while its link waits for the reaper; the attach right
    // after the detach must get it anyway.
    client
        .detach(&testkit::detach_req("pod-0"), RPC)
        .expect("Detach");
    let sandbox = client
        .attach(&node.attach_req("pod-extra", &extra, "eth0"), RPC)
        .expect("Attach right after a Detach on a full network");
    testkit::assert_pod_side(&extra, &sandbox.interfaces[0]);
    node.assert_host_side(&sandbox.interfaces[0]);
    // Five of each family.
    assert_eq!(node.capacity_used("default"), 10);
}

/// A knid with failpoints `failpoints` armed and sandbox `pod-<name>` attached in netns `name`:
/// the node, the netns and the sandbox's host link.
fn attached_with(failpoints: &str, name: &str) -> (TestNode, std::path::PathBuf, String) {
    let node = TestNode::start_with("", &[("KNID_FAILPOINTS", failpoints)], &[]);
    let netns = node.netns(name);
    let attached = node
        .client()
        .attach(
            &node.attach_req(&format!("pod-{name}"), &netns, "eth0"),
            RPC,
        )
        .expect("Attach");
    let host_ifname = attached.interfaces[0].host_ifname.clone();
    (node, netns, host_ifname)
}

#[test]
fn a_pair_deleted_between_a_detachs_host_end_and_its_pod_end_fails_nothing() {
    if !testkit::privileged() || !testkit::failpoints_built() {
        return;
    }
    // The detach pauses with its host end in the reaper's group and its pod end found, not
    // yet set down: where a reaper round of other detaches deletes the pair under it.
    let (node, netns, host_ifname) = attached_with("detach.pod_end_found=sleep(1500)", "raced");
    let detached = std::thread::scope(|s| {
        let detach = s.spawn(|| node.client().detach(&testkit::detach_req("pod-raced"), RPC));
        testkit::wait_for("the detach to reach its pod end", testkit::SETTLE, || {
            node.log_text()
                .contains("failpoint detach.pod_end_found: sleeping")
        });
        // What the reaper's group deletion does to it.
        assert!(
            node.host_rtnl()
                .delete_link_by_name(&host_ifname)
                .expect("delete the pair"),
            "{host_ifname} gone before the detach reached its pod end"
        );
        detach.join().expect("the detach's thread")
    });
    detached.expect("a Detach whose pair went meanwhile succeeds");
    node.assert_not_found("pod-raced");
    node.assert_host_clean();
    node.wait_capacity_used("default", 0);
    testkit::wait_only_lo(&netns);
}

#[test]
fn a_detach_takes_the_pod_end_out_of_service_by_its_index_whatever_its_name() {
    if !testkit::privileged() || !testkit::failpoints_built() {
        return;
    }
    // The detach pauses once its kernel work is done, before the reaper gets the pair.
    let (node, netns, host_ifname) = attached_with("detach.retired=sleep(1500)", "renamed");
    // The pod renames its interface: a name is the pod's to change, its index is not.
    for args in [
        &["link", "set", "eth0", "down"][..],
        &["link", "set", "eth0", "name", "renamed0"],
        &["link", "set", "renamed0", "up"],
    ] {
        testkit::cni::tool_in(&netns, "ip", args);
    }
    let detached = std::thread::scope(|s| {
        let detach = s.spawn(|| {
            node.client()
                .detach(&testkit::detach_req("pod-renamed"), RPC)
        });
        testkit::wait_for("the detach's kernel work", testkit::SETTLE, || {
            node.log_text()
                .contains("failpoint detach.retired: sleeping")
        });
        let pod_end = testkit::link_in(&netns, "renamed0").expect("the renamed pod end");
        assert!(
            !pod_end.up,
            "the renamed pod end is still up after its detach"
        );
        assert_eq!(
            pod_end.alias,
            Some(format!("knid-retired:{host_ifname}")),
            "the renamed pod end is not marked retired"
        );
        detach.join().expect("the detach's thread")
    });
    detached.expect("Detach");
    node.assert_not_found("pod-renamed");
    testkit::wait_only_lo(&netns);
}
