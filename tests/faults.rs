//! Fault tests: the store's filesystem fills up or turns read-only under a running knid, a
//! sandbox netns vanishes in the middle of an attach, the bridge is deleted behind knid's back.
//! Each fault must fail the operations it hits with a clear error (never a panic or a hang),
//! leave no half-created kernel object, and be recovered from. Each test prints what it
//! exercised: requests, errors by code, what it verified, and the leaked objects (0).

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ipnet::IpNet;
use knid_transport::pb;
use testkit::faults::{leaked_objects, stop_and_check_store, Ext4, StoreSummary, Tally, Tmpfs};
use testkit::{TestNode, BRIDGE, RPC, SETTLE};
use ttrpc::Code;

/// The tmpfs the store-full test puts knid's state dir on.
const SMALL_FS_BYTES: u64 = 4 << 20;
/// The ext4 image of the read-only test (mkfs.ext4's journal needs a few MiB).
const EXT4_BYTES: u64 = 32 << 20;
/// Attaches tried, once the store's filesystem is full, before one must have failed: sled first
/// fills the pages it already has.
const MAX_ATTACHES_TO_FAILURE: usize = 200;
/// How long knid may take to exit once its failed store's filesystem takes writes again (it
/// probes every second).
const EXIT_AFTER_REPAIR: Duration = Duration::from_secs(15);
/// Longer than a few of knid's store probes: knid must still be up, and not ready, after it.
const PROBES: Duration = Duration::from_millis(2500);
/// The failpoint the netns test pauses an attach at: its veth exists, both ends.
const PAUSE_AFTER_VETH: &str = "attach.veth_created=sleep(2000)";

/// The IPv4 (`ipv4`) or IPv6 address of a sandbox's first interface.
fn pod_ip(sandbox: &pb::Sandbox, family: &str) -> IpAddr {
    testkit::ip_of(&sandbox.interfaces[0], family).0.addr()
}

/// Attaches sandbox `id` in a new netns of that name.
fn attach(node: &TestNode, tally: &mut Tally, id: &str) -> pb::Sandbox {
    let netns = node.netns(id);
    tally.ok(
        &format!("Attach {id}"),
        node.client()
            .attach(&node.attach_req(id, &netns, "eth0"), RPC),
    )
}

/// Detaches every sandbox in `ids`.
fn detach_all(node: &TestNode, tally: &mut Tally, ids: &[&str]) {
    for id in ids {
        tally.ok(
            &format!("Detach {id}"),
            node.client().detach(&testkit::detach_req(id), RPC),
        );
    }
}

/// A condition of the node's Status.
fn condition(status: &pb::StatusResponse, kind: &str) -> pb::Condition {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == kind)
        .unwrap_or_else(|| panic!("no {kind} in {:?}", status.conditions))
        .clone()
}

/// Attaches new sandboxes `<prefix>-<n>` until one fails with Internal, as one must once the
/// store's filesystem refuses writes. Returns the attached ones and the failed one's id, netns
/// and message.
fn attach_until_the_store_fails(
    node: &TestNode,
    tally: &mut Tally,
    prefix: &str,
) -> (Vec<pb::Sandbox>, String, PathBuf, String) {
    let client = node.client();
    let mut attached = Vec::new();
    for n in 0..MAX_ATTACHES_TO_FAILURE {
        let id = format!("{prefix}-{n}");
        let netns = node.netns(&id);
        let result = client.attach(&node.attach_req(&id, &netns, "eth0"), RPC);
        tally.count(&result);
        match result {
            Ok(sandbox) => attached.push(sandbox),
            Err(knid_transport::ClientError::Rpc {
                code: Code::INTERNAL,
                message,
            }) => return (attached, id, netns, message),
            Err(e) => panic!("Attach {id} on a failing store: {e}"),
        }
    }
    panic!("{MAX_ATTACHES_TO_FAILURE} attaches succeeded on a store that cannot write");
}

/// `message` names the store's directory, the write and the operating system's error.
fn assert_names_store_and_errno(message: &str, node: &TestNode, errno_text: &str) {
    let store = node.state_dir().join("store");
    let wanted = format!("store: write {}: {errno_text}", store.display());
    assert!(
        message.contains(&wanted),
        "{message:?} does not contain {wanted:?}"
    );
}

/// What a store that cannot write must look like from outside: Status not ready with
/// StoreReady false naming the error, work that writes refused with Unavailable naming it, the
/// failed attach's netns empty, the kernel holding exactly the host ends of the pods attached
/// (`live`), which still work.
fn assert_failed_store_behaviour(
    node: &TestNode,
    tally: &mut Tally,
    errno_text: &str,
    failed_netns: &Path,
    live: &[pb::Sandbox],
) {
    let client = node.client();
    let status = tally.ok("Status", client.status(RPC));
    assert!(!status.ready, "ready with a failed store: {status:?}");
    let store = condition(&status, "StoreReady");
    assert!(
        !store.status && store.reason == "WriteFailed" && store.message.contains(errno_text),
        "{store:?}"
    );
    tally.verified(format!(
        "Status: not ready, StoreReady false: {}",
        store.message
    ));

    let netns = node.netns("refused");
    let message = tally.fails(
        "Attach on a failed store",
        client.attach(&node.attach_req("refused", &netns, "eth0"), RPC),
        Code::UNAVAILABLE,
    );
    assert!(
        message.contains("store failed") && message.contains(errno_text),
        "{message}"
    );
    let message = tally.fails(
        "Detach on a failed store",
        client.detach(&testkit::detach_req(&live[0].id), RPC),
        Code::UNAVAILABLE,
    );
    assert!(message.contains(errno_text), "{message}");
    tally.verified(format!(
        "Attach and Detach refused: Unavailable, {message:?}"
    ));

    testkit::wait_only_lo(failed_netns);
    testkit::wait_only_lo(&netns);
    let live_ends: BTreeSet<String> = live
        .iter()
        .map(|s| s.interfaces[0].host_ifname.clone())
        .collect();
    testkit::wait_for("only the live pods' host ends", SETTLE, || {
        let links: BTreeSet<String> = node.host_kn_links().into_iter().map(|l| l.name).collect();
        links == live_ends
    });
    for pod in live {
        node.assert_host_side(&pod.interfaces[0]);
        testkit::assert_pod_side(Path::new(&pod.netns_path), &pod.interfaces[0]);
    }
    tally.verified(format!(
        "the failed attach left no veth and no pod interface; the {} live pod(s) intact",
        live.len()
    ));
}

/// After the restart that recovers a failed store: ready, the failed attach gone (and its
/// addresses free), every live pod attached as before, records and kernel consistent; then a
/// new attach works and talks to an old pod, and everything detaches cleanly. Returns the
/// leaked objects found at the end (asserted none).
fn assert_recovered(
    node: &mut TestNode,
    tally: &mut Tally,
    failed: &str,
    live: &[pb::Sandbox],
) -> usize {
    let status = tally.ok("Status after restart", node.client().status(RPC));
    assert!(status.ready, "{:?}", status.conditions);
    assert!(condition(&status, "StoreReady").status);
    node.assert_not_found(failed);
    let mut want: Vec<String> = live.iter().map(|s| s.id.clone()).collect();
    want.sort();
    assert_eq!(node.list_ids(), want);
    for pod in live {
        let req = testkit::inspect_req(&pod.id);
        let now = tally.ok("Inspect after restart", node.client().inspect(&req, RPC));
        assert_eq!(now.interfaces, pod.interfaces, "{} changed", pod.id);
    }
    let leaks = leaked_objects(node);
    assert!(leaks.is_empty(), "after recovery: {leaks:#?}");
    tally.verified("after the restart: ready, the failed attach gone, records = kernel objects");

    let after = attach(node, tally, "after-recovery");
    testkit::tcp_exchange(
        Path::new(&live[0].netns_path),
        pod_ip(&live[0], "ipv4"),
        Path::new(&after.netns_path),
    );
    tally.verified("a new attach works and reaches an old pod");
    let mut ids: Vec<&str> = live.iter().map(|s| s.id.as_str()).collect();
    ids.push("after-recovery");
    detach_all(node, tally, &ids);
    let leaks = leaked_objects(node);
    assert!(leaks.is_empty(), "after detaching everything: {leaks:#?}");
    assert_eq!(stop_and_check_store(node), StoreSummary::default());
    leaks.len()
}

#[test]
fn a_full_store_fails_attaches_cleanly_and_knid_restarts_into_a_consistent_state_once_space_returns(
) {
    if !testkit::privileged() {
        return;
    }
    let mut tally = Tally::new("store full");
    let mut node = TestNode::prepare("", &[], &[]);
    let fs = Tmpfs::mount(node.state_dir(), SMALL_FS_BYTES);
    node.restart();
    let mut live = vec![attach(&node, &mut tally, "before")];

    let ballast = fs.fill();
    tally.verified(format!(
        "state dir on a {SMALL_FS_BYTES}-byte tmpfs, filled by a {ballast}-byte ballast"
    ));
    let (attached, failed, failed_netns, message) =
        attach_until_the_store_fails(&node, &mut tally, "full");
    const ENOSPC: &str = "No space left on device (os error 28)";
    assert_names_store_and_errno(&message, &node, ENOSPC);
    tally.verified(format!(
        "{} attach(es) fit in sled's pages, then Internal: {message:?}",
        attached.len()
    ));
    live.extend(attached);
    assert_failed_store_behaviour(&node, &mut tally, ENOSPC, &failed_netns, &live);
    std::thread::sleep(PROBES);
    assert!(node.is_running(), "knid exited while its disk is full");
    assert!(!tally.ok("Status", node.client().status(RPC)).ready);

    // Space returns: sled cannot take writes again in this process, so knid exits for its
    // supervisor (here the test) to restart it.
    fs.empty();
    let status = node.wait_exit(EXIT_AFTER_REPAIR);
    assert_eq!(status.code(), Some(1), "knid exit status {status}");
    let log = node.log_text();
    assert!(
        log.contains("store failed; exiting for the supervisor to restart knid")
            && log.contains(ENOSPC),
        "no fatal line naming the store failure in the log"
    );
    tally.verified(format!(
        "space back: knid exited by itself ({status}) with a fatal log line"
    ));
    node.restart();
    let leaked = assert_recovered(&mut node, &mut tally, &failed, &live);
    tally.print(leaked);
}

#[test]
fn a_store_turned_read_only_fails_attaches_cleanly_and_recovers_after_repair_and_restart() {
    if !testkit::privileged() {
        return;
    }
    let mut tally = Tally::new("store read-only");
    let mut node = TestNode::prepare("", &[], &[]);
    let fs = Ext4::mount(&node.dir().join("state.img"), node.state_dir(), EXT4_BYTES);
    node.restart();
    let live = vec![attach(&node, &mut tally, "before")];

    // The attach is on disk (sled's own fsync would have put it there within a second), so it
    // is what the failure must not lose.
    fs.sync();
    fs.fail();
    assert!(fs.read_only(), "ext4 is not read-only after its error");
    tally.verified("state dir on ext4 (errors=remount-ro), turned read-only by an ext4 error");
    let (attached, failed, failed_netns, message) =
        attach_until_the_store_fails(&node, &mut tally, "ro");
    assert!(
        attached.is_empty(),
        "attached on a read-only store: {attached:?}"
    );
    const EROFS: &str = "Read-only file system (os error 30)";
    assert_names_store_and_errno(&message, &node, EROFS);
    tally.verified(format!("the next attach: Internal, {message:?}"));
    assert_failed_store_behaviour(&node, &mut tally, EROFS, &failed_netns, &live);
    // A failed ext4 stays read-only until it is unmounted: knid stays up and not ready.
    std::thread::sleep(PROBES);
    assert!(
        node.is_running(),
        "knid exited while its store is read-only"
    );

    // The operator's repair: stop knid (the store failed, so it exits non-zero), unmount,
    // fsck, mount, start it again.
    let status = node.stop();
    assert_eq!(status.code(), Some(1), "knid exit status {status}");
    assert!(node.log_text().contains(EROFS));
    fs.repair();
    tally.verified("knid stopped (exit 1), ext4 repaired by umount, e2fsck, mount");
    node.restart();
    let leaked = assert_recovered(&mut node, &mut tally, &failed, &live);
    tally.print(leaked);
}

#[test]
fn a_netns_deleted_during_an_attach_fails_it_and_everything_it_created_is_rolled_back() {
    if !testkit::privileged() || !testkit::failpoints_built() {
        return;
    }
    let mut tally = Tally::new("netns vanishes during an attach");
    let mut node = TestNode::start_with("", &[("KNID_FAILPOINTS", PAUSE_AFTER_VETH)], &[]);
    let other = attach(&node, &mut tally, "other");

    let doomed = node.netns("doomed");
    let paused = "failpoint attach.veth_created: sleeping";
    let pauses_before = node.log_text().matches(paused).count();
    let attaching = {
        let client = node.client();
        let req = node.attach_req("doomed", &doomed, "eth0");
        std::thread::spawn(move || client.attach(&req, RPC))
    };
    testkit::wait_for("the attach to pause with its veth created", SETTLE, || {
        node.log_text().matches(paused).count() > pauses_before
    });
    assert!(
        testkit::link_in(&doomed, "eth0").is_some(),
        "no pod end in the netns while the attach is paused"
    );
    assert_eq!(
        node.host_kn_links().len(),
        2,
        "host ends of other and doomed"
    );
    // `ip netns delete`: unmount and remove; only knid's open handle keeps it alive.
    node.remove_netns(&doomed);
    let result = attaching.join().expect("the attach thread");
    let message = tally.fails(
        "Attach whose netns was deleted meanwhile",
        result,
        Code::FAILED_PRECONDITION,
    );
    assert!(
        message.contains(&format!("netns {} vanished", doomed.display())),
        "{message}"
    );
    tally.verified(format!("the paused attach failed: {message:?}"));
    node.assert_not_found("doomed");
    assert_eq!(node.list_ids(), ["other"]);
    let leaks = leaked_objects(&node);
    assert!(leaks.is_empty(), "after the failed attach: {leaks:#?}");
    tally.verified("no record, no host veth, no bridge port, no address left of it");

    let after = attach(&node, &mut tally, "after");
    testkit::tcp_exchange(
        Path::new(&other.netns_path),
        pod_ip(&other, "ipv4"),
        Path::new(&after.netns_path),
    );
    tally.verified("a later attach works and reaches the earlier pod");
    detach_all(&node, &mut tally, &["other", "after"]);
    let leaks = leaked_objects(&node);
    assert!(leaks.is_empty(), "after detaching everything: {leaks:#?}");
    assert_eq!(stop_and_check_store(&mut node), StoreSummary::default());
    tally.print(leaks.len());
}

#[test]
fn a_deleted_bridge_fails_attaches_until_setup_node_network_recreates_it_and_reconnects_its_pods() {
    if !testkit::privileged() {
        return;
    }
    let mut tally = Tally::new("bridge deleted behind knid's back");
    let mut node = TestNode::start("");
    let client = node.client();
    let a = attach(&node, &mut tally, "a");
    let b = attach(&node, &mut tally, "b");
    let (a_ns, b_ns) = (Path::new(&a.netns_path), Path::new(&b.netns_path));
    testkit::tcp_exchange(b_ns, pod_ip(&b, "ipv4"), a_ns);
    let old = node.bridge(BRIDGE);
    assert!(node
        .host_rtnl()
        .delete_link_by_name(BRIDGE)
        .expect("delete the bridge"));

    let status = tally.ok("Status", client.status(RPC));
    let network = condition(&status, "NetworkReady");
    assert!(!status.ready && !network.status, "{status:?}");
    assert_eq!(network.reason, "NodeNetworkBroken");
    assert!(
        network
            .message
            .contains("network default: bridge knid0 is missing"),
        "{network:?}"
    );
    tally.verified(format!("Status: NetworkReady false, {:?}", network.message));

    // Twice: with the bridge's index remembered from the attaches above, then looked up.
    let c_ns = node.netns("c");
    for attempt in ["first", "second"] {
        let message = tally.fails(
            &format!("{attempt} Attach without the bridge"),
            client.attach(&node.attach_req("c", &c_ns, "eth0"), RPC),
            Code::FAILED_PRECONDITION,
        );
        for part in [
            "network default: bridge knid0 is missing",
            "SetupNodeNetwork",
        ] {
            assert!(message.contains(part), "{message:?} lacks {part:?}");
        }
        tally.verified(format!("{attempt} attach: FailedPrecondition, {message:?}"));
    }
    assert!(
        node.host_rtnl()
            .link_by_name(BRIDGE)
            .expect("look up")
            .is_none(),
        "an attach set the bridge up again"
    );
    testkit::wait_only_lo(&c_ns);
    node.assert_not_found("c");
    let host_ends = node.host_kn_links();
    assert_eq!(
        host_ends.len(),
        2,
        "host ends of a and b only: {host_ends:?}"
    );
    assert!(
        host_ends.iter().all(|l| l.controller.is_none()),
        "the pods' ports went with the bridge: {host_ends:?}"
    );
    assert_eq!(node.capacity_used("default"), 4);

    tally.ok("SetupNodeNetwork", client.setup_node_network(RPC));
    let bridge = node.bridge(BRIDGE);
    assert_ne!(bridge.index, old.index, "a new bridge");
    assert!(bridge.up, "{BRIDGE} is down");
    assert_eq!(bridge.mtu, 1500);
    assert_eq!(bridge.mac, Some(knid_core::node::bridge_mac(BRIDGE)));
    let addrs = testkit::addresses_in(node.host_path(), BRIDGE);
    for gateway in ["10.88.0.1/24", "fd00:88::1/64"] {
        let gateway: IpNet = gateway.parse().expect("cidr");
        assert!(
            addrs.contains(&gateway),
            "{gateway} not on {BRIDGE}: {addrs:?}"
        );
    }
    let ports: BTreeSet<String> = node
        .bridge_ports(BRIDGE)
        .into_iter()
        .map(|l| l.name)
        .collect();
    let want: BTreeSet<String> = [&a, &b]
        .iter()
        .map(|s| s.interfaces[0].host_ifname.clone())
        .collect();
    assert_eq!(ports, want, "the attached pods' ports");
    assert!(tally.ok("Status", client.status(RPC)).ready);
    testkit::tcp_exchange(b_ns, pod_ip(&b, "ipv4"), a_ns);
    testkit::tcp_exchange(a_ns, pod_ip(&a, "ipv6"), b_ns);
    tally.verified(
        "SetupNodeNetwork: bridge re-created (MAC, MTU, gateways), a and b its ports again, \
         TCP between them over IPv4 and IPv6",
    );

    let c = tally.ok(
        "Attach after the repair",
        client.attach(&node.attach_req("c", &c_ns, "eth0"), RPC),
    );
    node.assert_host_side(&c.interfaces[0]);
    testkit::assert_pod_side(&c_ns, &c.interfaces[0]);
    testkit::tcp_exchange(a_ns, pod_ip(&a, "ipv4"), &c_ns);

    // A restart repairs too: the bridge deleted while knid is down comes back with its ports.
    let status = node.stop();
    assert_eq!(status.code(), Some(0), "knid exit status {status}");
    assert!(node
        .host_rtnl()
        .delete_link_by_name(BRIDGE)
        .expect("delete the bridge"));
    node.restart();
    assert_eq!(node.bridge_ports(BRIDGE).len(), 3, "ports after a restart");
    testkit::tcp_exchange(&c_ns, pod_ip(&c, "ipv4"), b_ns);
    tally.verified("a new attach works; a restart also re-creates the bridge with its 3 ports");

    let leaks = leaked_objects(&node);
    assert!(leaks.is_empty(), "{leaks:#?}");
    detach_all(&node, &mut tally, &["a", "b", "c"]);
    let leaks = leaked_objects(&node);
    assert!(leaks.is_empty(), "after detaching everything: {leaks:#?}");
    assert_eq!(stop_and_check_store(&mut node), StoreSummary::default());
    tally.print(leaks.len());
}
