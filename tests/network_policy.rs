//! Kubernetes NetworkPolicy across three knid nodes, modelled on the upstream e2e netpol suite
//! (kubernetes/kubernetes test/e2e/network/netpol: its model and truth tables): namespaces x,
//! y and z with pods a, b and c each, spread over the nodes (some pairs on one node's bridge,
//! some across nodes), every pod serving TCP and UDP on ports 80 and 81. For each case the
//! stand-in API server (testkit's, strict as kube-apiserver; no real one runs here) serves the
//! policies, and the whole reachability matrix is probed with real traffic over IPv4 and IPv6
//! and compared with the case's truth table, written out by hand as upstream writes them.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use knid_transport::pb;
use protobuf::MessageField;
use serde_json::{json, Value};
use testkit::cluster_node::{api_on_lan, node_spec, start_cluster_node, Creds, POD_NETWORK};
use testkit::kube_api::{ContainerPort, KubeApi, PodSpec};
use testkit::reachability::{probe_all, Probe, Proto, Servers};
use testkit::{wait_for, TestNode, RPC};

const NAMESPACES: [&str; 3] = ["x", "y", "z"];
const PODS: [&str; 3] = ["a", "b", "c"];
const NODES: [&str; 3] = ["node-a", "node-b", "node-c"];
/// How long a policy change may take to reach every node.
const CONVERGE: Duration = Duration::from_secs(30);

/// One pod of the model.
struct ModelPod {
    name: String,
    netns: PathBuf,
    ips: Vec<IpAddr>,
    _servers: Servers,
}

/// The pods in upstream's order: x/a, x/b, x/c, y/a, ...
struct Model {
    pods: Vec<ModelPod>,
}

impl Model {
    fn start(api: &KubeApi, nodes: &[TestNode]) -> Model {
        let mut pods = Vec::new();
        for (n, ns) in NAMESPACES.iter().enumerate() {
            api.put_namespace(ns, &[("ns", ns)]);
            for (p, pod) in PODS.iter().enumerate() {
                let at = (n * 3 + p) % nodes.len();
                let node = &nodes[at];
                let id = format!("{ns}-{pod}");
                let netns = node.netns(&id);
                let mut req = node.attach_req(&id, &netns, "eth0");
                req.interfaces[0].network = POD_NETWORK.to_owned();
                req.pod = MessageField::some(pb::PodRef {
                    name: (*pod).to_owned(),
                    namespace: (*ns).to_owned(),
                    uid: id.clone(),
                    ..Default::default()
                });
                req.labels.insert("pod".into(), (*pod).into());
                let sandbox = node
                    .client()
                    .attach(&req, RPC)
                    .unwrap_or_else(|e| panic!("Attach {id}: {e}"));
                let ips: Vec<IpAddr> = sandbox.interfaces[0]
                    .ips
                    .iter()
                    .map(|ip| {
                        let addr = ip.address.split('/').next().expect("address");
                        addr.parse().expect("an address")
                    })
                    .collect();
                assert_eq!(ips.len(), 2, "{id} has one address per family: {ips:?}");
                let port = |name: &str, port: u16, protocol: &str| ContainerPort {
                    name: Some(name.into()),
                    port,
                    protocol: protocol.into(),
                };
                api.put_pod(PodSpec {
                    namespace: (*ns).into(),
                    name: (*pod).into(),
                    labels: [("pod".to_string(), (*pod).to_string())].into(),
                    node: NODES[at].into(),
                    ips: ips.iter().map(ToString::to_string).collect(),
                    ports: vec![
                        port("serve-80-tcp", 80, "TCP"),
                        port("serve-80-udp", 80, "UDP"),
                        port("serve-81-tcp", 81, "TCP"),
                        port("serve-81-udp", 81, "UDP"),
                    ],
                    host_network: false,
                });
                pods.push(ModelPod {
                    name: format!("{ns}/{pod}"),
                    _servers: Servers::start(&netns),
                    netns,
                    ips,
                });
            }
        }
        Model { pods }
    }

    /// The matrix of `proto`/`port` over one family: a row per source, `.` reached, `X` not.
    fn matrix(&self, proto: Proto, port: u16, v6: bool) -> Vec<String> {
        let mut probes = Vec::new();
        for from in &self.pods {
            for to in &self.pods {
                let ip = to
                    .ips
                    .iter()
                    .copied()
                    .find(|ip| ip.is_ipv6() == v6)
                    .expect("family");
                probes.push(Probe {
                    from: from.netns.clone(),
                    to: SocketAddr::new(ip, port),
                    proto,
                });
            }
        }
        let answers = probe_all(&probes);
        answers
            .chunks(self.pods.len())
            .map(|row| row.iter().map(|ok| if *ok { '.' } else { 'X' }).collect())
            .collect()
    }

    /// Waits until both families' matrices of `proto`/`port` are `want`.
    fn expect(&self, case: &str, proto: Proto, port: u16, want: &[&str]) {
        let started = Instant::now();
        loop {
            let got: Vec<Vec<String>> = [false, true]
                .into_iter()
                .map(|v6| self.matrix(proto, port, v6))
                .collect();
            if got.iter().all(|m| m == want) {
                return;
            }
            if started.elapsed() > CONVERGE {
                let names: Vec<&str> = self.pods.iter().map(|p| p.name.as_str()).collect();
                panic!(
                    "{case}: {proto:?}/{port}: rows {names:?}\n want {want:?}\n IPv4 {:?}\n IPv6 {:?}",
                    got[0], got[1]
                );
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

fn policy(api: &KubeApi, ns: &str, name: &str, spec: Value) {
    api.put_network_policy(ns, name, spec)
        .unwrap_or_else(|e| panic!("put policy {ns}/{name}: {e}"));
}

const OPEN: [&str; 9] = [
    ".........",
    ".........",
    ".........",
    ".........",
    ".........",
    ".........",
    ".........",
    ".........",
    ".........",
];

#[test]
fn network_policy_truth_tables_hold_across_three_nodes_for_ipv4_and_ipv6() {
    if !testkit::privileged() {
        return;
    }
    let (lan, _dir, api, _port) = api_on_lan();
    for (i, name) in NODES.iter().enumerate() {
        api.add_node(node_spec(name, i as u8 + 1));
    }
    let nodes: Vec<TestNode> = NODES
        .iter()
        .enumerate()
        .map(|(i, name)| start_cluster_node(&lan, &api, name, i as u8 + 1, Creds::InCluster))
        .collect();
    for node in &nodes {
        wait_for("the pod CIDR", CONVERGE, || {
            let c = node.condition("PodCIDR");
            c.status
        });
    }
    let model = Model::start(&api, &nodes);

    // Without a policy every pod reaches every pod, on one node and across.
    model.expect("no policy", Proto::Tcp, 80, &OPEN);

    // Default deny ingress in x: nothing reaches x's pods (but themselves); they reach out.
    policy(&api, "x", "deny-ingress", json!({"podSelector": {}}));
    let deny_x_in: Vec<String> = (0..9)
        .map(|row| {
            (0..9)
                .map(|col| if col < 3 && col != row { 'X' } else { '.' })
                .collect()
        })
        .collect();
    let want: Vec<&str> = deny_x_in.iter().map(String::as_str).collect();
    model.expect("default deny ingress", Proto::Tcp, 80, &want);

    // Allow x/a from pods b of x (podSelector) and from namespace y (namespaceSelector
    // matchExpressions on the automatic name label), on top of the deny.
    policy(
        &api,
        "x",
        "allow-a",
        json!({
            "podSelector": {"matchLabels": {"pod": "a"}},
            "ingress": [{"from": [
                {"podSelector": {"matchLabels": {"pod": "b"}}},
                {"namespaceSelector": {"matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["y"]}]}}
            ]}]
        }),
    );
    model.expect(
        "podSelector or namespaceSelector",
        Proto::Tcp,
        80,
        &[
            ".XX......",
            "..X......",
            "XX.......",
            ".XX......",
            ".XX......",
            ".XX......",
            "XXX......",
            "XXX......",
            "XXX......",
        ],
    );

    // Ports: x/a allows 81 only (in addition, nothing on 80 from z).
    api.delete_network_policy("x", "allow-a");
    policy(
        &api,
        "x",
        "allow-81",
        json!({
            "podSelector": {"matchLabels": {"pod": "a"}},
            "ingress": [{"ports": [{"port": "serve-81-tcp"}, {"port": 81, "protocol": "UDP"}]}]
        }),
    );
    // x/b and x/c stay closed by the deny; x/a opens 81 (TCP by name, UDP by number) to all.
    let only_a: [&str; 9] = [
        ".XX......",
        "..X......",
        ".X.......",
        ".XX......",
        ".XX......",
        ".XX......",
        ".XX......",
        ".XX......",
        ".XX......",
    ];
    model.expect("named port 81 tcp", Proto::Tcp, 81, &only_a);
    model.expect("udp 81", Proto::Udp, 81, &only_a);
    model.expect("port 80 still denied", Proto::Tcp, 80, &want);

    // Egress: deny all egress from y (and its pods still answer what reaches them).
    api.delete_network_policy("x", "allow-81");
    api.delete_network_policy("x", "deny-ingress");
    policy(
        &api,
        "y",
        "deny-egress",
        json!({"podSelector": {}, "policyTypes": ["Egress"]}),
    );
    let deny_y_out: Vec<String> = (0..9)
        .map(|row| {
            (0..9)
                .map(|col| {
                    if (3..6).contains(&row) && col != row {
                        'X'
                    } else {
                        '.'
                    }
                })
                .collect()
        })
        .collect();
    let want: Vec<&str> = deny_y_out.iter().map(String::as_str).collect();
    model.expect("default deny egress", Proto::Tcp, 80, &want);

    // ipBlock with except: y's egress to every pod of x but x/b (by address).
    let x_b = &model.pods[1].ips;
    policy(
        &api,
        "y",
        "to-blocks",
        json!({
            "podSelector": {},
            "policyTypes": ["Egress"],
            "egress": [{"to": [
                {"ipBlock": {"cidr": "10.244.0.0/16", "except": [format!("{}/32", x_b[0])]}},
                {"ipBlock": {"cidr": "fd00:10:244::/48", "except": [format!("{}/128", x_b[1])]}}
            ]}]
        }),
    );
    model.expect(
        "ipBlock except",
        Proto::Tcp,
        80,
        &[
            ".........",
            ".........",
            ".........",
            ".X.......",
            ".X.......",
            ".X.......",
            ".........",
            ".........",
            ".........",
        ],
    );

    // Deleted: open again.
    api.delete_network_policy("y", "to-blocks");
    api.delete_network_policy("y", "deny-egress");
    model.expect("policies deleted", Proto::Tcp, 80, &OPEN);
    drop(model);
    drop(nodes);
}
