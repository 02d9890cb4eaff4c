//! Cluster mode across restarts: three knid nodes (testkit's [`Lan`] and [`KubeApi`] stand-in,
//! as in `tests/cluster.rs`) with pods attached, restarted as a DaemonSet restarts them:
//! SIGTERM with the API server up, SIGKILL with it down. Every time, from the kernels and with
//! real traffic: running pods keep their addresses, reach pods of the other nodes and leave the
//! cluster as their node (egress checked from an outside namespace); the node is ready again
//! with its own state, before the API answers; new pods attach.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ipnet::IpNet;
use nix::sys::signal::{kill, Signal};
use testkit::cluster_node::{
    api_on_lan, node_spec, pod_cidrs, start_cluster_node, Creds, POD_NETWORK,
};
use testkit::kernel::addresses_in;
use testkit::lan::node_addr;
use testkit::{tcp_exchange, wait_for, TestNode};

/// How long a change may take to show.
const CONVERGE: Duration = Duration::from_secs(30);

fn out4() -> IpAddr {
    "192.168.100.200".parse().expect("ip")
}

fn out6() -> IpAddr {
    "fd00:100::c8".parse().expect("ip")
}

struct Pod {
    ns: PathBuf,
    v4: IpAddr,
    v6: IpAddr,
}

fn pod(node: &TestNode, id: &str) -> Pod {
    let (ns, v4, v6) = node.attach_pod(id, |req| {
        req.interfaces[0].network = POD_NETWORK.to_owned();
    });
    Pod { ns, v4, v6 }
}

fn in_cidr(addr: IpAddr, index: u8) -> bool {
    pod_cidrs(index)
        .iter()
        .any(|c| c.parse::<IpNet>().expect("cidr").contains(&addr))
}

/// The pod's `eth0` addresses as its kernel has them.
fn kernel_addresses(pod: &Pod) -> Vec<IpAddr> {
    let mut out: Vec<IpAddr> = addresses_in(&pod.ns, "eth0")
        .into_iter()
        .map(|a| a.addr())
        .filter(|a| !matches!(a, IpAddr::V6(v6) if v6.segments()[0] == 0xfe80))
        .collect();
    out.sort();
    out
}

/// What a node's running pods must still have and do after its knid restarted.
fn assert_pods_unchanged(
    what: &str,
    node: &TestNode,
    index: u8,
    pods: &[(&str, &Pod)],
    peer: &Pod,
    outside: &Path,
) {
    for (id, pod) in pods {
        let mut want = vec![pod.v4, pod.v6];
        want.sort();
        assert_eq!(kernel_addresses(pod), want, "{what}: {id}'s addresses");
        let seen = node.inspect(id);
        let ips: Vec<String> = seen.interfaces[0]
            .ips
            .iter()
            .map(|ip| ip.address.clone())
            .collect();
        assert!(
            ips.iter().any(|a| a.starts_with(&pod.v4.to_string())),
            "{what}: {id} as knid has it: {ips:?}"
        );
        assert_eq!(
            tcp_exchange(&peer.ns, peer.v4, &pod.ns),
            pod.v4,
            "{what}: {id} → a pod of another node, IPv4"
        );
        assert_eq!(
            tcp_exchange(&peer.ns, peer.v6, &pod.ns),
            pod.v6,
            "{what}: {id} → a pod of another node, IPv6"
        );
        assert_eq!(
            tcp_exchange(outside, out4(), &pod.ns),
            node_addr(index, false),
            "{what}: {id} leaves the cluster as its node, IPv4"
        );
        assert_eq!(
            tcp_exchange(outside, out6(), &pod.ns),
            node_addr(index, true),
            "{what}: {id} leaves the cluster as its node, IPv6"
        );
    }
}

fn assert_ready(what: &str, node: &TestNode, index: u8) {
    let status = node.client().status(testkit::RPC).expect("Status");
    let failing: Vec<String> = status
        .conditions
        .iter()
        .filter(|c| !c.status)
        .map(|c| format!("{} {} {}", c.type_, c.reason, c.message))
        .collect();
    assert!(status.ready, "{what}: not ready: {failing:?}");
    assert!(node.condition("NetworkReady").status, "{what}: {failing:?}");
    assert!(node.condition("PodCIDR").status, "{what}: {failing:?}");
    let net = node.network(POD_NETWORK);
    assert_eq!(
        net.subnets,
        pod_cidrs(index),
        "{what}: the network's subnets"
    );
    assert!(net.ready && net.schedulable, "{what}: {net:?}");
}

fn kill_hard(node: &mut TestNode) {
    kill(node.pid(), Signal::SIGKILL).expect("SIGKILL knid");
    let status = node.wait_exit(Duration::from_secs(10));
    assert!(!status.success(), "SIGKILL: {status}");
}

#[test]
fn a_restart_with_the_api_up_or_down_never_changes_what_running_pods_see() {
    if !testkit::privileged() {
        return;
    }
    let (mut lan, _api_dir, api, port) = api_on_lan();
    for (name, index) in [("n1", 1), ("n2", 2), ("n3", 3)] {
        api.add_node(node_spec(name, index));
    }
    let mut a = start_cluster_node(&lan, &api, "n1", 1, Creds::InCluster);
    let mut b = start_cluster_node(&lan, &api, "n2", 2, Creds::InCluster);
    let c = start_cluster_node(&lan, &api, "n3", 3, Creds::Kubeconfig);
    let outside = lan.station("outside", 200);
    for (node, index) in [(&a, 1), (&b, 2), (&c, 3)] {
        wait_for(&format!("node {index}'s pod CIDR"), CONVERGE, || {
            node.condition("PodCIDR").status && node.network(POD_NETWORK).ready
        });
    }
    let pa = pod(&a, "pa");
    let pb = pod(&b, "pb");
    let pc = pod(&c, "pc");
    assert!(in_cidr(pa.v4, 1) && in_cidr(pb.v6, 2) && in_cidr(pc.v4, 3));
    wait_for("routes between the nodes", CONVERGE, || {
        tcp_exchange(&pc.ns, pc.v4, &pa.ns) == pa.v4
    });
    assert_pods_unchanged("before", &a, 1, &[("pa", &pa)], &pc, &outside);

    // (a) SIGTERM and start again with the API server up (defect 1: the network came back
    // without subnets, then refused the Node's own pod CIDR for good).
    let status = a.stop();
    assert_eq!(status.code(), Some(0), "SIGTERM: {status}");
    a.restart();
    assert_ready("restarted with the API up", &a, 1);
    assert_pods_unchanged(
        "restarted with the API up",
        &a,
        1,
        &[("pa", &pa)],
        &pc,
        &outside,
    );
    wait_for("the Node read again", CONVERGE, || {
        let c = a.condition("PodCIDR");
        c.status && c.reason.is_empty()
    });
    let pa2 = pod(&a, "pa2");
    assert!(in_cidr(pa2.v4, 1) && in_cidr(pa2.v6, 1));
    assert_pods_unchanged(
        "Node read after the restart",
        &a,
        1,
        &[("pa", &pa), ("pa2", &pa2)],
        &pc,
        &outside,
    );
    let log = a.log_text();
    assert!(!log.contains("subnets cannot change"), "{log}");

    // (b) SIGKILL, and start again while the API server is away (defect 2: egress dropped at
    // once, nothing attachable until the API answered).
    kill_hard(&mut b);
    api.stop();
    b.restart();
    assert_ready("restarted with the API down", &b, 2);
    let pod_cidr = b.condition("PodCIDR");
    assert_eq!(pod_cidr.reason, "Recorded", "{pod_cidr:?}");
    assert!(!b.condition("KubernetesAPIReachable").status);
    assert_pods_unchanged(
        "restarted with the API down",
        &b,
        2,
        &[("pb", &pb)],
        &pc,
        &outside,
    );
    let pb2 = pod(&b, "pb2");
    assert!(
        in_cidr(pb2.v4, 2) && in_cidr(pb2.v6, 2),
        "attach with the API down"
    );
    assert_pods_unchanged(
        "a pod attached with the API down",
        &b,
        2,
        &[("pb2", &pb2)],
        &pa,
        &outside,
    );

    // The API server comes back: the Node confirms the recorded CIDR, nothing moves.
    api.restart(lan.listen(port));
    wait_for("n2 reads its Node again", CONVERGE, || {
        let c = b.condition("PodCIDR");
        c.status && c.reason.is_empty() && b.condition("KubernetesAPIReachable").status
    });
    assert_ready("the API back", &b, 2);
    assert_pods_unchanged(
        "the API back",
        &b,
        2,
        &[("pb", &pb), ("pb2", &pb2)],
        &pa2,
        &outside,
    );
    let pb3 = pod(&b, "pb3");
    assert!(in_cidr(pb3.v4, 2));

    // SIGKILL with the API up, once more: nothing of the above was luck of the timing.
    kill_hard(&mut a);
    a.restart();
    assert_ready("killed with the API up", &a, 1);
    assert_pods_unchanged(
        "killed with the API up",
        &a,
        1,
        &[("pa", &pa), ("pa2", &pa2)],
        &pb3,
        &outside,
    );

    // A store that never recorded the pod CIDR (a routed network migrated from schema 1, or
    // a record lost): knid waits for the Node as at a first start, then takes its pod CIDR,
    // which holds every address the pods have, instead of refusing it for good (defect 1).
    let status = a.stop();
    assert_eq!(status.code(), Some(0), "{status}");
    {
        let store = a.open_store();
        store
            .remove_network(POD_NETWORK)
            .expect("forget the record");
    }
    a.restart();
    wait_for("n1 takes its Node's pod CIDR again", CONVERGE, || {
        let c = a.condition("PodCIDR");
        c.status && c.reason.is_empty()
    });
    assert_ready("restarted without a record", &a, 1);
    assert_pods_unchanged(
        "restarted without a record",
        &a,
        1,
        &[("pa", &pa), ("pa2", &pa2)],
        &pb3,
        &outside,
    );
    let log = a.log_text();
    assert!(!log.contains("subnets cannot change"), "{log}");
}
