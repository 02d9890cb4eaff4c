//! Upgrades from the previous release (`.ci/previous-release`, built from its git tag by
//! testkit's [`release`]): pods attached by the old knid keep their addresses and traffic under
//! this build, which migrates the old store when the release wrote an older schema (a kill in
//! the middle of the migration included), inspects, checks, garbage-collects and detaches
//! them, leaving nothing. Then a downgrade: an old knid of an older schema refuses the migrated
//! store, naming both schema versions, and touches no pod; one of the same schema runs on it
//! and keeps every pod. Once on a single node, once in cluster mode (with the API server away
//! during the upgrade).

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ipnet::IpNet;
use knid_store::SCHEMA_VERSION;
use knid_transport::pb;
use nix::sys::signal::{kill, Signal};
use testkit::cluster_node::{
    api_on_lan, node_spec, pod_cidrs, start_cluster_node_with, Creds, POD_NETWORK,
};
use testkit::lan::node_addr;
use testkit::release::{self, Release};
use testkit::{tcp_exchange, wait_for, TestNode, RPC};

const CONVERGE: Duration = Duration::from_secs(30);

const NETWORKS: &str = r#"
[networks.default]
bridge = "knid0"
subnets = ["10.88.0.0/24", "fd00:88::/64"]

[networks.edge]
kind = "routed"
subnets = ["10.77.0.0/24", "fd00:77::/64"]
"#;

struct Pod {
    id: &'static str,
    ns: PathBuf,
    v4: IpAddr,
    /// `inspect`'s answer under the old knid.
    seen: pb::Sandbox,
}

fn pod(node: &TestNode, id: &'static str, network: &str) -> Pod {
    let (ns, v4, _) = node.attach_pod(id, |req| {
        req.interfaces[0].network = network.to_owned();
    });
    Pod {
        id,
        ns,
        v4,
        seen: node.inspect(id),
    }
}

/// What an upgraded knid must still report and the kernel still carry for `pod`.
fn assert_kept(what: &str, node: &TestNode, pod: &Pod) {
    let now = node.inspect(pod.id);
    let addrs = |s: &pb::Sandbox| -> Vec<String> {
        s.interfaces
            .iter()
            .flat_map(|i| i.ips.iter().map(|ip| ip.address.clone()))
            .collect()
    };
    assert_eq!(
        addrs(&now),
        addrs(&pod.seen),
        "{what}: {}'s addresses",
        pod.id
    );
    assert_eq!(
        now.interfaces[0].mac, pod.seen.interfaces[0].mac,
        "{what}: {}'s MAC",
        pod.id
    );
    let kernel: Vec<IpNet> = testkit::addresses_in(&pod.ns, "eth0");
    for a in addrs(&pod.seen) {
        let want: IpNet = a.parse().expect("cidr");
        assert!(
            kernel.iter().any(|k| k.addr() == want.addr()),
            "{what}: {} lost {a} in its netns: {kernel:?}",
            pod.id
        );
    }
}

/// Every pod's guard is in its own table of knid's (`knid-NN`), as built from its record, and
/// none is left in the single table of knid up to 0.4, which is gone.
fn assert_guards_moved(node: &TestNode, pods: &[&Pod]) {
    let guards = node.guard_chains("knid");
    assert_eq!(guards.len(), pods.len(), "{guards:?}");
    for pod in pods {
        let iface = &pod.seen.interfaces[0];
        let chain = guards
            .iter()
            .find(|c| c.name == iface.host_ifname)
            .unwrap_or_else(|| panic!("{} has no guard: {guards:?}", pod.id));
        assert_eq!(
            chain.table,
            knid_netops::nft::guard_table("knid", &iface.host_ifname),
            "{}'s guard",
            pod.id
        );
        assert!(chain.summary.starts_with(&iface.mac), "{chain:?}");
    }
    let tables = testkit::cni::tool_in(node.host_path(), "nft", &["list", "tables", "netdev"]);
    assert!(
        !tables.lines().any(|l| l.trim() == "table netdev knid"),
        "{tables}"
    );
}

fn status(node: &TestNode) -> pb::StatusResponse {
    node.client().status(RPC).expect("Status")
}

/// Stops the old knid (of store schema `old_schema`) and starts this build. When the schema is
/// older, it is first killed at each step of the store's migration (when the failpoints are
/// built): the store is left as it was or migrated, and the next start finishes. Of the same
/// schema, nothing is migrated.
fn upgrade(node: &mut TestNode, hard: bool, old_schema: u32) {
    if hard {
        kill(node.pid(), Signal::SIGKILL).expect("SIGKILL the old knid");
        node.wait_exit(Duration::from_secs(10));
    } else {
        let status = node.stop();
        assert_eq!(status.code(), Some(0), "the old knid's SIGTERM: {status}");
    }
    node.set_bin(None);
    let migrating = format!("migrating schema {old_schema} to {SCHEMA_VERSION}");
    if old_schema == SCHEMA_VERSION {
        node.restart();
        let log = node.log_text();
        assert!(
            !log.contains("migrating schema"),
            "nothing to migrate: {log}"
        );
        assert_eq!(status(node).version, env!("CARGO_PKG_VERSION"));
        return;
    }
    if testkit::failpoints_built() {
        for step in knid_store::migrate::STEPS {
            assert!(
                testkit::KIND_FAILPOINTS.contains(&step),
                "{step}: crash.rs skips it"
            );
            node.set_env("KNID_FAILPOINTS", Some(&format!("{step}=abort")));
            let (status, log) = node.run_to_exit(None, None);
            assert!(!status.success(), "{step}: {status}");
            assert!(
                log.contains(&format!("failpoint {step}: aborting")),
                "{log}"
            );
            // Killed before its first write, the migration starts over at the next start.
            assert_eq!(log.contains(&migrating), step != "store.migrating", "{log}");
        }
        node.set_env("KNID_FAILPOINTS", None);
    }
    node.restart();
    let log = node.log_text();
    // Killed with its transaction applied, the migration may have reached the disk already
    // (sled's flusher runs every second): then this start finds schema 2 and says nothing.
    if log.contains(&migrating) || !testkit::failpoints_built() {
        assert!(
            log.contains(&format!("migrated schema {old_schema} to {SCHEMA_VERSION}")),
            "the migration is logged: {log}"
        );
    }
    assert_eq!(status(node).version, env!("CARGO_PKG_VERSION"));
}

/// A downgrade to the old knid: of an older schema it refuses the migrated store, naming both
/// versions; of the same schema it runs on it. Either way every pod is left as it was, and
/// this build takes over again.
fn assert_downgrade(node: &mut TestNode, old: &Release, pods: &[&Pod]) {
    let status = node.stop();
    assert_eq!(status.code(), Some(0), "{status}");
    if old.schema == SCHEMA_VERSION {
        node.set_bin(Some(&old.knid));
        node.restart();
        for pod in pods {
            assert_kept(&format!("under {} again", old.tag), node, pod);
        }
        let status = node.stop();
        assert_eq!(status.code(), Some(0), "{status}");
        node.set_bin(None);
        node.restart();
        for pod in pods {
            assert_kept("upgraded again", node, pod);
        }
        return;
    }
    let (status, log) = node.run_to_exit(Some(&old.knid), None);
    assert_eq!(status.code(), Some(1), "{}: {status}: {log}", old.tag);
    assert!(
        log.contains(&format!("store schema {SCHEMA_VERSION} is not supported"))
            && log.contains(&format!("reads schema {}", old.schema)),
        "{log}"
    );
    node.restart();
    for pod in pods {
        assert_kept("after a refused downgrade", node, pod);
    }
}

#[test]
fn pods_of_the_previous_release_survive_the_upgrade_and_leave_nothing_behind() {
    if !testkit::privileged() {
        return;
    }
    let old = release::previous();
    let mut node = TestNode::prepare(NETWORKS, &[], &[]);
    node.set_bin(Some(&old.knid));
    node.restart();
    let old_version = status(&node).version;
    assert_ne!(
        old_version,
        env!("CARGO_PKG_VERSION"),
        "{} is another release",
        old.tag
    );
    let p1 = pod(&node, "p1", "default");
    let p2 = pod(&node, "p2", "default");
    let r1 = pod(&node, "r1", "edge");
    assert_eq!(tcp_exchange(&p2.ns, p2.v4, &p1.ns), p1.v4);
    let old_guards = node.guard_chains("knid");
    assert_eq!(old_guards.len(), 3, "{}'s guards: {old_guards:?}", old.tag);

    upgrade(&mut node, false, old.schema);
    for p in [&p1, &p2, &r1] {
        assert_kept("upgraded", &node, p);
    }
    assert_guards_moved(&node, &[&p1, &p2, &r1]);
    assert_eq!(tcp_exchange(&p2.ns, p2.v4, &p1.ns), p1.v4, "p1 → p2");
    assert_eq!(tcp_exchange(&p1.ns, p1.v4, &r1.ns), r1.v4, "r1 → p1");
    let client = node.client();
    for p in [&p1, &p2, &r1] {
        let check = pb::CheckRequest {
            sandbox_id: p.id.to_owned(),
            ..Default::default()
        };
        client
            .check(&check, RPC)
            .unwrap_or_else(|e| panic!("Check {}: {e}", p.id));
    }
    let gc = client
        .garbage_collect(
            &pb::GarbageCollectRequest {
                valid_sandbox_ids: vec!["p1".into(), "p2".into(), "r1".into()],
                ..Default::default()
            },
            RPC,
        )
        .expect("GarbageCollect");
    assert!(gc.removed.is_empty() && gc.errors.is_empty(), "{gc:?}");
    let p3 = pod(&node, "p3", "default");
    assert_ne!(p3.v4, p1.v4);
    assert_ne!(p3.v4, p2.v4);

    assert_downgrade(&mut node, &old, &[&p1, &p2, &r1, &p3]);
    assert_eq!(tcp_exchange(&p3.ns, p3.v4, &p1.ns), p1.v4);
    assert_guards_moved(&node, &[&p1, &p2, &r1, &p3]);

    for id in ["p1", "p2", "r1", "p3"] {
        node.client()
            .detach(&testkit::detach_req(id), RPC)
            .unwrap_or_else(|e| panic!("Detach {id}: {e}"));
    }
    node.wait_no_kn_links();
    let store = node.stop_with_empty_store("default");
    assert!(store.reservations("edge").expect("read").is_empty());
    node.assert_host_clean();
}

fn in_cidr(addr: IpAddr, index: u8) -> bool {
    pod_cidrs(index)
        .iter()
        .any(|c| c.parse::<IpNet>().expect("cidr").contains(&addr))
}

fn egress(outside: &Path, pod: &Pod) -> IpAddr {
    tcp_exchange(outside, "192.168.100.200".parse().expect("ip"), &pod.ns)
}

#[test]
fn cluster_pods_of_the_previous_release_keep_cross_node_traffic_and_egress_through_the_upgrade() {
    if !testkit::privileged() {
        return;
    }
    let old = release::previous();
    let (mut lan, _api_dir, api, port) = api_on_lan();
    api.add_node(node_spec("n1", 1));
    api.add_node(node_spec("n2", 2));
    let bin = Some(old.knid.as_path());
    let mut a = start_cluster_node_with(&lan, &api, "n1", 1, Creds::InCluster, bin);
    let mut b = start_cluster_node_with(&lan, &api, "n2", 2, Creds::Kubeconfig, bin);
    let outside = lan.station("outside", 200);
    for node in [&a, &b] {
        wait_for("the old knid's pod CIDR", CONVERGE, || {
            node.network(POD_NETWORK).ready
        });
    }
    let pa = pod(&a, "pa", POD_NETWORK);
    let pb = pod(&b, "pb", POD_NETWORK);
    assert!(in_cidr(pa.v4, 1) && in_cidr(pb.v4, 2));
    wait_for("the old knids' routes", CONVERGE, || {
        tcp_exchange(&pb.ns, pb.v4, &pa.ns) == pa.v4
    });
    assert_eq!(egress(&outside, &pa), node_addr(1, false));

    // n1 upgraded while the API server is away: its pod CIDR comes from the store (recorded by
    // a schema 2 release, or read off pa's addresses by the migration from schema 1), so n1 is
    // ready at once.
    api.stop();
    upgrade(&mut a, false, old.schema);
    let st = status(&a);
    assert!(st.ready, "{:?}", st.conditions);
    assert_eq!(a.condition("PodCIDR").reason, "Recorded");
    assert_eq!(a.network(POD_NETWORK).subnets, pod_cidrs(1));
    assert_kept("n1 upgraded, API away", &a, &pa);
    assert_eq!(
        tcp_exchange(&pb.ns, pb.v4, &pa.ns),
        pa.v4,
        "pa → pb unmasqueraded"
    );
    assert_eq!(egress(&outside, &pa), node_addr(1, false), "pa's egress");
    let pa2 = pod(&a, "pa2", POD_NETWORK);
    assert!(in_cidr(pa2.v4, 1));

    // The API server back: n1 confirms its CIDR; n2 is upgraded hard with the API up.
    api.restart(lan.listen(port));
    wait_for("n1 reads its Node", CONVERGE, || {
        let c = a.condition("PodCIDR");
        c.status && c.reason.is_empty()
    });
    upgrade(&mut b, true, old.schema);
    assert!(status(&b).ready);
    assert_kept("n2 upgraded", &b, &pb);
    assert_eq!(tcp_exchange(&pa2.ns, pa2.v4, &pb.ns), pb.v4, "pb → pa2");
    assert_eq!(egress(&outside, &pb), node_addr(2, false), "pb's egress");

    assert_downgrade(&mut a, &old, &[&pa, &pa2]);
    for (node, ids) in [(&a, &["pa", "pa2"][..]), (&b, &["pb"][..])] {
        for id in ids {
            node.client()
                .detach(&testkit::detach_req(id), RPC)
                .unwrap_or_else(|e| panic!("Detach {id}: {e}"));
        }
        node.wait_no_kn_links();
    }
    a.stop_with_empty_store(POD_NETWORK);
    b.stop_with_empty_store(POD_NETWORK);
}
