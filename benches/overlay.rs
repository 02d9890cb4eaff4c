//! The VXLAN overlay's costs, on the two-segment cluster of tests/overlay.rs (knids in private
//! node namespaces, two subnets joined by a router namespace, the stand-in Kubernetes API):
//! 1. `KNID_BENCH_N` (default 10) new nodes behind the router, each timed from its Node object
//!    created at the API server to the first TCP connection from a pod on node-a to a pod on it
//!    through the overlay (its knid started right after the Node is created, as a node joining
//!    a cluster does; its pod attached as soon as its pod network is ready). The time to
//!    node-a's route to it is reported too.
//! 2. TCP throughput pod to pod, `KNID_BENCH_MIB` (default 512) MiB over one connection, three
//!    rounds: node-a → node-b (same subnet: host-gw) against node-a → node-c (across the router:
//!    VXLAN), in one run.
//!
//! Numbers are reported, never asserted. Without root it prints a skip line and exits 0.

use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use knid_netops::NetnsHandle;
use testkit::cluster_node::{
    api_on_lan, knid_routes, pod_cidrs, segment_node_spec, start_cluster_node_at, POD_NETWORK,
};
use testkit::measure::{env_count, report, spread};
use testkit::traffic::tcp_transfer;
use testkit::wait::wait_until;
use testkit::TestNode;

const POLL: Duration = Duration::from_millis(1);
const TIMEOUT: Duration = Duration::from_secs(120);

fn wait(what: &str, done: impl FnMut() -> bool) {
    assert!(
        wait_until(TIMEOUT, POLL, done),
        "timed out waiting for {what}"
    );
}

fn pod(node: &TestNode, id: &str) -> (PathBuf, IpAddr) {
    let (ns, v4, _) = node.attach_pod(id, |req| {
        req.interfaces[0].network = POD_NETWORK.to_owned();
    });
    (ns, v4)
}

/// Whether a TCP connection from `client` reaches `to` now (a short timeout).
fn connects(client: &NetnsHandle, to: SocketAddr) -> bool {
    knid_netops::run_in(client, || {
        TcpStream::connect_timeout(&to, Duration::from_millis(100)).is_ok()
    })
    .expect("enter the client netns")
}

fn listen(ns: &Path, ip: IpAddr) -> TcpListener {
    let handle = NetnsHandle::open(ns).expect("open netns");
    knid_netops::run_in(&handle, || TcpListener::bind(SocketAddr::new(ip, 0)))
        .expect("enter netns")
        .expect("bind")
}

fn main() {
    if !testkit::privileged() {
        return;
    }
    let joins = env_count("KNID_BENCH_N", 10);
    let mib = env_count("KNID_BENCH_MIB", 512);
    let (lan, _api_dir, api, _) = api_on_lan();
    lan.add_segment();
    for (name, index, segment) in [("node-a", 1, 0), ("node-b", 2, 0), ("node-c", 3, 1)] {
        api.add_node(segment_node_spec(name, index, segment));
    }
    let a = start_cluster_node_at(&lan, &api, "node-a", 1, 0, "");
    let b = start_cluster_node_at(&lan, &api, "node-b", 2, 0, "");
    let c = start_cluster_node_at(&lan, &api, "node-c", 3, 1, "");
    let (pa, _) = pod(&a, "pa");
    let (pb, pb4) = pod(&b, "pb");
    let (pc, pc4) = pod(&c, "pc");
    let client = NetnsHandle::open(&pa).expect("open pod netns");

    // 1. A node joins behind the router: Node created → traffic from node-a's pod to its pod.
    let mut to_route = Vec::with_capacity(joins);
    let mut to_traffic = Vec::with_capacity(joins);
    for n in 0..joins {
        let index = 10 + n as u8;
        let name = format!("join-{n}");
        let dst: ipnet::IpNet = pod_cidrs(index)[0].parse().expect("cidr");
        let started = Instant::now();
        api.add_node(segment_node_spec(&name, index, 1));
        let node = start_cluster_node_at(&lan, &api, &name, index, 1, "");
        let mut routed = None;
        wait("the new node's pod network", || {
            if routed.is_none() && knid_routes(a.host_path()).iter().any(|(d, _)| *d == dst) {
                routed = Some(started.elapsed());
            }
            node.network(POD_NETWORK).ready
        });
        let (pn, pn4) = pod(&node, "pj");
        let listener = listen(&pn, pn4);
        let to = listener.local_addr().expect("address");
        wait("a connection through the overlay", || {
            if routed.is_none() && knid_routes(a.host_path()).iter().any(|(d, _)| *d == dst) {
                routed = Some(started.elapsed());
            }
            connects(&client, to)
        });
        to_traffic.push(started.elapsed());
        to_route.push(routed.unwrap_or_else(|| started.elapsed()));
        drop(listener);
        drop(node);
        api.delete_node(&name);
        wait("the node's route gone", || {
            !knid_routes(a.host_path()).iter().any(|(d, _)| *d == dst)
        });
    }
    println!("A node joins behind the router ({joins} nodes): Node created →");
    report("route on node-a", &mut to_route);
    report("pod-to-pod TCP over VXLAN", &mut to_traffic);

    // 2. Throughput, host-gw against VXLAN, in one run.
    let bytes = mib << 20;
    let rates = |server: &Path, ip: IpAddr| -> Vec<f64> {
        (0..3)
            .map(|_| {
                let took = tcp_transfer(server, ip, &pa, bytes);
                mib as f64 / took.as_secs_f64()
            })
            .collect()
    };
    let direct = spread(rates(&pb, pb4)).expect("three transfers");
    let overlay = spread(rates(&pc, pc4)).expect("three transfers");
    println!(
        "TCP pod to pod, {mib} MiB, median of 3: host-gw {:.0} MiB/s (min {:.0}), VXLAN {:.0} \
         MiB/s (min {:.0}): VXLAN at {:.0}% of host-gw",
        direct.median,
        direct.least,
        overlay.median,
        overlay.least,
        100.0 * overlay.median / direct.median
    );
}
