//! Who may call knid (docs/security.md#threat-model): SO_PEERCRED against
//! `allowed_uids`/`allowed_gids`, checked with callers whose uid and gid really differ (a thread
//! switched to them), the start-up refusal of a state dir every user may write in, and of a
//! second knid on a socket another knid serves.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use knid_transport::client::oneshot::{OneshotClient, OneshotError};
use knid_transport::pb;
use nix::libc;
use testkit::{link_in, privileged, wait_for, TestNode, RPC};

const NOBODY: u32 = 65534;
const ALLOWED_GID: u32 = 4242;
const T: Duration = Duration::from_secs(5);

/// Calls Status on `socket` from a thread whose real, effective and saved ids are `uid`/`gid`
/// (changed with the raw syscalls, which affect the calling thread only), without supplementary
/// groups.
fn status_as(socket: &Path, uid: u32, gid: u32) -> Result<bool, OneshotError> {
    let socket = socket.to_owned();
    std::thread::spawn(move || {
        // SAFETY: plain syscalls on this thread's own credentials; no memory is passed but the
        // empty group list.
        unsafe {
            assert_eq!(
                libc::syscall(libc::SYS_setgroups, 0, std::ptr::null::<libc::gid_t>()),
                0
            );
            assert_eq!(
                libc::syscall(libc::SYS_setresgid, gid, gid, gid),
                0,
                "setresgid"
            );
            assert_eq!(
                libc::syscall(libc::SYS_setresuid, uid, uid, uid),
                0,
                "setresuid"
            );
        }
        assert_eq!(nix::unistd::geteuid().as_raw(), uid);
        let mut client = OneshotClient::connect(&socket, T)?;
        client.status(T).map(|s| s.ready)
    })
    .join()
    .expect("caller thread panicked")
}

/// A node whose socket other users can reach, so SO_PEERCRED alone decides.
fn open_node(config: &str) -> TestNode {
    let node = TestNode::start(config);
    std::fs::set_permissions(node.dir(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    node
}

#[test]
fn a_caller_outside_allowed_uids_and_gids_is_refused_and_an_allowed_gid_is_served() {
    if !privileged() {
        return;
    }
    let node = open_node(&format!(
        "socket_mode = 0o666\nallowed_gids = [{ALLOWED_GID}]\n"
    ));

    let refused = status_as(node.socket(), NOBODY, NOBODY).expect_err("nobody was served");
    assert!(
        matches!(
            refused,
            OneshotError::Closed { .. } | OneshotError::Io { .. }
        ),
        "refusal should close the connection: {refused}"
    );
    wait_for("the refusal in knid's log", T, || {
        node.log_text().contains(&format!(
            "refused connection from pid {} uid {NOBODY} gid {NOBODY}",
            std::process::id()
        ))
    });

    assert!(status_as(node.socket(), NOBODY, ALLOWED_GID).expect("allowed gid refused"));
    // Root (allowed_uids' default) still is.
    assert!(node.client().status(T).expect("root refused").ready);
    println!("refused uid {NOBODY} gid {NOBODY}; served uid {NOBODY} gid {ALLOWED_GID} and root");
}

#[test]
fn by_default_only_root_is_served() {
    if !privileged() {
        return;
    }
    let node = open_node("socket_mode = 0o666\n");
    status_as(node.socket(), NOBODY, 0).expect_err("uid 65534 of gid 0 was served");
    status_as(node.socket(), NOBODY, NOBODY).expect_err("nobody was served");
    assert!(node.client().status(T).expect("root refused").ready);
}

#[test]
fn knid_refuses_to_start_on_a_world_writable_state_dir() {
    if !privileged() {
        return;
    }
    let mut node = TestNode::start("");
    node.stop();
    let state_dir: PathBuf = node.dir().join("open-state");
    std::fs::create_dir(&state_dir).expect("mkdir");
    std::fs::set_permissions(&state_dir, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let (status, log) = node.run_to_exit(None, Some(&state_dir));
    assert!(!status.success(), "knid started: {log}");
    assert!(
        log.contains("is writable by every user (mode 777)") && log.contains("chmod o-w"),
        "{log}"
    );
    assert!(!state_dir.join("store").exists(), "the store was opened");
}

/// A knid with one pod attached, `pod-a`: the node, the pod's netns and its host end.
fn node_with_pod_a() -> (TestNode, PathBuf, String) {
    let node = TestNode::start("");
    let netns = node.netns("a");
    let sandbox = node
        .client()
        .attach(&node.attach_req("pod-a", &netns, "eth0"), RPC)
        .expect("Attach");
    let host = sandbox.interfaces[0].host_ifname.clone();
    (node, netns, host)
}

/// The first knid still runs `pod-a`: its Check passes.
fn assert_checks_pod_a(node: &TestNode) {
    node.client()
        .check(
            &pb::CheckRequest {
                sandbox_id: "pod-a".into(),
                ..Default::default()
            },
            RPC,
        )
        .expect("the first knid still checks its pod");
}

#[test]
fn a_second_knid_on_the_same_socket_refuses_to_start_and_touches_no_pod() {
    if !privileged() {
        return;
    }
    let (node, netns, host) = node_with_pod_a();

    // Another state dir: its store knows nothing of pod-a, so its start-up sweeps would take
    // pod-a's host end for an orphan.
    let other_state = node.dir().join("second-state");
    let (status, log) = node.run_to_exit(None, Some(&other_state));
    assert!(!status.success(), "a second knid started: {log}");
    assert!(log.contains("another knid holds"), "{log}");
    assert!(!other_state.exists(), "the second knid made a state dir");

    // Against the kernel: the first knid's pod kept both ends.
    assert!(
        link_in(node.host_path(), &host).is_some(),
        "host end {host} was deleted"
    );
    assert!(
        link_in(&netns, "eth0").is_some(),
        "the pod's eth0 was deleted"
    );
    assert_checks_pod_a(&node);
}

#[test]
fn a_second_knid_in_the_same_netns_refuses_to_start_and_touches_no_pod() {
    if !privileged() {
        return;
    }
    let (node, netns, host) = node_with_pod_a();
    // The host netns as the kernel has it: links, and every nftables table without counters (the
    // NAT table, the pod's source guard).
    let kernel = || {
        let mut links: Vec<String> = testkit::links_in(node.host_path())
            .into_iter()
            .map(|l| l.name)
            .collect();
        links.sort();
        let rules = testkit::cni::tool_in(node.host_path(), "nft", &["-s", "list", "ruleset"]);
        (links, rules)
    };
    let before = kernel();
    assert!(before.0.contains(&host), "{host} not in {:?}", before.0);
    assert!(
        before.1.contains("table inet knid") && before.1.contains(&host),
        "no NAT table or guard of {host} before: {}",
        before.1
    );

    // Another socket and state dir, the same netns: the socket's lock does not stop it.
    let other_state = node.dir().join("second-state");
    let other_socket = node.dir().join("second.sock");
    let (status, log) = node.run_to_exit_on(None, Some(&other_state), &other_socket);
    assert_eq!(status.code(), Some(1), "a second knid in the netns: {log}");
    assert!(
        log.contains("another knid serves this network namespace") && log.contains("@knid/netns"),
        "{log}"
    );
    assert!(!other_state.exists(), "the second knid made a state dir");
    assert!(!other_socket.exists(), "the second knid bound a socket");

    // Against the kernel: nothing changed, and the first knid still runs its pod.
    assert_eq!(kernel(), before, "the second knid changed the host netns");
    assert!(
        link_in(&netns, "eth0").is_some(),
        "the pod's eth0 was deleted"
    );
    assert_checks_pod_a(&node);
}
