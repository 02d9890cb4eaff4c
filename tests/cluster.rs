//! Cluster mode end to end: a three-node cluster on one machine. Three knids, each in its own
//! private "node" namespace, share an L2 (a bridge in an "underlay" namespace, testkit's
//! [`Lan`]) with a stand-in Kubernetes API server (testkit's [`KubeApi`]: the real API's JSON
//! over TLS with a bearer token; no real API server can run here) and an "outside" host. Two
//! nodes read the API as a pod does (service account token and CA, `KUBERNETES_SERVICE_HOST`
//! and `_PORT`), the third through a kubeconfig. Everything is checked against the nodes'
//! kernels and with real traffic.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use ipnet::IpNet;
use knid_transport::pb;
use testkit::cli::{knictl_exits, knictl_ok};
use testkit::cluster_node::{
    api_on_lan, code_releases_after_node_changes, knid_routes, node_spec, pod_cidrs, routes_to,
    start_cluster_node, watched_node, Creds, POD_NETWORK, WATCHED_LAN,
};
use testkit::cni::tool_in;
use testkit::kube_api::{KubeApi, NodeSpec};
use testkit::lan::node_addr;
use testkit::{tcp_exchange, wait_for, TestNode, RPC};

/// How long a change in the API may take to reach every node's kernel.
const CONVERGE: Duration = Duration::from_secs(30);

fn status(node: &TestNode) -> pb::StatusResponse {
    node.client().status(RPC).expect("Status")
}

fn wait_condition(node: &TestNode, kind: &str, want: bool, reason: &str) {
    wait_for(&format!("{kind} = {want} ({reason})"), CONVERGE, || {
        let c = node.condition(kind);
        c.status == want && c.reason == reason
    });
}

fn wait_routes(nodes: &[(&TestNode, u8)], peers: &[u8]) {
    for (node, own) in nodes {
        let want: Vec<u8> = peers.iter().copied().filter(|p| p != own).collect();
        let want = routes_to(&want);
        wait_for(
            &format!("routes of station {own} to stations {peers:?}"),
            CONVERGE,
            || knid_routes(node.host_path()) == want,
        );
    }
}

/// Attaches a pod on the cluster network; its netns and addresses (IPv4, IPv6).
fn pod(node: &TestNode, id: &str) -> (PathBuf, IpAddr, IpAddr) {
    node.attach_pod(id, |req| {
        req.interfaces[0].network = POD_NETWORK.to_owned();
    })
}

fn in_cidr(addr: IpAddr, index: u8) -> bool {
    pod_cidrs(index)
        .iter()
        .any(|c| c.parse::<IpNet>().expect("cidr").contains(&addr))
}

fn lists(api: &KubeApi) -> usize {
    api.requests()
        .iter()
        .filter(|r| !r.watch && r.path == "/api/v1/nodes" && r.status == 200)
        .count()
}

#[test]
fn three_nodes_route_each_others_pods_and_masquerade_only_what_leaves_the_cluster() {
    if !testkit::privileged() {
        return;
    }
    let (mut lan, _api_dir, api, port) = api_on_lan();
    // node-a's Node object comes later: its pod network must wait for it.
    api.add_node(node_spec("node-b", 2));
    api.add_node(node_spec("node-c", 3));
    let a = start_cluster_node(&lan, &api, "node-a", 1, Creds::InCluster);
    let b = start_cluster_node(&lan, &api, "node-b", 2, Creds::InCluster);
    let c = start_cluster_node(&lan, &api, "node-c", 3, Creds::Kubeconfig);
    let outside = lan.station("outside", 200);
    let nodes = [(&a, 1), (&b, 2), (&c, 3)];

    // Before its Node exists, node-a attaches nothing to the pod network, and says why.
    wait_condition(&a, "PodCIDR", false, "NotAllocated");
    assert!(
        !status(&a).ready,
        "a node without its pod CIDR is not ready"
    );
    let netns = a.netns("early");
    let mut req = a.attach_req("early", &netns, "eth0");
    req.interfaces[0].network = POD_NETWORK.to_owned();
    let message = testkit::expect_code(
        a.client().attach(&req, RPC),
        ttrpc::Code::UNAVAILABLE,
        "attach before the pod CIDR is known",
    );
    assert!(
        message.contains("Node node-a") && message.contains("spec.podCIDRs"),
        "{message}"
    );
    let net = a.network("pods");
    assert!(net.subnets.is_empty() && !net.ready, "{net:?}");
    assert_eq!(net.subnets_from, "Node node-a spec.podCIDRs");
    a.assert_not_found("early");

    api.add_node(node_spec("node-a", 1));
    for (node, index) in nodes {
        wait_condition(node, "PodCIDR", true, "");
        assert_eq!(node.network("pods").subnets, pod_cidrs(index));
        assert!(status(node).ready, "station {index} ready");
        let cluster = status(node).cluster.into_option().expect("cluster info");
        assert_eq!(cluster.pod_cidrs, pod_cidrs(index));
        assert_eq!(cluster.pod_cidr_network, "pods");
        assert!(cluster.api_reachable);
    }
    wait_routes(&nodes, &[1, 2, 3]);

    // Pods reach pods of other nodes with their own addresses, both families.
    let (pa, pa4, pa6) = pod(&a, "pa");
    let (pb, pb4, pb6) = pod(&b, "pb");
    let (pc, pc4, pc6) = pod(&c, "pc");
    assert!(in_cidr(pa4, 1) && in_cidr(pa6, 1) && in_cidr(pb4, 2) && in_cidr(pc6, 3));
    assert_eq!(tcp_exchange(&pb, pb4, &pa), pa4, "a→b seen by b, IPv4");
    assert_eq!(tcp_exchange(&pb, pb6, &pa), pa6, "a→b seen by b, IPv6");
    assert_eq!(tcp_exchange(&pc, pc4, &pb), pb4, "b→c seen by c, IPv4");
    assert_eq!(tcp_exchange(&pa, pa6, &pc), pc6, "c→a seen by a, IPv6");
    // Leaving the cluster, they are the node.
    let out4: IpAddr = "192.168.100.200".parse().expect("ip");
    let out6: IpAddr = "fd00:100::c8".parse().expect("ip");
    assert_eq!(tcp_exchange(&outside, out4, &pa), node_addr(1, false));
    assert_eq!(tcp_exchange(&outside, out6, &pa), node_addr(1, true));
    assert_eq!(tcp_exchange(&outside, out4, &pc), node_addr(3, false));

    // knictl shows where the pod CIDR came from and each route.
    let text = knictl_ok(&a, &["networks"]);
    assert!(text.contains("from Node node-a spec.podCIDRs"), "{text}");
    assert!(
        text.contains("10.244.2.0/24") && text.contains("installed"),
        "{text}"
    );
    // Exit 0: no check fails.
    let doctor = knictl_ok(&a, &["doctor"]);
    assert!(
        doctor.contains("node-route") && doctor.contains("pod-cidr"),
        "{doctor}"
    );

    // A fourth node gets routes on all three; deleting it removes them.
    api.add_node(node_spec("node-d", 4));
    wait_routes(&nodes, &[1, 2, 3, 4]);
    api.delete_node("node-d");
    wait_routes(&nodes, &[1, 2, 3]);

    // A watch cut off while the cluster changed and the API server forgot that history: knid
    // gets 410 Gone, lists again and keeps following.
    let before = lists(&api);
    api.stop();
    api.add_node(node_spec("node-e", 5));
    api.expire_history();
    api.restart(lan.listen(port));
    wait_routes(&nodes, &[1, 2, 3, 5]);
    assert!(
        lists(&api) >= before + 3,
        "every knid listed again after 410"
    );
    // A watch merely dropped resumes where it was.
    api.drop_watches();
    api.delete_node("node-e");
    wait_routes(&nodes, &[1, 2, 3]);

    // A route someone deletes comes back.
    tool_in(a.host_path(), "ip", &["route", "del", "10.244.2.0/24"]);
    wait_routes(&nodes, &[1, 2, 3]);

    // The API server goes away: nothing changes for running pods, routes or new pods.
    api.stop();
    wait_condition(&a, "KubernetesAPIReachable", false, "Unreachable");
    assert!(
        status(&a).ready,
        "losing the API server leaves the node ready"
    );
    assert_eq!(knid_routes(a.host_path()), routes_to(&[2, 3]));
    assert_eq!(
        tcp_exchange(&pb, pb4, &pa),
        pa4,
        "a→b with the API server away"
    );
    let (_, pa2, _) = pod(&a, "pa2");
    assert!(in_cidr(pa2, 1));
    api.restart(lan.listen(port));
    wait_condition(&a, "KubernetesAPIReachable", true, "");
    api.add_node(node_spec("node-f", 6));
    wait_routes(&nodes, &[1, 2, 3, 6]);
    api.delete_node("node-f");
    wait_routes(&nodes, &[1, 2, 3]);

    // A node that is not on the LAN is reached over the overlay (backend auto) once it
    // publishes its VXLAN endpoint; until then it is reported, never routed.
    api.add_node(NodeSpec {
        name: "node-g".into(),
        pod_cidrs: vec!["10.244.7.0/24".into()],
        internal_ips: vec!["10.99.0.7".into()],
    });
    wait_condition(&a, "NodeRoutesReady", false, "AwaitingVtep");
    assert_eq!(knid_routes(a.host_path()), routes_to(&[2, 3]));
    let doctor = knictl_exits(&a, 5, &["doctor"]);
    assert!(
        doctor.contains("node node-g 10.244.7.0/24 (vxlan)") && doctor.contains("knid.io/vxlan"),
        "{doctor}"
    );
    assert!(
        status(&a).ready,
        "another node's trouble leaves this one ready"
    );
    api.delete_node("node-g");
    wait_condition(&a, "NodeRoutesReady", true, "");

    // node-a's pod CIDR changes under its pods (the API server forbids it, but a Node deleted
    // and created again does it): refused loudly, the old one stays on node-a.
    api.update_node(NodeSpec {
        pod_cidrs: vec!["10.244.9.0/24".into()],
        ..node_spec("node-a", 1)
    });
    wait_condition(&a, "PodCIDR", false, "Changed");
    assert_eq!(
        a.network("pods").subnets,
        pod_cidrs(1),
        "the old CIDR stays"
    );
    assert!(status(&a).ready, "a refused change leaves the node ready");
    assert!(a.log_text().contains("changed from"), "logged");
}

#[test]
fn many_nodes_added_release_knids_code_once_their_routes_are_in() {
    if !testkit::privileged() {
        return;
    }
    const ADDED: usize = 150;
    let (lan, _api_dir, api, _) = api_on_lan();
    api.add_node(node_spec("node-a", 1));
    let a = start_cluster_node(&lan, &api, "node-a", 1, Creds::InCluster);
    wait_condition(&a, "PodCIDR", true, "");
    tool_in(
        a.host_path(),
        "ip",
        &["addr", "add", WATCHED_LAN, "dev", "eth0"],
    );
    // A list of a node or two is no big change: the release at the list's end is all.
    assert!(code_releases_after_node_changes(&a).is_empty());

    for i in 0..ADDED {
        api.add_node(watched_node(i));
    }
    wait_for("routes to every Node added", CONVERGE, || {
        knid_routes(a.host_path()).len() == ADDED
    });
    // Once their passes are over (and the last release is 30 s old), knid's code goes, every
    // change applied counted.
    wait_for(
        "knid's code released after the Nodes added",
        3 * CONVERGE,
        || !code_releases_after_node_changes(&a).is_empty(),
    );
    let counted = code_releases_after_node_changes(&a);
    assert_eq!(counted.len(), 1, "{counted:?}");
    assert!(counted[0] >= ADDED, "{counted:?}");
    // knid goes on routing what changes next.
    api.delete_node(&watched_node(0).name);
    wait_for("the deleted Node's route gone", CONVERGE, || {
        knid_routes(a.host_path()).len() == ADDED - 1
    });
}
