//! CreateNetns and DeleteNetns end to end: knid creates the sandbox's network namespace itself
//! (no `ip netns` exec), records it, returns it again for a repeat, deletes it after detaching
//! the sandbox, and GC or recovery remove it when its sandbox is gone, when it vanished behind
//! knid's back, or when a crash interrupted its creation or deletion.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use knid_netops::netns::is_nsfs;
use knid_transport::pb;
use testkit::{TestNode, RPC};

/// The periodic reconciler off: only the calls under test remove anything.
const NO_RECONCILER: &str = r#"gc_interval = "0s""#;

fn create(node: &TestNode, id: &str, name: &str) -> pb::CreateNetnsResponse {
    node.client()
        .create_netns(
            &pb::CreateNetnsRequest {
                sandbox_id: id.to_owned(),
                name: name.to_owned(),
                ..Default::default()
            },
            RPC,
        )
        .unwrap_or_else(|e| panic!("CreateNetns {id}: {e}"))
}

fn delete(node: &TestNode, id: &str) {
    node.client()
        .delete_netns(
            &pb::DeleteNetnsRequest {
                sandbox_id: id.to_owned(),
                ..Default::default()
            },
            RPC,
        )
        .unwrap_or_else(|e| panic!("DeleteNetns {id}: {e}"));
}

/// Whether a namespace is mounted at `path` (false when nothing is there).
fn mounted(path: &Path) -> bool {
    is_nsfs(path).unwrap_or(false)
}

fn gc(node: &TestNode, req: &pb::GarbageCollectRequest) -> Vec<(String, String, String)> {
    let resp = node
        .client()
        .garbage_collect(req, RPC)
        .expect("GarbageCollect");
    assert!(resp.errors.is_empty(), "GC errors: {:?}", resp.errors);
    let mut out: Vec<_> = resp
        .removed
        .into_iter()
        .filter(|f| f.what == "netns")
        .map(|f| (f.sandbox_id, f.reason, f.detail))
        .collect();
    out.sort();
    out
}

#[test]
fn create_netns_mounts_a_namespace_with_loopback_up_and_a_repeat_returns_it() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    let first = create(&node, "pod-a", "");
    let path = PathBuf::from(&first.netns_path);
    assert_eq!(path, node.dir().join("ns").join("knid-pod-a"));
    assert!(first.created);
    assert!(mounted(&path), "{} is a netns mount", path.display());
    assert_eq!(std::fs::metadata(&path).expect("stat").ino(), first.inode);
    let links = testkit::links_in(&path);
    assert_eq!(links.len(), 1, "only lo: {links:?}");
    assert!(links[0].name == "lo" && links[0].up, "lo up: {links:?}");

    let again = create(&node, "pod-a", "");
    assert_eq!(
        (again.netns_path.as_str(), again.inode, again.created),
        (first.netns_path.as_str(), first.inode, false)
    );

    // The sandbox attaches in it like in any netns, and DeleteNetns detaches it first.
    let sandbox = node
        .client()
        .attach(&node.attach_req("pod-a", &path, "eth0"), RPC)
        .expect("Attach");
    testkit::assert_pod_side(&path, &sandbox.interfaces[0]);
    delete(&node, "pod-a");
    assert!(!path.exists(), "netns file removed");
    node.assert_not_found("pod-a");
    node.assert_host_clean();
    // Idempotent, also for a sandbox knid never heard of.
    delete(&node, "pod-a");
    delete(&node, "never-seen");
}

#[test]
fn named_netns_and_conflicts_are_reported_naming_the_field() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    let named = create(&node, "pod-n", "blue-net");
    assert_eq!(
        PathBuf::from(&named.netns_path),
        node.dir().join("ns").join("blue-net")
    );
    // Another sandbox cannot take the path; the same sandbox cannot move to another name.
    let taken = node.client().create_netns(
        &pb::CreateNetnsRequest {
            sandbox_id: "pod-m".into(),
            name: "blue-net".into(),
            ..Default::default()
        },
        RPC,
    );
    testkit::expect_code(
        taken,
        ttrpc::Code::ALREADY_EXISTS,
        "another sandbox, same name",
    );
    let moved = node.client().create_netns(
        &pb::CreateNetnsRequest {
            sandbox_id: "pod-n".into(),
            name: "red-net".into(),
            ..Default::default()
        },
        RPC,
    );
    let message =
        testkit::expect_code(moved, ttrpc::Code::ALREADY_EXISTS, "same sandbox, new name");
    assert!(message.contains("blue-net"), "{message}");
    // A file that is not knid's is never replaced.
    std::fs::write(node.dir().join("ns").join("plain"), b"").expect("write");
    let plain = node.client().create_netns(
        &pb::CreateNetnsRequest {
            sandbox_id: "pod-p".into(),
            name: "plain".into(),
            ..Default::default()
        },
        RPC,
    );
    testkit::expect_code(plain, ttrpc::Code::ALREADY_EXISTS, "a plain file");
    for (id, name, field) in [("", "", "sandbox_id"), ("pod-x", "../up", "name")] {
        let bad = node.client().create_netns(
            &pb::CreateNetnsRequest {
                sandbox_id: id.into(),
                name: name.into(),
                ..Default::default()
            },
            RPC,
        );
        let message = testkit::expect_code(bad, ttrpc::Code::INVALID_ARGUMENT, field);
        assert!(testkit::names_field(&message, field), "{message}");
    }
    std::fs::remove_file(node.dir().join("ns").join("plain")).expect("remove");
    delete(&node, "pod-n");
    assert!(!Path::new(&named.netns_path).exists());
    node.assert_host_clean();
}

#[test]
fn netns_survive_a_restart_and_gc_deletes_those_of_invalid_sandboxes() {
    if !testkit::privileged() {
        return;
    }
    let mut node = TestNode::start(NO_RECONCILER);
    let a = create(&node, "gc-a", "");
    let b = create(&node, "gc-b", "");
    node.client()
        .attach(
            &node.attach_req("gc-a", Path::new(&a.netns_path), "eth0"),
            RPC,
        )
        .expect("Attach");
    node.stop();
    node.restart();
    let again = create(&node, "gc-b", "");
    assert_eq!(
        (again.inode, again.created),
        (b.inode, false),
        "kept over a restart"
    );

    // gc-a's is the only attached interface, so keeping gc-b alone detaches every one: knid
    // asks for that to be meant.
    let keep_b = pb::GarbageCollectRequest {
        valid_sandbox_ids: vec!["gc-b".into()],
        allow_detach_all: true,
        ..Default::default()
    };
    let dry = gc(
        &node,
        &pb::GarbageCollectRequest {
            dry_run: true,
            ..keep_b.clone()
        },
    );
    assert_eq!(
        dry,
        [(
            "gc-a".to_owned(),
            "not-valid".to_owned(),
            a.netns_path.clone()
        )]
    );
    assert!(
        mounted(Path::new(&a.netns_path)),
        "a dry run removes nothing"
    );
    assert_eq!(gc(&node, &keep_b), dry);
    assert!(!Path::new(&a.netns_path).exists(), "gc-a's netns deleted");
    node.assert_not_found("gc-a");
    assert!(mounted(Path::new(&b.netns_path)), "gc-b's netns kept");
    // A sweep (no lists) judges no sandbox: gc-b stays.
    assert!(gc(
        &node,
        &pb::GarbageCollectRequest {
            sweep_only: true,
            ..Default::default()
        }
    )
    .is_empty());
    delete(&node, "gc-b");
    node.assert_host_clean();
}

#[test]
fn a_netns_deleted_behind_knids_back_is_forgotten_and_can_be_created_again() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start(NO_RECONCILER);
    let first = create(&node, "gone-a", "");
    let path = PathBuf::from(&first.netns_path);
    // As `ip netns delete` would.
    nix::mount::umount2(&path, nix::mount::MntFlags::MNT_DETACH).expect("umount");
    std::fs::remove_file(&path).expect("remove");
    let found = gc(
        &node,
        &pb::GarbageCollectRequest {
            sweep_only: true,
            ..Default::default()
        },
    );
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(
        (found[0].0.as_str(), found[0].1.as_str()),
        ("gone-a", "netns-gone")
    );
    let again = create(&node, "gone-a", "");
    assert!(again.created, "a new namespace");
    assert_eq!(again.netns_path, first.netns_path);
    assert!(mounted(&path));
    delete(&node, "gone-a");
    assert!(!path.exists());
}

#[test]
fn a_crash_inside_create_or_delete_netns_is_finished_at_the_next_start() {
    if !testkit::privileged() || !testkit::failpoints_built() {
        return;
    }
    let mut node = TestNode::start_with("", &[("KNID_FAILPOINTS", "netns.recorded=abort")], &[]);
    let path = node.dir().join("ns").join("knid-crash-a");
    let crashed = node.client().create_netns(
        &pb::CreateNetnsRequest {
            sandbox_id: "crash-a".into(),
            ..Default::default()
        },
        RPC,
    );
    assert!(crashed.is_err(), "knid aborted before answering");
    node.wait_exit(Duration::from_secs(10));
    assert!(!mounted(&path), "the crash came before the mount");
    node.set_env("KNID_FAILPOINTS", Some("netns.deleting=abort"));
    node.restart();
    // Recovery dropped the record of the namespace that was never mounted.
    let made = create(&node, "crash-a", "");
    assert!(made.created, "created afresh");
    assert!(mounted(&path));
    node.client()
        .attach(&node.attach_req("crash-a", &path, "eth0"), RPC)
        .expect("Attach");

    let crashed = node.client().delete_netns(
        &pb::DeleteNetnsRequest {
            sandbox_id: "crash-a".into(),
            ..Default::default()
        },
        RPC,
    );
    assert!(crashed.is_err(), "knid aborted inside DeleteNetns");
    node.wait_exit(Duration::from_secs(10));
    assert!(mounted(&path), "the crash came before the unmount");
    node.set_env("KNID_FAILPOINTS", None);
    node.restart();
    assert!(!path.exists(), "recovery finished the delete");
    node.assert_not_found("crash-a");
    node.assert_host_clean();
    node.stop();
    let store = node.open_store();
    assert!(
        store.all_netns().expect("read").is_empty(),
        "no record left"
    );
}
