//! Garbage collection end to end: GarbageCollect (sweep and CNI 1.1 valid lists, dry run or
//! not), the periodic reconciler, and the boot-id rule at start-up. Every finding is checked
//! against what really changed in the kernel, the API and the store.

use std::path::{Path, PathBuf};

use knid_store::{Batch, Owner};
use knid_transport::pb;
use testkit::{TestNode, RPC, SETTLE};

/// Turns the periodic reconciler off, so only the GarbageCollect calls under test remove
/// anything.
const NO_RECONCILER: &str = r#"gc_interval = "0s""#;

/// A finding as (sandbox_id, ifname, what, reason, detail), for whole-list comparisons.
type Finding = (String, String, String, String, String);

fn finding(sandbox_id: &str, ifname: &str, what: &str, reason: &str, detail: &str) -> Finding {
    (
        sandbox_id.to_owned(),
        ifname.to_owned(),
        what.to_owned(),
        reason.to_owned(),
        detail.to_owned(),
    )
}

/// Runs GarbageCollect, asserts it reports no errors and echoes `dry_run`, and returns its
/// findings sorted.
fn collect(node: &TestNode, req: &pb::GarbageCollectRequest) -> Vec<Finding> {
    let resp = node
        .client()
        .garbage_collect(req, RPC)
        .expect("GarbageCollect");
    assert!(resp.errors.is_empty(), "GC errors: {:?}", resp.errors);
    assert_eq!(resp.dry_run, req.dry_run, "dry_run echoed");
    let mut found: Vec<Finding> = resp
        .removed
        .into_iter()
        .map(|f| (f.sandbox_id, f.ifname, f.what, f.reason, f.detail))
        .collect();
    found.sort();
    found
}

/// A sweep-only GarbageCollect request.
fn sweep(dry_run: bool) -> pb::GarbageCollectRequest {
    pb::GarbageCollectRequest {
        dry_run,
        sweep_only: true,
        ..Default::default()
    }
}

/// A CNI 1.1 GarbageCollect request keeping `sandboxes` whole and the single `attachments`.
fn keep_only(
    sandboxes: &[&str],
    attachments: &[(&str, &str)],
    dry_run: bool,
) -> pb::GarbageCollectRequest {
    pb::GarbageCollectRequest {
        valid_sandbox_ids: sandboxes.iter().map(|s| (*s).to_owned()).collect(),
        valid_attachments: attachments
            .iter()
            .map(|(id, ifname)| pb::AttachmentRef {
                sandbox_id: (*id).to_owned(),
                ifname: (*ifname).to_owned(),
                ..Default::default()
            })
            .collect(),
        dry_run,
        sweep_only: false,
        ..Default::default()
    }
}

/// Attaches sandbox `id` (one eth0) in a new netns of the same name.
fn attach(node: &TestNode, id: &str) -> (PathBuf, pb::Sandbox) {
    let netns = node.netns(id);
    let sandbox = node
        .client()
        .attach(&node.attach_req(id, &netns, "eth0"), RPC)
        .unwrap_or_else(|e| panic!("Attach {id}: {e}"));
    (netns, sandbox)
}

/// Asserts a sandbox is exactly as attached: the same record, and its kernel objects in place.
fn assert_untouched(node: &TestNode, netns: &Path, attached: &pb::Sandbox) {
    assert_eq!(
        &node.inspect(&attached.id),
        attached,
        "{} changed",
        attached.id
    );
    testkit::assert_pod_side(netns, &attached.interfaces[0]);
    node.assert_host_side(&attached.interfaces[0]);
}

/// Waits until the host link `name` is gone from the node's host netns.
fn wait_link_gone(node: &TestNode, name: &str) {
    testkit::wait_for(&format!("{name} to be deleted"), SETTLE, || {
        testkit::link_in(node.host_path(), name).is_none()
    });
}

/// Names of the `kn*` host links, sorted.
fn kn_link_names(node: &TestNode) -> Vec<String> {
    let mut names: Vec<String> = node.host_kn_links().into_iter().map(|l| l.name).collect();
    names.sort();
    names
}

#[test]
fn gc_detaches_a_sandbox_whose_netns_was_deleted_behind_knids_back() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start(NO_RECONCILER);
    let (a_ns, a) = attach(&node, "pod-a");
    let (b_ns, b) = attach(&node, "pod-b");
    let a_host = a.interfaces[0].host_ifname.clone();
    node.remove_netns(&a_ns);
    let want = vec![finding(
        "pod-a",
        "eth0",
        "attachment",
        "netns-gone",
        &format!("{} is gone", a_ns.display()),
    )];

    assert_eq!(collect(&node, &sweep(true)), want, "dry run");
    assert_eq!(
        node.capacity_used("default"),
        4,
        "a dry run released addresses"
    );
    assert_eq!(node.inspect("pod-a"), a, "a dry run changed pod-a");
    let mut ids = node.list_ids();
    ids.sort();
    assert_eq!(ids, ["pod-a", "pod-b"]);

    assert_eq!(collect(&node, &sweep(false)), want, "real run");
    node.assert_not_found("pod-a");
    assert_eq!(node.list_ids(), ["pod-b"]);
    node.wait_capacity_used("default", 2);
    wait_link_gone(&node, &a_host);
    assert_untouched(&node, &b_ns, &b);
    assert_eq!(kn_link_names(&node), [b.interfaces[0].host_ifname.clone()]);

    assert_eq!(collect(&node, &sweep(true)), [], "second dry run");
    assert_eq!(collect(&node, &sweep(false)), [], "second run");
    assert_untouched(&node, &b_ns, &b);
}

#[test]
fn reconciler_detaches_a_sandbox_whose_netns_vanished() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start(r#"gc_interval = "200ms""#);
    let (a_ns, a) = attach(&node, "pod-a");
    let (b_ns, b) = attach(&node, "pod-b");
    node.remove_netns(&a_ns);

    testkit::wait_for("the reconciler to detach pod-a", SETTLE, || {
        node.list_ids() == ["pod-b"]
    });
    node.assert_not_found("pod-a");
    node.wait_capacity_used("default", 2);
    wait_link_gone(&node, &a.interfaces[0].host_ifname);
    assert_eq!(kn_link_names(&node), [b.interfaces[0].host_ifname.clone()]);
    assert_untouched(&node, &b_ns, &b);

    let log = node.log_text();
    let line = log
        .lines()
        .find(|l| l.contains("reconciler: removed attachment pod-a/eth0"))
        .unwrap_or_else(|| panic!("no reconciler line for pod-a in the log:\n{log}"));
    assert!(
        line.contains("netns-gone") && line.contains(&format!("{} is gone", a_ns.display())),
        "reconciler line: {line}"
    );
    assert!(
        !log.contains("reconciler: removed attachment pod-b"),
        "the reconciler touched pod-b"
    );
}

#[test]
fn orphans_are_reported_by_a_dry_run_and_removed_by_gc() {
    if !testkit::privileged() || !testkit::failpoints_built() {
        return;
    }
    // Named like knid's host ends (`kn` + 10 hex digits), with no record.
    const ORPHAN: &str = "kn00deadbeef";
    const ORPHAN_PEER: &str = "gc-orphan-peer";
    let mut node = TestNode::start(NO_RECONCILER);
    let (r_ns, r) = attach(&node, "pod-r");

    let status = node.stop();
    assert_eq!(status.code(), Some(0), "knid exit status {status}");
    {
        // A reservation whose owner never got an attachment record.
        let store = node.open_store();
        let mut batch = Batch::new();
        batch.reserve(
            "default",
            "10.88.0.200".parse().expect("address"),
            Owner::new("ghost", "eth0"),
        );
        store
            .commit(&batch)
            .expect("plant the orphaned reservation");
    }
    // Start-up recovery would sweep both orphans itself; the failpoint leaves them to GC.
    node.set_env("KNID_FAILPOINTS", Some("recovery.sweep=error"));
    node.restart();
    testkit::wait_for(
        "the start-up sweep hits its failpoint",
        testkit::SETTLE,
        || {
            node.log_text()
                .contains("failpoint recovery.sweep: failing the operation")
        },
    );
    node.host_veth(ORPHAN, ORPHAN_PEER);
    // Marked as this knid's: what a crash between an attach's veth and its record leaves.
    node.set_host_link_alias(ORPHAN, &node.link_mark());
    assert_eq!(
        node.capacity_used("default"),
        3,
        "pod-r's two + the ghost's"
    );
    let want = vec![
        finding("", "", "host-link", "no-record", ORPHAN),
        finding(
            "ghost",
            "eth0",
            "reservation",
            "no-owner",
            "default/10.88.0.200",
        ),
    ];

    assert_eq!(collect(&node, &sweep(true)), want, "dry run");
    assert!(
        testkit::link_in(node.host_path(), ORPHAN).is_some(),
        "a dry run removed {ORPHAN}"
    );
    assert_eq!(node.capacity_used("default"), 3, "a dry run released");

    assert_eq!(collect(&node, &sweep(false)), want, "real run");
    assert!(
        testkit::link_in(node.host_path(), ORPHAN).is_none(),
        "{ORPHAN} still there after GC returned"
    );
    assert!(
        testkit::link_in(node.host_path(), ORPHAN_PEER).is_none(),
        "{ORPHAN_PEER} outlived its veth peer"
    );
    assert_eq!(node.capacity_used("default"), 2, "ghost's address released");
    assert_untouched(&node, &r_ns, &r);
    assert_eq!(kn_link_names(&node), [r.interfaces[0].host_ifname.clone()]);

    assert_eq!(collect(&node, &sweep(false)), [], "second run");
    assert_untouched(&node, &r_ns, &r);

    // The release is durable, and pod-r's reservations are intact.
    let status = node.stop();
    assert_eq!(status.code(), Some(0), "knid exit status {status}");
    let store = node.open_store();
    let mut held: Vec<String> = store
        .reservations("default")
        .expect("reservations")
        .into_iter()
        .map(|res| format!("{} {}/{}", res.addr, res.owner.sandbox_id, res.owner.ifname))
        .collect();
    held.sort();
    let mut want_held: Vec<String> = r.interfaces[0]
        .ips
        .iter()
        .map(|ip| {
            let net: ipnet::IpNet = ip.address.parse().expect("address is a CIDR");
            format!("{} pod-r/eth0", net.addr())
        })
        .collect();
    want_held.sort();
    assert_eq!(held, want_held, "reservations in the store");
}

#[test]
fn gc_with_valid_lists_detaches_every_other_attachment() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start(NO_RECONCILER);
    let (a_ns, a) = attach(&node, "pod-a");
    let (b_ns, b) = attach(&node, "pod-b");
    let (c_ns, c) = attach(&node, "pod-c");
    let c_host = c.interfaces[0].host_ifname.clone();
    let want = vec![finding(
        "pod-c",
        "eth0",
        "attachment",
        "not-valid",
        &format!("host link {c_host}"),
    )];

    let dry = keep_only(&["pod-a"], &[("pod-b", "eth0")], true);
    assert_eq!(collect(&node, &dry), want, "dry run");
    assert_untouched(&node, &c_ns, &c);
    assert_eq!(node.capacity_used("default"), 6, "a dry run released");

    let real = keep_only(&["pod-a"], &[("pod-b", "eth0")], false);
    assert_eq!(collect(&node, &real), want, "real run");
    node.assert_not_found("pod-c");
    wait_link_gone(&node, &c_host);
    testkit::wait_for("eth0 gone from pod-c's netns", SETTLE, || {
        testkit::link_in(&c_ns, "eth0").is_none()
    });
    node.wait_capacity_used("default", 4);
    assert_untouched(&node, &a_ns, &a);
    assert_untouched(&node, &b_ns, &b);
    let mut ids = node.list_ids();
    ids.sort();
    assert_eq!(ids, ["pod-a", "pod-b"]);

    // The same lists again: nothing left to collect.
    assert_eq!(collect(&node, &real), [], "second run");
    assert_untouched(&node, &a_ns, &a);
    assert_untouched(&node, &b_ns, &b);
}

#[test]
fn gc_with_empty_valid_lists_and_allow_detach_all_detaches_every_attachment() {
    if !testkit::privileged() {
        return;
    }
    // CNI 1.1: an empty valid list means nothing is valid (not "keep everything") — when the
    // request says it means it (knid-cni's GC always does).
    let node = TestNode::start(NO_RECONCILER);
    let (netns, x) = attach(&node, "pod-x");
    let want = vec![finding(
        "pod-x",
        "eth0",
        "attachment",
        "not-valid",
        &format!("host link {}", x.interfaces[0].host_ifname),
    )];
    assert!(
        collect(&node, &keep_only(&[], &[], false)).is_empty(),
        "empty lists without allow_detach_all are a sweep"
    );
    let everything = pb::GarbageCollectRequest {
        allow_detach_all: true,
        ..keep_only(&[], &[], false)
    };
    assert_eq!(collect(&node, &everything), want);
    node.assert_not_found("pod-x");
    assert!(node.list_ids().is_empty(), "List not empty");
    node.assert_host_clean();
    testkit::wait_for("eth0 gone from pod-x's netns", SETTLE, || {
        testkit::link_in(&netns, "eth0").is_none()
    });
    node.wait_capacity_used("default", 0);
}

#[test]
fn reboot_releases_every_attachment_at_start_up() {
    if !testkit::privileged() {
        return;
    }
    let boot_dir = tempfile::Builder::new()
        .prefix("knid-e2e-boot-")
        .tempdir()
        .expect("create tempdir");
    let boot_file = boot_dir.path().join("boot_id");
    std::fs::write(&boot_file, "boot-a\n").expect("write boot id");
    let boot_arg = boot_file.display().to_string();
    let mut node = TestNode::start_with(NO_RECONCILER, &[], &["--boot-id-file", &boot_arg]);
    let pods: Vec<(PathBuf, pb::Sandbox)> = ["pod-1", "pod-2", "pod-3"]
        .iter()
        .map(|id| attach(&node, id))
        .collect();
    assert_eq!(node.capacity_used("default"), 6);
    assert_eq!(node.host_kn_links().len(), 3);

    let status = node.stop();
    assert_eq!(status.code(), Some(0), "knid exit status {status}");
    std::fs::write(&boot_file, "boot-b\n").expect("write boot id");
    node.restart();

    assert!(node.list_ids().is_empty(), "List after the reboot");
    assert_eq!(node.capacity_used("default"), 0);
    // Recovery runs before knid serves: the leftovers are gone by the time it answers.
    assert!(
        node.host_kn_links().is_empty(),
        "kn links after the reboot: {:?}",
        kn_link_names(&node)
    );
    assert!(node.bridge_ports(testkit::BRIDGE).is_empty());
    for (netns, sandbox) in &pods {
        node.assert_not_found(&sandbox.id);
        let names: Vec<String> = testkit::links_in(netns)
            .into_iter()
            .map(|l| l.name)
            .collect();
        assert_eq!(names, ["lo"], "links left in {}", netns.display());
    }
    assert_eq!(
        node.log_text().matches("boot id changed").count(),
        1,
        "log: {}",
        node.log_text()
    );

    {
        let store = node.stop_with_empty_store("default");
        assert_eq!(store.boot_id().expect("boot id").as_deref(), Some("boot-b"));
    }

    // Same boot: nothing is released again, and the node works.
    node.restart();
    assert_eq!(
        node.log_text().matches("boot id changed").count(),
        1,
        "a restart within the same boot was taken for a reboot"
    );
    let (netns, sandbox) = attach(&node, "pod-after");
    testkit::assert_pod_side(&netns, &sandbox.interfaces[0]);
    node.assert_host_side(&sandbox.interfaces[0]);
    node.client()
        .detach(&testkit::detach_req("pod-after"), RPC)
        .expect("Detach");
    node.assert_host_clean();
    node.wait_capacity_used("default", 0);
    assert!(node.list_ids().is_empty());
    drop(node);
    boot_dir.close().expect("remove the boot id tempdir");
}

/// A second knid's network: its own bridge and subnet, so its pods never share an address with
/// the first knid's.
const SECOND_NETWORK: &str = r#"
[networks.default]
bridge = "knid1"
subnets = ["10.89.0.0/24"]
mtu = 1500
"#;

/// The findings a real sweep of `node` left alone, as (what, reason, detail), sorted.
fn left_alone(node: &TestNode) -> Vec<(String, String, String)> {
    let resp = node
        .client()
        .garbage_collect(&sweep(false), RPC)
        .expect("GarbageCollect");
    assert!(resp.errors.is_empty(), "GC errors: {:?}", resp.errors);
    let mut left: Vec<_> = resp
        .left
        .into_iter()
        .map(|f| (f.what, f.reason, f.detail))
        .collect();
    left.sort();
    left
}

fn not_ours(name: &str) -> (String, String, String) {
    ("host-link".into(), "not-ours".into(), name.to_owned())
}

/// Two knids with their own stores take turns in one netns (one knid per netns: a second one
/// beside a running knid refuses to start, tests/access.rs), as when a state dir is moved or
/// wiped: each deletes only the links it marked, and the pods of the one that is stopped keep
/// their links, their traffic and, once it runs again, their guards.
#[test]
fn knids_taking_turns_in_one_netns_delete_only_links_they_marked() {
    if !testkit::privileged() {
        return;
    }
    // Named like knid's host ends, made by someone else.
    const STRANGER: &str = "kn00c0ffee01";
    let mut first = TestNode::start(NO_RECONCILER);
    let (a_ns, a) = attach(&first, "pod-a");
    let (b_ns, b) = attach(&first, "pod-b");
    first.host_veth(STRANGER, "stranger-peer");
    let a_host = a.interfaces[0].host_ifname.clone();
    let b_host = b.interfaces[0].host_ifname.clone();
    let first_mark = first.link_mark();
    assert_eq!(first.host_link_alias(&a_host), Some(first_mark.clone()));
    let status = first.stop();
    assert_eq!(status.code(), Some(0), "first knid exit status {status}");

    // Another socket and state dir, the same netns; its reconciler runs every 200 ms.
    let mut second = TestNode::start_beside(
        &first,
        &format!("gc_interval = \"200ms\"\n{SECOND_NETWORK}"),
    );
    // Its summary line, which comes after the line of each link it left alone.
    testkit::wait_for("the second knid's start-up sweep", SETTLE, || {
        second.log_text().contains("orphan(s) removed")
    });
    assert!(
        second
            .log_text()
            .contains("0 orphan(s) removed, 3 link(s) not this knid's left alone"),
        "second knid's start-up sweep:\n{}",
        second.log_text()
    );
    // A few reconciler rounds.
    std::thread::sleep(std::time::Duration::from_millis(600));
    assert_eq!(
        collect(&second, &sweep(false)),
        [],
        "the second knid removed something"
    );
    let mut want = vec![not_ours(&a_host), not_ours(&b_host), not_ours(STRANGER)];
    want.sort();
    assert_eq!(left_alone(&second), want);
    // Against the kernel: the first knid's pods still talk, the stranger is there.
    assert!(testkit::link_in(first.host_path(), STRANGER).is_some());
    let b_ip = testkit::ip_of(&b.interfaces[0], "ipv4").0.addr();
    testkit::tcp_exchange(&b_ns, b_ip, &a_ns);

    // A link the second knid made.
    let (c_ns, c) = attach(&second, "pod-c");
    let c_host = c.interfaces[0].host_ifname.clone();
    let second_mark = second.link_mark();
    assert_ne!(second_mark, first_mark, "two stores, one mark");
    assert_eq!(second.host_link_alias(&c_host), Some(second_mark));
    let status = second.stop();
    assert_eq!(status.code(), Some(0), "second knid exit status {status}");

    // The first knid again: its pods as they were, their guards remade, the second's link and
    // the stranger left alone.
    first.restart();
    assert_untouched(&first, &a_ns, &a);
    assert_untouched(&first, &b_ns, &b);
    let guarded: Vec<String> = first.guards().into_iter().map(|(_, dev)| dev).collect();
    for host in [&a_host, &b_host] {
        assert!(guarded.contains(host), "{host} unguarded: {guarded:?}");
    }
    testkit::tcp_exchange(&b_ns, b_ip, &a_ns);
    assert_eq!(collect(&first, &sweep(false)), [], "first knid's sweep");
    let mut want = vec![not_ours(&c_host), not_ours(STRANGER)];
    want.sort();
    assert_eq!(
        left_alone(&first),
        want,
        "the first knid leaves the second's link alone"
    );
    let status = first.stop();
    assert_eq!(status.code(), Some(0), "first knid exit status {status}");

    // The second knid's link whose record is gone: its own, so swept at its start-up.
    {
        let store = second.open_store();
        let mut batch = Batch::new();
        batch
            .delete_attachment("pod-c", "eth0")
            .delete_sandbox("pod-c");
        store.commit(&batch).expect("forget pod-c's records");
    }
    second.restart();
    wait_link_gone(&second, &c_host);
    assert!(
        testkit::link_in(&c_ns, "eth0").is_none(),
        "pod-c's pod end outlived its host end"
    );
    // Logged once the link is gone.
    testkit::wait_for("the start-up sweep's line for pod-c's link", SETTLE, || {
        second.log_text().contains(&format!(
            "start-up sweep: removed host-link {c_host} (no-record)"
        ))
    });
    let status = second.stop();
    assert_eq!(status.code(), Some(0), "second knid exit status {status}");

    // And still nothing of the first knid's.
    first.restart();
    assert_untouched(&first, &a_ns, &a);
    assert_untouched(&first, &b_ns, &b);
    assert!(testkit::link_in(first.host_path(), STRANGER).is_some());
    testkit::tcp_exchange(&b_ns, b_ip, &a_ns);
}

#[test]
fn an_empty_garbage_collect_never_detaches_a_pod_and_keep_nothing_must_be_asked_for() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    let client = node.client();
    for id in ["gc-a", "gc-b"] {
        client
            .attach(&node.attach_req(id, &node.netns(id), "eth0"), RPC)
            .unwrap_or_else(|e| panic!("Attach {id}: {e}"));
    }
    let attached = || {
        let mut ids = node.list_ids();
        ids.sort();
        ids
    };
    let both = vec!["gc-a".to_owned(), "gc-b".to_owned()];

    // The zero value, as any client (or one built against an older proto) sends it: a sweep.
    for dry_run in [true, false] {
        let resp = client
            .garbage_collect(
                &pb::GarbageCollectRequest {
                    dry_run,
                    ..Default::default()
                },
                RPC,
            )
            .expect("GarbageCollect{}");
        assert!(
            resp.removed.iter().all(|f| f.what != "attachment"),
            "GarbageCollect{{}} (dry_run {dry_run}) judged attachments: {:?}",
            resp.removed
        );
        assert_eq!(attached(), both);
    }
    assert_eq!(node.host_kn_links().len(), 2, "the kernel lost a pod link");

    // A list that keeps none of the attached pods is refused, naming the way to mean it.
    let wrong = keep_only(&["gc-nonexistent"], &[], false);
    let message = testkit::expect_code(
        client.garbage_collect(&wrong, RPC),
        ttrpc::Code::FAILED_PRECONDITION,
        "a keep list that keeps nothing",
    );
    assert!(
        message.contains("none of the 2 attached") && message.contains("allow_detach_all"),
        "{message}"
    );
    // A network without lists is refused too.
    let message = testkit::expect_code(
        client.garbage_collect(
            &pb::GarbageCollectRequest {
                network: "default".into(),
                ..Default::default()
            },
            RPC,
        ),
        ttrpc::Code::INVALID_ARGUMENT,
        "a network without lists",
    );
    assert!(message.contains("network"), "{message}");
    assert_eq!(attached(), both);

    // A list keeping one detaches the other.
    let resp = client
        .garbage_collect(&keep_only(&["gc-a"], &[], false), RPC)
        .expect("GC keeping gc-a");
    assert!(
        resp.removed
            .iter()
            .any(|f| f.sandbox_id == "gc-b" && f.reason == "not-valid"),
        "{:?}",
        resp.removed
    );
    assert_eq!(attached(), ["gc-a"]);
    // Keep-nothing, asked for: every pod goes.
    client
        .garbage_collect(
            &pb::GarbageCollectRequest {
                allow_detach_all: true,
                ..Default::default()
            },
            RPC,
        )
        .expect("GC with allow_detach_all");
    assert!(attached().is_empty());
    node.wait_no_kn_links();
}
