//! Start-up to ready, as a supervisor restarting knid sees it (spawn → a `Status` over a fresh
//! connection, polled every 0.2 ms; knid at its deployed log level, info):
//! 1. a single node with `KNID_BENCH_FOOTPRINT` (default 5,000) sandboxes on one routed network
//!    (one netns each; no bridge, so no 1,023-port limit): ready with every condition true,
//!    `KNID_BENCH_RESTARTS` (default 3) times;
//! 2. cluster mode, one knid with `KNID_BENCH_NODES` (default 1,000) other Nodes watched and
//!    routed, and `KNID_BENCH_PODS` (default 200) pods on its pod network: ready (the pod CIDR
//!    as recorded) and then the Node read (`PodCIDR` confirmed, every route in place) with the
//!    API server up; and ready with the API server away.
//!
//! Numbers are reported, never asserted. Without root it prints a skip line and exits 0.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use testkit::cluster_node::{
    api_on_lan, knid_routes, node_spec, start_cluster_node, watched_node, Creds, POD_NETWORK,
    WATCHED_LAN,
};
use testkit::cni::tool_in;
use testkit::measure::{env_count, ms, proc_status, report};
use testkit::timed_start::{all_true, timed_start};
use testkit::{TestNode, RPC};

/// knid as deployed.
const DEPLOYED: &[&str] = &["--log-level", "info"];

const ROUTED: &str = r#"
[networks.edge]
kind = "routed"
subnets = ["10.66.0.0/16", "fd00:66::/64"]
"#;

/// Attaches `count` sandboxes named `<slug>-<i>` to `network`, each in a netns of its own.
fn attach_many(node: &TestNode, slug: &str, network: &str, count: usize) -> Vec<PathBuf> {
    let client = node.client();
    (0..count)
        .map(|i| {
            let id = format!("{slug}-{i}");
            let netns = node.missing_netns_path(&id);
            knid_netops::netns::create_bound(&netns)
                .unwrap_or_else(|e| panic!("create netns {}: {e}", netns.display()));
            let mut req = node.attach_req(&id, &netns, "eth0");
            req.interfaces[0].network = network.to_owned();
            client
                .attach(&req, RPC)
                .unwrap_or_else(|e| panic!("attach {id}: {e}"));
            netns
        })
        .collect()
}

fn remove(all: Vec<PathBuf>) {
    for netns in all {
        knid_netops::netns::remove_bound(&netns)
            .unwrap_or_else(|e| panic!("remove netns {}: {e}", netns.display()));
    }
}

fn rss_mib(pid: u32) -> f64 {
    proc_status(pid, "VmRSS").unwrap_or(0) as f64 / 1024.0
}

fn routed_node(count: usize, restarts: usize) {
    let mut node = TestNode::start(ROUTED);
    let all = attach_many(&node, "r", "edge", count);
    let status = node.stop();
    assert!(status.success(), "{status}");
    let mut ready = Vec::with_capacity(restarts);
    for _ in 0..restarts {
        let (took, knid) = timed_start(&node, &testkit::bins::knid(), DEPLOYED, all_true);
        println!(
            "routed network, {count} sandboxes recorded: ready {:.1} ms after spawn, VmRSS {:.1} MiB",
            ms(took),
            rss_mib(knid.pid())
        );
        ready.push(took);
        knid.stop();
    }
    report(
        &format!("start-up to ready, {count} routed sandboxes"),
        &mut ready,
    );
    node.restart();
    for i in 0..count {
        node.client()
            .detach(&testkit::detach_req(&format!("r-{i}")), RPC)
            .unwrap_or_else(|e| panic!("detach r-{i}: {e}"));
    }
    node.wait_no_kn_links();
    remove(all);
}

/// The Node read: `PodCIDR` true with no reason (no longer `Recorded`).
fn confirmed(node: &TestNode) -> bool {
    let c = node.condition("PodCIDR");
    c.status && c.reason.is_empty()
}

fn cluster_node(watched: usize, pods: usize, restarts: usize) {
    let (lan, _api_dir, api, port) = api_on_lan();
    api.add_node(node_spec("node-a", 1));
    let mut node = start_cluster_node(&lan, &api, "node-a", 1, Creds::InCluster);
    tool_in(
        node.host_path(),
        "ip",
        &["addr", "add", WATCHED_LAN, "dev", "eth0"],
    );
    for i in 0..watched {
        api.add_node(watched_node(i));
    }
    testkit::wait_for(
        "every watched Node routed",
        Duration::from_secs(120),
        || knid_routes(node.host_path()).len() == watched,
    );
    testkit::wait_for("the pod CIDR", Duration::from_secs(30), || {
        node.network(POD_NETWORK).ready
    });
    let all = attach_many(&node, "c", POD_NETWORK, pods);
    let status = node.stop();
    assert!(status.success(), "{status}");
    let knid = testkit::bins::knid();
    let (mut up, mut listed, mut away) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..restarts {
        let (took, started) = timed_start(&node, &knid, DEPLOYED, |s| s.ready);
        up.push(took);
        let after = Instant::now();
        while !confirmed(&node) {
            assert!(
                after.elapsed() < Duration::from_secs(60),
                "the Node never read"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        let read = took + after.elapsed();
        listed.push(read);
        println!(
            "cluster mode, {} Nodes watched, {pods} pods: ready {:.1} ms after spawn, the Node \
             read {:.1} ms after spawn, VmRSS {:.1} MiB",
            watched + 1,
            ms(took),
            ms(read),
            rss_mib(started.pid())
        );
        started.stop();
    }
    api.stop();
    for _ in 0..restarts {
        let (took, started) = timed_start(&node, &knid, DEPLOYED, |s| s.ready);
        away.push(took);
        println!(
            "cluster mode, the API server away, {pods} pods: ready {:.1} ms after spawn",
            ms(took)
        );
        started.stop();
    }
    api.restart(lan.listen(port));
    report("cluster mode, ready (API up)", &mut up);
    report("cluster mode, Node read (API up)", &mut listed);
    report("cluster mode, ready (API away)", &mut away);
    node.restart();
    for i in 0..pods {
        node.client()
            .detach(&testkit::detach_req(&format!("c-{i}")), RPC)
            .unwrap_or_else(|e| panic!("detach c-{i}: {e}"));
    }
    node.wait_no_kn_links();
    remove(all);
}

fn main() {
    if !testkit::privileged() {
        return;
    }
    let restarts = env_count("KNID_BENCH_RESTARTS", 3);
    routed_node(env_count("KNID_BENCH_FOOTPRINT", 5000), restarts);
    cluster_node(
        env_count("KNID_BENCH_NODES", 1000),
        env_count("KNID_BENCH_PODS", 200),
        restarts,
    );
}
