//! Many clients at once: concurrent attaches get unique addresses inside the subnets, the pool
//! is exhausted at exactly its size with a clean ResourceExhausted, and a concurrent detach of
//! everything leaks nothing.

use std::collections::HashSet;
use std::net::IpAddr;
use std::path::PathBuf;

use ipnet::IpNet;
use knid_transport::pb;
use testkit::{TestNode, BRIDGE, RPC};

const CONFIG: &str = r#"
workers = 4
[networks.default]
bridge = "knid0"
subnets = ["10.77.0.0/24", "fd00:77::/64"]
mtu = 1500
"#;
const THREADS: usize = 8;
const PER_THREAD: usize = 8;
/// A /24 has 254 host addresses; the gateway takes one.
const POOL_SIZE: usize = 253;

/// Reserved addresses of one family, as `Networks` reports them.
fn used(node: &TestNode, family: &str) -> u64 {
    let networks = node.client().networks(RPC).expect("Networks");
    networks.networks[0]
        .capacity
        .iter()
        .find(|c| c.family == family)
        .unwrap_or_else(|| panic!("no {family} capacity"))
        .used
}

/// The NetworkSchedulable condition of the default network.
fn schedulable_condition(node: &TestNode) -> pb::Condition {
    let status = node.client().status(RPC).expect("Status");
    status
        .conditions
        .into_iter()
        .find(|c| c.type_ == "NetworkSchedulable/default")
        .expect("a NetworkSchedulable condition for network default")
}

/// Attaches a new sandbox `id` in a netns of its own through `client`.
fn attach_new(
    node: &TestNode,
    client: &knid_transport::RuntimeClient,
    id: &str,
) -> (PathBuf, Result<pb::Sandbox, knid_transport::ClientError>) {
    let netns = node.netns(id);
    let result = client.attach(&node.attach_req(id, &netns, "eth0"), RPC);
    (netns, result)
}

#[test]
fn concurrent_attaches_exhaust_the_pool_exactly_and_concurrent_detach_leaks_nothing() {
    if !testkit::privileged() {
        return;
    }
    let mut node = TestNode::start(CONFIG);
    let v4_net: IpNet = "10.77.0.0/24".parse().expect("cidr");
    let v6_net: IpNet = "fd00:77::/64".parse().expect("cidr");

    // 64 attaches from 8 threads, each with its own connection.
    let attached: Vec<(PathBuf, pb::Sandbox)> = std::thread::scope(|s| {
        let node = &node;
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                s.spawn(move || {
                    let client = node.client();
                    (0..PER_THREAD)
                        .map(|k| {
                            let id = format!("pod-{t}-{k}");
                            let (netns, result) = attach_new(node, &client, &id);
                            let sandbox = result.unwrap_or_else(|e| panic!("Attach {id}: {e}"));
                            (netns, sandbox)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("attach thread"))
            .collect()
    });
    assert_eq!(attached.len(), THREADS * PER_THREAD);

    let mut v4s = HashSet::new();
    let mut v6s = HashSet::new();
    for (netns, sandbox) in &attached {
        let iface = &sandbox.interfaces[0];
        let (v4, _) = testkit::ip_of(iface, "ipv4");
        let (v6, _) = testkit::ip_of(iface, "ipv6");
        assert!(
            v4_net.contains(&v4.addr()) && v4.prefix_len() == 24,
            "{v4} outside {v4_net}"
        );
        assert!(
            v6_net.contains(&v6.addr()) && v6.prefix_len() == 64,
            "{v6} outside {v6_net}"
        );
        assert!(v4s.insert(v4.addr()), "{v4} handed out twice");
        assert!(v6s.insert(v6.addr()), "{v6} handed out twice");
        // What the kernel holds, not what knid says.
        let in_kernel: Vec<IpNet> = testkit::addresses_in(netns, "eth0")
            .into_iter()
            .filter(|a| !testkit::is_link_local(a.addr()))
            .collect();
        assert!(
            in_kernel.len() == 2 && in_kernel.contains(&v4) && in_kernel.contains(&v6),
            "{}: kernel has {in_kernel:?}, knid said {v4} and {v6}",
            sandbox.id
        );
    }
    assert_eq!(v4s.len(), 64);
    assert_eq!(v6s.len(), 64);
    assert_eq!(node.host_kn_links().len(), 64);
    assert_eq!(node.bridge_ports(BRIDGE).len(), 64);

    // Fill the pool: exactly 253 - 64 more fit.
    let client = node.client();
    let mut extra = 0;
    let (failed_netns, failure) = loop {
        let id = format!("fill-{extra}");
        let (netns, result) = attach_new(&node, &client, &id);
        match result {
            Ok(sandbox) => {
                let addr = testkit::ip_of(&sandbox.interfaces[0], "ipv4").0.addr();
                assert!(v4s.insert(addr), "{addr} handed out twice");
                extra += 1;
                assert!(
                    extra <= POOL_SIZE,
                    "more attaches succeeded than the pool holds"
                );
            }
            Err(e) => break (netns, e),
        }
    };
    assert_eq!(
        failure.code(),
        Some(ttrpc::Code::RESOURCE_EXHAUSTED),
        "the attach past the pool: {failure}"
    );
    assert_eq!(
        extra,
        POOL_SIZE - THREADS * PER_THREAD,
        "attaches that fit after the first 64"
    );
    assert!(v4s
        .iter()
        .all(|a| v4_net.contains(a) && *a != "10.77.0.1".parse::<IpAddr>().expect("ip")));
    let left: Vec<String> = testkit::links_in(&failed_netns)
        .into_iter()
        .map(|l| l.name)
        .collect();
    assert_eq!(left, ["lo"], "the refused attach left links in its netns");
    assert_eq!(
        node.host_kn_links().len(),
        POOL_SIZE,
        "the refused attach left a host link"
    );
    assert_eq!(used(&node, "ipv4"), POOL_SIZE as u64);
    assert_eq!(
        used(&node, "ipv6"),
        POOL_SIZE as u64,
        "the refused attach kept an IPv6 address"
    );
    let condition = schedulable_condition(&node);
    assert!(
        !condition.status,
        "NetworkSchedulable still true: {condition:?}"
    );
    assert_eq!(condition.reason, "Exhausted");
    assert!(
        node.client().status(RPC).expect("Status").ready,
        "a full pool made the node not ready"
    );

    // Detach everything from 8 threads at once.
    let ids: Vec<String> = node.list_ids();
    assert_eq!(ids.len(), POOL_SIZE);
    std::thread::scope(|s| {
        let node = &node;
        for chunk in ids.chunks(ids.len().div_ceil(THREADS)) {
            s.spawn(move || {
                let client = node.client();
                for id in chunk {
                    client
                        .detach(&testkit::detach_req(id), RPC)
                        .unwrap_or_else(|e| panic!("Detach {id}: {e}"));
                }
            });
        }
    });
    node.assert_host_clean();
    node.wait_capacity_used("default", 0);
    assert!(node.list_ids().is_empty(), "List not empty");
    let condition = schedulable_condition(&node);
    assert!(
        condition.status,
        "NetworkSchedulable still false: {condition:?}"
    );
    drop(client);

    node.stop_with_empty_store("default");
}
