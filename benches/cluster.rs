//! Cluster mode's costs, on the three-node cluster of tests/cluster.rs (three knids in private
//! node namespaces on a shared L2, the stand-in Kubernetes API server of testkit):
//! 1. `KNID_BENCH_N` (default 20) Node creations, each timed from the API server's ADDED until
//!    every one of the three nodes has both routes to it in its kernel (polled every 200 µs),
//!    then its deletion until the routes are gone from all three;
//! 2. `KNID_BENCH_NODES` (default 1,000) Node objects watched: the time until each knid has
//!    routed them all, and knid's VmRSS, VmHWM and threads before, right after, and idle: once
//!    knid has released its code after the big change (its debug log says so; at least 30 s
//!    after its last release, 5 s after its last pass over the Nodes), a route resync has run
//!    since (a /16 on the LAN gives each a directly connected InternalIP) and its threads are
//!    an idle knid's (the warm API handler ends 30 s after the bench's last call, as in the perf
//!    bench's idle);
//! 3. one knid restarted with them all: spawn to every route in place (a full paginated list);
//! 4. `KNID_BENCH_TAINT_N` (default 10) times on a fourth knid whose /29 pod CIDR holds five
//!    pods: from the attach that takes the last free address to knid's
//!    `knid.io/pod-network-full:NoSchedule` taint on its Node object, and from a detach to the
//!    taint gone (the Node polled every millisecond at the stand-in), with the default
//!    `publish_interval` (1 s).
//!
//! Numbers are reported, never asserted. Without root it prints a skip line and exits 0.

use std::time::{Duration, Instant};

use nix::unistd::Pid;
use testkit::cluster_node::{
    api_on_lan, attach_to_pod_network, code_releases_after_node_changes, detach_pod, knid_routes,
    node_spec, pod_cidrs, routes_to, small_node_spec, start_cluster_node, start_cluster_node_tuned,
    watched_node, Creds, WATCHED_LAN,
};
use testkit::cni::tool_in;
use testkit::kube_api::KubeApi;
use testkit::lan::Lan;
use testkit::measure::{env_count, memory_parts, ms, proc_status, report};
use testkit::threads;
use testkit::TestNode;

const POLL: Duration = Duration::from_micros(200);
const TIMEOUT: Duration = Duration::from_secs(120);

fn wait(what: &str, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < TIMEOUT, "timed out waiting for {what}");
        std::thread::sleep(POLL);
    }
}

fn footprint(node: &TestNode) -> String {
    let pid = u32::try_from(Pid::as_raw(node.pid())).expect("pid");
    let kib = |f| proc_status(pid, f).unwrap_or(0);
    let parts = memory_parts(pid).map_or_else(|| "smaps unreadable".to_owned(), |m| m.to_string());
    format!(
        "VmRSS {:.1} MiB, VmHWM {:.1} MiB, {} threads\n  threads: {}\n  memory: {parts}",
        kib("VmRSS") as f64 / 1024.0,
        kib("VmHWM") as f64 / 1024.0,
        kib("Threads"),
        threads::summary(&threads::of(i32::try_from(pid).expect("pid")))
    )
}

/// [`footprint`] once `node`'s threads are an idle cluster-mode knid's (its warm API handler
/// gone, 30 s after the bench's last call), as the perf bench's idle is; the wait in its label.
fn idle_footprint(node: &TestNode) -> String {
    let (waited, settled) = threads::settle(node.pid().as_raw(), &threads::CLUSTER_IDLE);
    let wait = if settled {
        format!("threads idle after {:.0} s", waited.as_secs_f64().ceil())
    } else {
        format!("threads still not idle after {:.0} s", waited.as_secs_f64())
    };
    format!("({wait}) {}", footprint(node))
}

fn main() {
    if !testkit::privileged() {
        return;
    }
    let adds = env_count("KNID_BENCH_N", 20);
    let fills = env_count("KNID_BENCH_TAINT_N", 10);
    let watched = env_count("KNID_BENCH_NODES", 1000);
    let (lan, _api_dir, api, _) = api_on_lan();
    let names = ["node-a", "node-b", "node-c"];
    for (i, name) in names.iter().enumerate() {
        api.add_node(node_spec(name, i as u8 + 1));
    }
    let mut nodes: Vec<TestNode> = names
        .iter()
        .enumerate()
        .map(|(i, name)| start_cluster_node(&lan, &api, name, i as u8 + 1, Creds::InCluster))
        .collect();
    for (i, node) in nodes.iter().enumerate() {
        let peers: Vec<u8> = (1..=3).filter(|p| *p != i as u8 + 1).collect();
        wait("the three nodes' routes", || {
            knid_routes(node.host_path()) == routes_to(&peers)
        });
        // The many nodes' InternalIPs are on this /16, directly connected.
        tool_in(
            node.host_path(),
            "ip",
            &["addr", "add", WATCHED_LAN, "dev", "eth0"],
        );
    }
    println!("cluster mode: 3 knids, idle {}", idle_footprint(&nodes[0]));

    // 1. Node creation (and deletion) to routes on every other node.
    let mut added = Vec::with_capacity(adds);
    let mut deleted = Vec::with_capacity(adds);
    for n in 0..adds {
        let index = 10 + (n % 200) as u8;
        let spec = node_spec(&format!("bench-{n}"), index);
        let dst: Vec<ipnet::IpNet> = pod_cidrs(index)
            .iter()
            .map(|c| c.parse().expect("cidr"))
            .collect();
        let has = |node: &TestNode| {
            let routes = knid_routes(node.host_path());
            dst.iter().all(|d| routes.iter().any(|(r, _)| r == d))
        };
        let started = Instant::now();
        api.add_node(spec);
        wait("routes to the new node", || nodes.iter().all(has));
        added.push(started.elapsed());
        let started = Instant::now();
        api.delete_node(&format!("bench-{n}"));
        wait("the deleted node's routes gone", || {
            nodes.iter().all(|node| !has(node))
        });
        deleted.push(started.elapsed());
    }
    println!("Node added → routes on all 3 nodes ({adds} nodes):");
    report("add", &mut added);
    report("delete", &mut deleted);

    // 4 (run here, before the many nodes): the pod network full, to the taint and back.
    full_pod_network(&lan, &api, fills);

    // 2. Many nodes watched.
    let base = knid_routes(nodes[0].host_path()).len();
    let started = Instant::now();
    for i in 0..watched {
        api.add_node(watched_node(i));
    }
    let created = started.elapsed();
    for node in &nodes {
        wait("every watched node routed", || {
            knid_routes(node.host_path()).len() == base + watched
        });
    }
    println!(
        "{watched} Node objects created in {:.0} ms; routed on all 3 nodes after {:.0} ms",
        ms(created),
        ms(started.elapsed())
    );
    println!(
        "knid watching {} nodes: {}",
        watched + 3,
        footprint(&nodes[0])
    );
    if watched >= 100 {
        let started = Instant::now();
        while code_releases_after_node_changes(&nodes[0]).is_empty() {
            assert!(
                started.elapsed() < TIMEOUT,
                "timed out waiting for knid's code released after the Nodes added"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let released = started.elapsed();
        // Its routes checked against the kernel since (every second here), as an idle knid's are.
        std::thread::sleep(Duration::from_secs(2));
        println!(
            "knid watching {} nodes, idle (code released {:.1} s after they were routed, then \
             2 s) {}",
            watched + 3,
            released.as_secs_f64(),
            idle_footprint(&nodes[0])
        );
    }

    // 3. A restart with them all: one paginated list.
    let node = &mut nodes[0];
    node.stop();
    tool_in(node.host_path(), "ip", &["route", "flush", "proto", "107"]);
    let started = Instant::now();
    node.restart();
    wait("every route after the restart", || {
        knid_routes(node.host_path()).len() == base + watched
    });
    println!(
        "restart with {} nodes: spawn to every route in {:.0} ms; {}",
        watched + 3,
        ms(started.elapsed()),
        footprint(node)
    );
}

/// Phase 4: attach-to-taint and detach-to-untaint on a knid whose pod network holds five pods.
fn full_pod_network(lan: &Lan, api: &KubeApi, fills: usize) {
    const NAME: &str = "node-full";
    api.add_node(small_node_spec(NAME, 9));
    let node = start_cluster_node_tuned(lan, api, NAME, 9, "");
    let tainted = || {
        api.node(NAME).is_some_and(|n| {
            n["spec"]["taints"].as_array().is_some_and(|taints| {
                taints
                    .iter()
                    .any(|t| t["key"] == "knid.io/pod-network-full" && t["effect"] == "NoSchedule")
            })
        })
    };
    let poll = |what: &str, want: bool| {
        let started = Instant::now();
        while tainted() != want {
            assert!(started.elapsed() < TIMEOUT, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    // A new node's pod CIDR comes with its first list of Nodes, after knid answers.
    let started = Instant::now();
    while !node.condition("PodCIDR").status {
        assert!(
            started.elapsed() < TIMEOUT,
            "timed out waiting for node-full's pod CIDR"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    for i in 0..4 {
        attach_to_pod_network(&node, &format!("fill-{i}"));
    }
    let mut taint = Vec::with_capacity(fills);
    let mut untaint = Vec::with_capacity(fills);
    for n in 0..fills {
        let id = format!("last-{n}");
        attach_to_pod_network(&node, &id);
        let started = Instant::now();
        poll("the taint", true);
        taint.push(started.elapsed());
        detach_pod(&node, &id);
        let started = Instant::now();
        poll("the taint to go", false);
        untaint.push(started.elapsed());
    }
    println!("pod network full → Node tainted, and a detach → untainted ({fills} times):");
    report("taint", &mut taint);
    report("untaint", &mut untaint);
    for i in 0..4 {
        detach_pod(&node, &format!("fill-{i}"));
    }
}
