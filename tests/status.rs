//! Status conditions report real state, and `since` is when a condition last changed, not the
//! time of the call.

use knid_transport::pb;
use testkit::{TestNode, RPC};

/// A /29: five assignable IPv4 addresses besides the gateway.
const SMALL: &str = r#"
[networks.default]
bridge = "knid0"
subnets = ["10.55.0.0/29", "fd00:55::/64"]
"#;

fn schedulable_condition(node: &TestNode) -> pb::Condition {
    let status = node.client().status(RPC).expect("Status");
    status
        .conditions
        .into_iter()
        .find(|c| c.type_ == "NetworkSchedulable/default")
        .expect("NetworkSchedulable/default condition")
}

#[test]
fn schedulable_condition_flips_on_exhaustion_and_since_marks_the_change() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start(SMALL);
    let first = schedulable_condition(&node);
    assert!(first.status);
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(
        schedulable_condition(&node).since,
        first.since,
        "since moved without a change"
    );

    for i in 0..5 {
        let id = format!("small-{i}");
        let netns = node.netns(&id);
        node.client()
            .attach(&node.attach_req(&id, &netns, "eth0"), RPC)
            .expect("Attach");
    }
    let exhausted = schedulable_condition(&node);
    assert!(!exhausted.status, "pool of 5 is full: {exhausted:?}");
    assert_eq!(exhausted.reason, "Exhausted");
    assert!(
        exhausted
            .message
            .contains("ipv4 pool exhausted (5 of 5 addresses in use)"),
        "{exhausted:?}"
    );
    assert!(
        exhausted.since > first.since,
        "since did not move on the change"
    );
    // A full pool stops new pods, not the node: a not-ready node would have its pods evicted.
    assert!(node.client().status(RPC).expect("Status").ready);

    node.client()
        .detach(&testkit::detach_req("small-0"), RPC)
        .expect("Detach");
    node.wait_capacity_used("default", 8); // four sandboxes, one address per family each
    let available = schedulable_condition(&node);
    assert!(available.status);
    assert!(available.since >= exhausted.since);
    for i in 1..5 {
        node.client()
            .detach(&testkit::detach_req(&format!("small-{i}")), RPC)
            .expect("Detach");
    }
    node.assert_host_clean();
}

/// Two networks: `small` (a /29, five IPv4 addresses) and `big`.
const TWO: &str = r#"
[networks.small]
bridge = "knid0"
subnets = ["10.56.0.0/29"]

[networks.big]
bridge = "br-big"
subnets = ["10.57.0.0/24"]
"#;

fn attach_on(node: &TestNode, id: &str, network: &str) -> pb::Sandbox {
    let netns = node.netns(id);
    let mut req = node.attach_req(id, &netns, "eth0");
    req.interfaces[0].network = network.to_owned();
    node.client().attach(&req, RPC).expect("Attach")
}

#[test]
fn an_exhausted_pool_stops_only_its_network_and_running_pods_keep_working() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start(TWO);
    let pods: Vec<pb::Sandbox> = (0..5)
        .map(|i| attach_on(&node, &format!("full-{i}"), "small"))
        .collect();
    let other = attach_on(&node, "other-0", "big");

    let status = node.client().status(RPC).expect("Status");
    let condition = |kind: &str| {
        status
            .conditions
            .iter()
            .find(|c| c.type_ == kind)
            .unwrap_or_else(|| panic!("{kind} in {:?}", status.conditions))
            .clone()
    };
    let small = condition("NetworkSchedulable/small");
    assert!(!small.status && small.reason == "Exhausted", "{small:?}");
    assert!(
        condition("NetworkSchedulable/big").status,
        "the other pool is fine"
    );
    assert!(
        condition("PluginsAvailable/small").status,
        "a full pool says nothing of plugins"
    );
    assert!(condition("NetworkReady").status);
    assert!(status.ready, "a full pool made the node not ready");
    let info = node.network("small");
    assert!(info.ready && !info.schedulable, "{info:?}");
    assert_eq!(info.capacity[0].free, 0, "{info:?}");
    let big = node.network("big");
    assert!(big.ready && big.schedulable, "{big:?}");
    let metrics = node.client().metrics(RPC).expect("Metrics");
    for want in [
        "knid_network_schedulable{network=\"small\"} 0",
        "knid_network_schedulable{network=\"big\"} 1",
    ] {
        assert!(metrics.contains(want), "no {want:?} in\n{metrics}");
    }

    // Nothing is evicted: every running pod still checks out and talks to its neighbour.
    for pod in pods.iter().chain([&other]) {
        node.client()
            .check(
                &pb::CheckRequest {
                    sandbox_id: pod.id.clone(),
                    ..Default::default()
                },
                RPC,
            )
            .unwrap_or_else(|e| panic!("Check {}: {e}", pod.id));
    }
    let (server_ip, _) = testkit::ip_of(&pods[1].interfaces[0], "ipv4");
    testkit::tcp_exchange(
        std::path::Path::new(&pods[1].netns_path),
        server_ip.addr(),
        std::path::Path::new(&pods[0].netns_path),
    );
    // A new pod on the full network is refused; on the other one it is not.
    let netns = node.netns("full-5");
    let mut req = node.attach_req("full-5", &netns, "eth0");
    req.interfaces[0].network = "small".into();
    let refused = testkit::expect_code(
        node.client().attach(&req, RPC),
        ttrpc::Code::RESOURCE_EXHAUSTED,
        "attach on a full pool",
    );
    assert!(refused.contains("ipv4 pool exhausted"), "{refused}");
    attach_on(&node, "other-1", "big");

    node.client()
        .detach(&testkit::detach_req("full-0"), RPC)
        .expect("Detach");
    node.wait_capacity_used("small", 4);
    let cleared = node.client().status(RPC).expect("Status");
    assert!(cleared.ready, "{:?}", cleared.conditions);
    assert!(
        cleared.conditions.iter().all(|c| c.status),
        "{:?}",
        cleared.conditions
    );
    assert!(node.network("small").schedulable);
    for id in ["full-1", "full-2", "full-3", "full-4", "other-0", "other-1"] {
        node.client()
            .detach(&testkit::detach_req(id), RPC)
            .expect("Detach");
    }
    node.wait_no_kn_links();
}
