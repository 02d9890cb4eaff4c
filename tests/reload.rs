//! SIGHUP reloads the networks: a new network is set up at once; a network holding addresses
//! keeps its subnets (the change is refused and logged), and running pods are untouched; an
//! emptied config file is refused, and a network that leaves the configuration is logged.

use nix::sys::signal::{kill, Signal};
use testkit::{TestNode, RPC, TWO_NETWORKS};

fn subnets_of(node: &TestNode, name: &str) -> Option<Vec<String>> {
    let networks = node.client().networks(RPC).expect("Networks").networks;
    networks
        .into_iter()
        .find(|n| n.name == name)
        .map(|n| n.subnets)
}

#[test]
fn sighup_adds_new_networks_and_keeps_subnets_of_networks_in_use() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    let netns = node.netns("pod");
    let sandbox = node
        .client()
        .attach(&node.attach_req("pod-reload", &netns, "eth0"), RPC)
        .expect("Attach");
    let before = subnets_of(&node, "default").expect("default network");

    // `default` changes its subnets while it holds addresses; `extra` is new.
    node.write_config(TWO_NETWORKS);
    kill(node.pid(), Signal::SIGHUP).expect("SIGHUP");
    testkit::wait_for("network extra to appear", testkit::SETTLE, || {
        subnets_of(&node, "extra").is_some()
    });

    assert_eq!(
        subnets_of(&node, "extra"),
        Some(vec!["10.66.0.0/24".to_owned(), "fd00:66::/64".to_owned()])
    );
    let bridge = node.bridge("brx1");
    assert!(bridge.up, "new bridge brx1 is not up");
    assert_eq!(
        subnets_of(&node, "default"),
        Some(before),
        "subnets changed under a live pod"
    );
    assert!(
        node.log_text().contains("subnets cannot change"),
        "refusal not logged"
    );

    // The running pod is untouched and the new network takes attachments.
    testkit::assert_pod_side(&netns, &sandbox.interfaces[0]);
    let other = node.netns("pod2");
    let mut req = node.attach_req("pod-extra", &other, "eth0");
    req.interfaces[0].network = "extra".to_owned();
    let attached = node.client().attach(&req, RPC).expect("Attach on extra");
    assert!(attached.interfaces[0].ips[0]
        .address
        .starts_with("10.66.0."));
    testkit::assert_pod_side(&other, &attached.interfaces[0]);
    for id in ["pod-reload", "pod-extra"] {
        node.client()
            .detach(&testkit::detach_req(id), RPC)
            .expect("Detach");
    }
    node.assert_host_clean();
}

#[test]
fn sighup_with_an_empty_config_file_keeps_the_networks_and_a_dropped_network_is_logged() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start(TWO_NETWORKS);
    assert!(
        subnets_of(&node, "extra").is_some(),
        "extra missing at start"
    );

    // The file itself, emptied (write_config would add the harness's own keys).
    std::fs::write(node.config_path(), "\n  \n").expect("empty the config");
    kill(node.pid(), Signal::SIGHUP).expect("SIGHUP");
    testkit::wait_for("the refusal in the log", testkit::SETTLE, || {
        node.log_text().contains("reload refused")
    });
    assert!(node.log_text().contains("is empty"), "{}", node.log_text());
    for name in ["default", "extra"] {
        assert!(subnets_of(&node, name).is_some(), "network {name} dropped");
    }
    let netns = node.netns("pod");
    node.client()
        .attach(&node.attach_req("pod-after", &netns, "eth0"), RPC)
        .expect("Attach after the refused reload");
    node.client()
        .detach(&testkit::detach_req("pod-after"), RPC)
        .expect("Detach");

    // Without `extra` (which holds no address), the reload drops it, and says so.
    let default_only = &TWO_NETWORKS[..TWO_NETWORKS.find("[networks.extra]").expect("extra")];
    node.write_config(default_only);
    kill(node.pid(), Signal::SIGHUP).expect("SIGHUP");
    testkit::wait_for("network extra to go", testkit::SETTLE, || {
        subnets_of(&node, "extra").is_none()
    });
    assert!(
        node.log_text()
            .contains("network extra: left the configuration; removed"),
        "{}",
        node.log_text()
    );
    node.assert_host_clean();
}
