//! knids of a cluster on one machine (cluster mode): each in its own private node namespace,
//! plugged into a [`Lan`] as station `index`, reading the Node objects of a [`KubeApi`]
//! stand-in. Node `index` owns pod CIDRs `10.244.<index>.0/24` and `fd00:10:244:<index>::/64`
//! and has its LAN addresses as InternalIPs.

use std::net::IpAddr;
use std::path::Path;

use ipnet::IpNet;
use knid_netops::route::RTPROT_KNID;

use crate::kernel::routes_in;
use crate::kube_api::{KubeApi, NodeSpec};
use crate::lan::{node_addr, segment_addr, Lan};
use crate::node::TestNode;

/// The network of the cluster's pods on every node (bridge `kpod0`).
pub const POD_NETWORK: &str = "pods";

/// How a node reaches the API server.
#[derive(Debug, Clone, Copy)]
pub enum Creds {
    /// As a pod: service account token and CA, `KUBERNETES_SERVICE_HOST` and `_PORT`.
    InCluster,
    /// Through the stand-in's kubeconfig.
    Kubeconfig,
}

/// The pod CIDRs of node `index`, IPv4 first.
pub fn pod_cidrs(index: u8) -> Vec<String> {
    vec![
        format!("10.244.{index}.0/24"),
        format!("fd00:10:244:{index:x}::/64"),
    ]
}

/// The Node object of station `index`: its pod CIDRs and LAN addresses.
pub fn node_spec(name: &str, index: u8) -> NodeSpec {
    NodeSpec {
        name: name.to_owned(),
        pod_cidrs: pod_cidrs(index),
        internal_ips: vec![
            node_addr(index, false).to_string(),
            node_addr(index, true).to_string(),
        ],
    }
}

/// The Node object of station `index` on segment `segment` of a [`Lan`] with a router
/// ([`Lan::add_segment`]): its pod CIDRs and its addresses there.
pub fn segment_node_spec(name: &str, index: u8, segment: u8) -> NodeSpec {
    NodeSpec {
        name: name.to_owned(),
        pod_cidrs: pod_cidrs(index),
        internal_ips: vec![
            segment_addr(segment, index, false).to_string(),
            segment_addr(segment, index, true).to_string(),
        ],
    }
}

/// A [`Lan`] with the stand-in API server on it, as every cluster test and bench starts: the
/// LAN, the API server's dir, the server and its port (to restart it on after a stop). Bind
/// them in this order (`let (mut lan, _dir, api, port) = api_on_lan();`), so the server stops
/// before its dir and the LAN go.
pub fn api_on_lan() -> (Lan, tempfile::TempDir, KubeApi, u16) {
    let lan = Lan::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let api = KubeApi::start(lan.listen(0), dir.path()).expect("start the API stand-in");
    let port = api.addr().port();
    (lan, dir, api, port)
}

/// A v4-only Node of station `index` whose /29 pod CIDR (`10.244.<index>.0/29`) holds five
/// pods: a pod network that fills up.
pub fn small_node_spec(name: &str, index: u8) -> NodeSpec {
    NodeSpec {
        name: name.to_owned(),
        pod_cidrs: vec![format!("10.244.{index}.0/29")],
        internal_ips: vec![node_addr(index, false).to_string()],
    }
}

/// Attaches pod `id` (`eth0`, in a netns of its own) to [`POD_NETWORK`]; its first address.
pub fn attach_to_pod_network(node: &TestNode, id: &str) -> String {
    let netns = node.netns(id);
    let mut req = node.attach_req(id, &netns, "eth0");
    req.interfaces[0].network = POD_NETWORK.to_owned();
    let sandbox = node
        .client()
        .attach(&req, crate::RPC)
        .unwrap_or_else(|e| panic!("Attach {id}: {e}"));
    sandbox.interfaces[0].ips[0].address.clone()
}

/// Detaches pod `id`.
pub fn detach_pod(node: &TestNode, id: &str) {
    node.client()
        .detach(&crate::requests::detach_req(id), crate::RPC)
        .unwrap_or_else(|e| panic!("Detach {id}: {e}"));
}

/// Starts a knid in cluster mode as Node `name`, plugged into `lan` as station `index` before
/// it starts. Its routes to other nodes are checked against the kernel every second.
pub fn start_cluster_node(
    lan: &Lan,
    api: &KubeApi,
    name: &str,
    index: u8,
    creds: Creds,
) -> TestNode {
    start_cluster_node_with(lan, api, name, index, creds, None)
}

/// [`start_cluster_node`] running `bin` instead of this build's knid (another release).
pub fn start_cluster_node_with(
    lan: &Lan,
    api: &KubeApi,
    name: &str,
    index: u8,
    creds: Creds,
    bin: Option<&Path>,
) -> TestNode {
    start(
        lan,
        api,
        (name, index),
        Opts {
            creds,
            bin,
            top_toml: "",
            cluster_toml: "",
            network_toml: "",
            at: (0, false),
        },
    )
}

/// [`start_cluster_node`] (as a pod) with `cluster_toml`, more keys of the `[cluster]` table
/// (one per line): its water marks, its publishing intervals.
pub fn start_cluster_node_tuned(
    lan: &Lan,
    api: &KubeApi,
    name: &str,
    index: u8,
    cluster_toml: &str,
) -> TestNode {
    start(
        lan,
        api,
        (name, index),
        Opts::pod(cluster_toml, "", (0, false)),
    )
}

/// [`start_cluster_node_tuned`] on segment `segment` of a [`Lan`] with a router
/// ([`Lan::add_segment`]), its default routes via the router.
pub fn start_cluster_node_at(
    lan: &Lan,
    api: &KubeApi,
    name: &str,
    index: u8,
    segment: u8,
    cluster_toml: &str,
) -> TestNode {
    start_cluster_node_at_with(lan, api, (name, index, segment), cluster_toml, "")
}

/// [`start_cluster_node_at`] with `network_toml`, more keys of the pod network's table (one per
/// line), e.g. its `mtu`.
pub fn start_cluster_node_at_with(
    lan: &Lan,
    api: &KubeApi,
    (name, index, segment): (&str, u8, u8),
    cluster_toml: &str,
    network_toml: &str,
) -> TestNode {
    start(
        lan,
        api,
        (name, index),
        Opts::pod(cluster_toml, network_toml, (segment, true)),
    )
}

/// [`start_cluster_node`] (as a pod) with `top_toml`, more top-level keys of knid's
/// configuration (`dan_dir = ...`).
pub fn start_cluster_node_configured(
    lan: &Lan,
    api: &KubeApi,
    (name, index): (&str, u8),
    top_toml: &str,
) -> TestNode {
    let mut opts = Opts::pod("", "", (0, false));
    opts.top_toml = top_toml;
    start(lan, api, (name, index), opts)
}

/// How a node starts.
struct Opts<'a> {
    creds: Creds,
    bin: Option<&'a Path>,
    /// More top-level keys.
    top_toml: &'a str,
    /// More keys of the `[cluster]` table.
    cluster_toml: &'a str,
    /// More keys of the pod network's table.
    network_toml: &'a str,
    /// The segment and whether the node routes through the router.
    at: (u8, bool),
}

impl<'a> Opts<'a> {
    /// As a pod (service account), this build's knid.
    fn pod(cluster_toml: &'a str, network_toml: &'a str, at: (u8, bool)) -> Opts<'a> {
        Opts {
            creds: Creds::InCluster,
            bin: None,
            top_toml: "",
            cluster_toml,
            network_toml,
            at,
        }
    }
}

fn start(lan: &Lan, api: &KubeApi, (name, index): (&str, u8), opts: Opts<'_>) -> TestNode {
    let Opts {
        creds,
        bin,
        top_toml,
        cluster_toml,
        network_toml,
        at,
    } = opts;
    let creds_toml = match creds {
        Creds::InCluster => format!(
            "service_account_dir = \"{}\"",
            api.serviceaccount_dir().display()
        ),
        Creds::Kubeconfig => format!("kubeconfig = \"{}\"", api.kubeconfig_path().display()),
    };
    let config = format!(
        "{top_toml}\n[cluster]\nenabled = true\nroute_resync = \"1s\"\n{creds_toml}\n{cluster_toml}\n\n\
         [networks.{POD_NETWORK}]\nkind = \"bridge\"\nbridge = \"kpod0\"\npod_cidr_from_node = true\n{network_toml}\n"
    );
    let port = api.addr().port().to_string();
    let host = api.addr().ip().to_string();
    let env = [
        ("NODE_NAME", name),
        ("KUBERNETES_SERVICE_HOST", host.as_str()),
        ("KUBERNETES_SERVICE_PORT", port.as_str()),
    ];
    let mut node = TestNode::prepare(&config, &env, &[]);
    node.set_bin(bin);
    lan.plug_at(node.host_path(), index, at.0, at.1);
    node.restart();
    node
}

/// The `i`th of many Nodes a bench watches: a /24 of 10.200.0.0/14 and an InternalIP on
/// 172.20.0.0/16 (give a node an address there, [`WATCHED_LAN`], to route them all).
pub fn watched_node(i: usize) -> NodeSpec {
    NodeSpec {
        name: format!("many-{i:04}"),
        pod_cidrs: vec![format!("10.{}.{}.0/24", 200 + i / 256, i % 256)],
        internal_ips: vec![format!("172.20.{}.{}", i / 250, 1 + i % 250)],
    }
}

/// The Node changes counted in each release of knid's code after a big change of the Nodes,
/// from its debug log ("released … of knid's binary after <n> Node change(s) applied").
pub fn code_releases_after_node_changes(node: &TestNode) -> Vec<usize> {
    node.log_text()
        .lines()
        .filter_map(|line| {
            line.split_once("of knid's binary after ")?
                .1
                .split_once(' ')
        })
        .filter(|(_, rest)| rest.starts_with("Node change(s) applied"))
        .filter_map(|(count, _)| count.parse().ok())
        .collect()
}

/// An address for a node's `eth0` that makes every [`watched_node`]'s InternalIP directly
/// connected.
pub const WATCHED_LAN: &str = "172.20.255.254/16";

/// knid's routes to other nodes in the kernel of netns `host`: (destination, gateway), both
/// families, sorted.
pub fn knid_routes(host: &Path) -> Vec<(IpNet, IpAddr)> {
    let mut out: Vec<(IpNet, IpAddr)> = [false, true]
        .into_iter()
        .flat_map(|v6| routes_in(host, v6))
        .filter(|r| r.protocol == RTPROT_KNID)
        .filter_map(|r| r.gateway.map(|g| (r.dst, g)))
        .collect();
    out.sort();
    out
}

/// The routes a node must have to stations `peers` (their pod CIDRs via their LAN
/// addresses), sorted as [`knid_routes`].
pub fn routes_to(peers: &[u8]) -> Vec<(IpNet, IpAddr)> {
    let mut out = Vec::new();
    for &i in peers {
        for (cidr, v6) in pod_cidrs(i).iter().zip([false, true]) {
            out.push((cidr.parse().expect("cidr"), node_addr(i, v6)));
        }
    }
    out.sort();
    out
}
