//! The real `knictl` binary against a test daemon: every subcommand, table and JSON output, and
//! its exit codes (0 success, 1 request failed, 2 bad usage, 3 knid unreachable).

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{TestNode, RPC, SETTLE};
use knid_transport::pb;

/// Runs `knictl --socket <socket> <args>`.
fn knictl(socket: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_knictl"))
        .arg("--socket")
        .arg(socket)
        .args(args)
        .env_remove("KNID_SOCKET")
        .output()
        .expect("run knictl")
}

/// Runs knictl, asserts exit code 0 and returns its stdout.
fn knictl_ok(node: &TestNode, args: &[&str]) -> String {
    let out = knictl(node.socket(), args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "knictl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

#[test]
fn knictl_drives_attach_inspect_list_and_detach() {
    if !common::privileged() {
        return;
    }
    let node = TestNode::start("");
    let netns = node.netns("cli");
    let netns_text = netns.display().to_string();

    let status = knictl_ok(&node, &["status"]);
    assert!(status.contains("ready: true"), "status: {status}");
    assert!(status.contains("NetworkReady"), "status: {status}");
    let networks = knictl_ok(&node, &["networks"]);
    for want in ["default", "knid0", "10.88.0.0/24", "fd00:88::/64"] {
        assert!(networks.contains(want), "networks lacks {want}: {networks}");
    }

    let attached = knictl_ok(&node, &["attach", "pod-cli", "--netns", &netns_text]);
    assert!(
        attached.contains("pod-cli") && attached.contains("eth0"),
        "{attached}"
    );
    // The attach really happened: the kernel has what knid now reports.
    let sandbox = node
        .client()
        .inspect(
            &pb::InspectRequest {
                sandbox_id: "pod-cli".to_owned(),
                ..Default::default()
            },
            RPC,
        )
        .expect("Inspect");
    common::assert_pod_side(&netns, &sandbox.interfaces[0]);

    let list = knictl_ok(&node, &["ls"]);
    assert!(
        list.contains("pod-cli") && list.contains(&netns_text),
        "ls: {list}"
    );
    let check = knictl_ok(&node, &["check", "pod-cli", "--ifname", "eth0"]);
    assert_eq!(check.trim(), "pod-cli: ok");
    let inspect = knictl_ok(&node, &["inspect", "pod-cli"]);
    assert!(
        inspect.contains(&sandbox.interfaces[0].host_ifname),
        "inspect: {inspect}"
    );

    let json: serde_json::Value =
        serde_json::from_str(&knictl_ok(&node, &["-o", "json", "inspect", "pod-cli"]))
            .expect("inspect -o json is JSON");
    assert_eq!(json["id"], "pod-cli");
    assert_eq!(json["netns_path"], netns_text.as_str());
    assert_eq!(json["interfaces"][0]["name"], "eth0");
    assert_eq!(
        json["interfaces"][0]["mac"],
        sandbox.interfaces[0].mac.as_str()
    );
    let ips = json["interfaces"][0]["ips"].as_array().expect("ips array");
    let mut got: Vec<(String, String)> = ips
        .iter()
        .map(|ip| {
            (
                ip["family"].as_str().expect("family").to_owned(),
                ip["address"].as_str().expect("address").to_owned(),
            )
        })
        .collect();
    got.sort();
    let mut want: Vec<(String, String)> = sandbox.interfaces[0]
        .ips
        .iter()
        .map(|ip| (ip.family.clone(), ip.address.clone()))
        .collect();
    want.sort();
    assert_eq!(got, want);

    let detached = knictl_ok(&node, &["detach", "pod-cli"]);
    assert!(detached.contains("pod-cli"), "detach: {detached}");
    node.assert_host_clean();
    assert!(
        common::link_in(&netns, "eth0").is_none(),
        "eth0 left after knictl detach"
    );
    assert!(!knictl_ok(&node, &["ls"]).contains("pod-cli"));
}

#[test]
fn knictl_inspect_of_unknown_sandbox_exits_4_with_not_found() {
    if !common::privileged() {
        return;
    }
    let node = TestNode::start("");
    let out = knictl(node.socket(), &["inspect", "unknown"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "stderr: {stderr}");
    assert!(
        stderr.contains("NotFound"),
        "stderr lacks NotFound: {stderr:?}"
    );
}

#[test]
fn knictl_attach_with_a_bad_sandbox_id_exits_1_naming_the_field() {
    if !common::privileged() {
        return;
    }
    let node = TestNode::start("");
    let netns = node.netns("bad-id");
    let out = knictl(
        node.socket(),
        &["attach", "bad/id", "--netns", &netns.display().to_string()],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(
        common::names_field(&stderr, "sandbox_id"),
        "stderr: {stderr:?}"
    );
    assert!(node.list_ids().is_empty());
}

#[test]
fn knictl_exits_3_when_knid_is_unreachable() {
    // Needs no daemon and no privilege: nothing listens on this path.
    let out = knictl(Path::new("/nonexistent"), &["status"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "stderr: {stderr}");
    assert!(stderr.contains("/nonexistent"), "stderr: {stderr:?}");
}

#[test]
fn gc_dry_run_reports_and_sweep_removes_an_orphan_link() {
    if !common::privileged() {
        return;
    }
    // Named like knid's host ends (`kn` + 10 hex digits) but with no record: what a crash
    // between link creation and the store write leaves behind.
    const ORPHAN: &str = "kn0123abcdef";
    let node = TestNode::start("");
    node.host_veth(ORPHAN, "gc-peer");

    let json: serde_json::Value =
        serde_json::from_str(&knictl_ok(&node, &["gc", "--dry-run", "-o", "json"]))
            .expect("gc -o json is JSON");
    assert_eq!(json["dry_run"], true, "{json}");
    assert_eq!(json["errors"], serde_json::json!([]), "{json}");
    let removed = json["removed"].as_array().expect("removed array");
    assert_eq!(removed.len(), 1, "only the orphan is found: {json}");
    assert_eq!(removed[0]["what"], "host-link", "{json}");
    assert_eq!(removed[0]["reason"], "no-record", "{json}");
    assert_eq!(removed[0]["detail"], ORPHAN, "{json}");
    assert_eq!(removed[0]["sandbox_id"], "", "{json}");
    assert!(
        common::link_in(node.host_path(), ORPHAN).is_some(),
        "a dry run removed {ORPHAN}"
    );

    let table = knictl_ok(&node, &["gc"]);
    assert!(!table.contains("would remove"), "gc: {table}");
    let row = table
        .lines()
        .find(|line| line.contains(ORPHAN))
        .unwrap_or_else(|| panic!("gc does not list {ORPHAN}: {table}"));
    assert!(
        row.starts_with("host-link") && row.contains("no-record"),
        "gc row: {row}"
    );
    common::wait_for(&format!("{ORPHAN} to be deleted"), SETTLE, || {
        common::link_in(node.host_path(), ORPHAN).is_none()
    });
    assert!(common::link_in(node.host_path(), "gc-peer").is_none());

    let again = knictl_ok(&node, &["gc", "--dry-run"]);
    assert_eq!(again.trim(), "nothing to collect");
}

#[test]
fn gc_with_a_malformed_keep_attachment_is_a_usage_error() {
    // Rejected before any connection: needs no daemon and no privilege.
    let out = knictl(
        Path::new("/nonexistent"),
        &["gc", "--keep-attachment", "pod-1"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {stderr}");
    assert!(stderr.contains("--keep-attachment"), "stderr: {stderr:?}");
}

#[test]
fn knictl_netns_create_prints_the_path_and_delete_removes_it() {
    if !common::privileged() {
        return;
    }
    let node = TestNode::start("");
    let path = knictl_ok(&node, &["netns", "create", "pod-ns"]);
    let path = std::path::PathBuf::from(path.trim());
    assert_eq!(path, node.dir().join("ns").join("knid-pod-ns"));
    assert!(knid_netops::netns::is_nsfs(&path).expect("statfs"));
    assert_eq!(
        knictl_ok(&node, &["netns", "create", "pod-ns"]).trim(),
        path.display().to_string(),
        "a repeat prints the same path"
    );
    let networks = knictl_ok(&node, &["networks"]);
    assert!(
        networks.contains("READY") && networks.contains("yes"),
        "{networks}"
    );
    knictl_ok(&node, &["netns", "delete", "pod-ns"]);
    assert!(!path.exists(), "{} removed", path.display());
}
