//! testkit's stand-in Kubernetes API server on its own, for `.cargo/knid-hot.sh`'s cluster-mode
//! run: `kube_standin DIR NODES` serves on a loopback port of the network namespace it runs in,
//! writes its client files under DIR (`DIR/kubeconfig`), holds Node `hot` (station 1 of
//! testkit's LAN: the knid traced) and NODES Nodes more ([`testkit::cluster_node::watched_node`]),
//! prints `ADDR <address>` for each address Node `hot` needs on its `eth0` and `READY`, and runs
//! until killed.

use std::net::TcpListener;
use std::path::PathBuf;

use testkit::cluster_node::{node_spec, watched_node, WATCHED_LAN};
use testkit::kube_api::KubeApi;
use testkit::lan::node_addr;

fn main() {
    let mut args = std::env::args().skip(1);
    let usage = "usage: kube_standin DIR NODES";
    let dir = PathBuf::from(args.next().expect(usage));
    let nodes: usize = args
        .next()
        .map(|n| n.parse().expect("NODES must be a number"))
        .expect(usage);
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    let api = KubeApi::start(listener, &dir).expect("start the stand-in API server");
    api.add_node(node_spec("hot", 1));
    for i in 0..nodes {
        api.add_node(watched_node(i));
    }
    println!("ADDR {}/24", node_addr(1, false));
    println!("ADDR {}/64", node_addr(1, true));
    println!("ADDR {WATCHED_LAN}");
    println!("READY");
    loop {
        std::thread::park();
    }
}
