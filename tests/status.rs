//! Status conditions report real state, and `since` is when a condition last changed, not the
//! time of the call.

mod common;

use common::{TestNode, RPC};
use knid_transport::pb;

/// A /29: five assignable IPv4 addresses besides the gateway.
const SMALL: &str = r#"
[networks.default]
bridge = "knid0"
subnets = ["10.55.0.0/29", "fd00:55::/64"]
"#;

fn ipam_condition(node: &TestNode) -> pb::Condition {
    let status = node.client().status(RPC).expect("Status");
    status
        .conditions
        .into_iter()
        .find(|c| c.type_ == "IPAMAvailable/default")
        .expect("IPAMAvailable/default condition")
}

#[test]
fn ipam_condition_flips_on_exhaustion_and_since_marks_the_change() {
    if !common::privileged() {
        return;
    }
    let node = TestNode::start(SMALL);
    let first = ipam_condition(&node);
    assert!(first.status);
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(
        ipam_condition(&node).since,
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
    let exhausted = ipam_condition(&node);
    assert!(!exhausted.status, "pool of 5 is full: {exhausted:?}");
    assert_eq!(exhausted.reason, "Exhausted");
    assert!(
        exhausted.since > first.since,
        "since did not move on the change"
    );
    assert!(!node.client().status(RPC).expect("Status").ready);

    node.client()
        .detach(&common::detach_req("small-0"), RPC)
        .expect("Detach");
    node.wait_capacity_used("default", 8); // four sandboxes, one address per family each
    let available = ipam_condition(&node);
    assert!(available.status);
    assert!(available.since >= exhausted.since);
    for i in 1..5 {
        node.client()
            .detach(&common::detach_req(&format!("small-{i}")), RPC)
            .expect("Detach");
    }
    node.assert_host_clean();
}
