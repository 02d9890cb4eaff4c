//! The upstream NetworkPolicy e2e suite's model on knid nodes (kubernetes/kubernetes
//! test/e2e/network/netpol): namespaces x, y and z labelled `ns=<name>`, pods a, b and c in each
//! labelled `pod=<name>`, spread over the nodes (pod `i` of the nine on node `i % nodes`), each
//! attached by knid with its pod identity and serving TCP and UDP on ports 80 and 81 under the
//! named ports `serve-80-tcp`, `serve-80-udp`, `serve-81-tcp` and `serve-81-udp`, and a Pod
//! object for each in the stand-in API server. [`Model::expect`] probes the whole matrix.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use knid_transport::pb;
use protobuf::MessageField;

use crate::cluster_node::{api_on_lan, node_spec, start_cluster_node, Creds, POD_NETWORK};
use crate::kube_api::{ContainerPort, KubeApi, PodSpec};
use crate::lan::Lan;
use crate::node::TestNode;
use crate::reachability::{probe_all, Probe, Proto, Servers};

/// The namespaces, in the matrix's order.
pub const NAMESPACES: [&str; 3] = ["x", "y", "z"];
/// The pods of each namespace, in order.
pub const PODS: [&str; 3] = ["a", "b", "c"];
/// How long a change may take to show in the matrix.
pub const CONVERGE: Duration = Duration::from_secs(30);
/// The three nodes' names (stations 1, 2 and 3 of the LAN).
pub const NODES: [&str; 3] = ["node-a", "node-b", "node-c"];

/// Turns the namespace-wide `bridge-nf-call-iptables` and `-ip6tables` off in `node`'s netns:
/// what still hands bridged traffic to nftables is knid's own bridge setting.
pub fn bridge_sysctls_off(node: &TestNode) {
    knid_netops::run_in(&node.host(), || {
        for family in ["iptables", "ip6tables"] {
            let path = format!("/proc/sys/net/bridge/bridge-nf-call-{family}");
            std::fs::write(&path, "0").unwrap_or_else(|e| panic!("write {path}: {e}"));
        }
    })
    .expect("enter the node's netns");
}

/// Three cluster-mode knids ([`NODES`]) on a LAN with the stand-in API server, each changed by
/// `tune` once started, with its bridge sysctls off ([`bridge_sysctls_off`]) and its pod CIDR
/// known. Bind the result in this order, so the nodes stop before the server and the LAN go.
pub fn three_nodes(
    mut tune: impl FnMut(&mut TestNode),
) -> (Lan, tempfile::TempDir, KubeApi, Vec<TestNode>) {
    let (lan, dir, api, _port) = api_on_lan();
    for (i, name) in NODES.iter().enumerate() {
        api.add_node(node_spec(name, i as u8 + 1));
    }
    let mut nodes = Vec::new();
    for (i, name) in NODES.iter().enumerate() {
        let mut node = start_cluster_node(&lan, &api, name, i as u8 + 1, Creds::InCluster);
        tune(&mut node);
        bridge_sysctls_off(&node);
        crate::wait_for("the pod CIDR", CONVERGE, || {
            node.condition("PodCIDR").status
        });
        nodes.push(node);
    }
    (lan, dir, api, nodes)
}

/// One pod of the model.
pub struct ModelPod {
    /// `namespace/name`.
    pub name: String,
    /// Its network namespace.
    pub netns: PathBuf,
    /// Its addresses, IPv4 first.
    pub ips: Vec<IpAddr>,
    /// The node it runs on (index into the nodes given).
    pub node: usize,
    _servers: Servers,
}

impl ModelPod {
    /// Its address of one family.
    pub fn ip(&self, v6: bool) -> IpAddr {
        self.ips
            .iter()
            .copied()
            .find(|ip| ip.is_ipv6() == v6)
            .expect("an address of the family")
    }
}

/// The nine pods in upstream's order: x/a, x/b, x/c, y/a, ... z/c.
pub struct Model {
    /// The pods.
    pub pods: Vec<ModelPod>,
}

/// Attaches pod `ns/name` on `node` (Node `node_name`) with `labels` and publishes its Pod
/// object; returns it serving.
pub fn add_pod(
    api: &KubeApi,
    (node, node_name, at): (&TestNode, &str, usize),
    ns: &str,
    name: &str,
    labels: &[(&str, &str)],
) -> ModelPod {
    let id = format!("{ns}-{name}");
    let netns = node.netns(&id);
    let mut req = node.attach_req(&id, &netns, "eth0");
    req.interfaces[0].network = POD_NETWORK.to_owned();
    req.pod = MessageField::some(pb::PodRef {
        name: name.to_owned(),
        namespace: ns.to_owned(),
        uid: id.clone(),
        ..Default::default()
    });
    for (k, v) in labels {
        req.labels.insert((*k).into(), (*v).into());
    }
    let sandbox = node
        .client()
        .attach(&req, crate::RPC)
        .unwrap_or_else(|e| panic!("Attach {id}: {e}"));
    let ips: Vec<IpAddr> = sandbox.interfaces[0]
        .ips
        .iter()
        .map(|ip| {
            let addr = ip.address.split('/').next().expect("address");
            addr.parse().expect("an address")
        })
        .collect();
    let port = |name: &str, port: u16, protocol: &str| ContainerPort {
        name: Some(name.into()),
        port,
        protocol: protocol.into(),
    };
    api.put_pod(PodSpec {
        namespace: ns.into(),
        name: name.into(),
        labels: labels
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect(),
        node: node_name.into(),
        ips: ips.iter().map(ToString::to_string).collect(),
        ports: vec![
            port("serve-80-tcp", 80, "TCP"),
            port("serve-80-udp", 80, "UDP"),
            port("serve-81-tcp", 81, "TCP"),
            port("serve-81-udp", 81, "UDP"),
        ],
        host_network: false,
    });
    ModelPod {
        name: format!("{ns}/{name}"),
        _servers: Servers::start(&netns),
        netns,
        ips,
        node: at,
    }
}

impl Model {
    /// Creates the namespaces and pods on `nodes` (named `node_names`).
    pub fn start(api: &KubeApi, nodes: &[TestNode], node_names: &[&str]) -> Model {
        let mut pods = Vec::new();
        for (n, ns) in NAMESPACES.iter().enumerate() {
            api.put_namespace(ns, &[("ns", ns)]);
            for (p, pod) in PODS.iter().enumerate() {
                let at = (n * 3 + p) % nodes.len();
                let placed = (&nodes[at], node_names[at], at);
                pods.push(add_pod(api, placed, ns, pod, &[("pod", pod)]));
            }
        }
        Model { pods }
    }

    /// The pod `ns/name`.
    pub fn pod(&self, name: &str) -> &ModelPod {
        self.pods
            .iter()
            .find(|p| p.name == name)
            .unwrap_or_else(|| panic!("no pod {name}"))
    }

    /// The matrix of `proto`/`port` over one family: a row per source, `.` reached, `X` not.
    pub fn matrix(&self, proto: Proto, port: u16, v6: bool) -> Vec<String> {
        let mut probes = Vec::new();
        for from in &self.pods {
            for to in &self.pods {
                probes.push(Probe {
                    from: from.netns.clone(),
                    to: SocketAddr::new(to.ip(v6), port),
                    proto,
                });
            }
        }
        probe_all(&probes)
            .chunks(self.pods.len())
            .map(|row| row.iter().map(|ok| if *ok { '.' } else { 'X' }).collect())
            .collect()
    }

    /// Waits (up to [`CONVERGE`]) until both families' matrices of `proto`/`port` are `want`;
    /// panics with both matrices otherwise. Returns how long it took.
    pub fn expect(&self, case: &str, proto: Proto, port: u16, want: &[&str]) -> Duration {
        let started = Instant::now();
        loop {
            let got: Vec<Vec<String>> = [false, true]
                .into_iter()
                .map(|v6| self.matrix(proto, port, v6))
                .collect();
            if got.iter().all(|m| m == want) {
                return started.elapsed();
            }
            if started.elapsed() > CONVERGE {
                let names: Vec<&str> = self.pods.iter().map(|p| p.name.as_str()).collect();
                panic!(
                    "{case}: {proto:?}/{port}: rows and columns {names:?}\n want {want:?}\n \
                     IPv4 {:?}\n IPv6 {:?}",
                    got[0], got[1]
                );
            }
            std::thread::sleep(Duration::from_millis(300));
        }
    }
}
