//! `knictl policy ls` and `knictl policy explain` where knid does not enforce NetworkPolicy (a
//! node outside cluster mode): both fail with exit 1 saying why, and a malformed question is
//! refused naming its field before knid looks anything up. The verdicts themselves, against
//! three nodes and real traffic: tests/network_policy.rs.

use std::path::Path;
use std::process::Command;

use testkit::cli::knictl;
use testkit::TestNode;

/// knictl's exit code and stderr.
fn fails(node: &TestNode, args: &[&str]) -> (Option<i32>, String) {
    let out = knictl(node, args);
    assert!(
        out.stdout.is_empty(),
        "knictl {args:?} printed on stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn policy_verbs_outside_cluster_mode_exit_1_saying_policy_is_not_enforced() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    for args in [
        &["policy", "ls"][..],
        &["policy", "ls", "--pod", "x/a", "-o", "json"],
        &[
            "policy",
            "explain",
            "--from",
            "x/b",
            "--to",
            "10.244.1.2",
            "--port",
            "80/tcp",
        ],
    ] {
        let (code, stderr) = fails(&node, args);
        assert_eq!(code, Some(1), "knictl {args:?}: {stderr}");
        assert!(
            stderr.contains("Unavailable")
                && stderr.contains("NetworkPolicy is not enforced here")
                && stderr.contains("cluster mode is off"),
            "knictl {args:?}: {stderr:?}"
        );
    }
}

#[test]
fn a_malformed_policy_question_exits_1_naming_the_field() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    let explain = |from: &str, to: &str, port: &str| {
        fails(
            &node,
            &[
                "policy", "explain", "--from", from, "--to", to, "--port", port,
            ],
        )
    };
    for (from, to, port, field) in [
        ("x/b", "x/a", "http", "port"),
        ("x/b", "x/a", "80/icmp", "port"),
        ("x/b", "x/a", "0", "port"),
        ("b", "x/a", "80", "from"),
        ("x/b", "10.244.1.300", "80", "to"),
    ] {
        let (code, stderr) = explain(from, to, port);
        assert_eq!(code, Some(1), "{from} {to} {port}: {stderr}");
        assert!(
            stderr.contains("InvalidArgument") && testkit::names_field(&stderr, field),
            "{from} {to} {port}: should name {field}: {stderr:?}"
        );
    }
    let (code, stderr) = fails(&node, &["policy", "ls", "--pod", "a"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("InvalidArgument") && testkit::names_field(&stderr, "pod"),
        "{stderr:?}"
    );
}

#[test]
fn policy_explain_without_its_flags_is_a_usage_error() {
    // Refused before any connection: needs no daemon and no privilege.
    let out = Command::new(env!("CARGO_BIN_EXE_knictl"))
        .arg("--socket")
        .arg(Path::new("/nonexistent"))
        .args(["policy", "explain", "--from", "x/b", "--to", "x/a"])
        .env_remove("KNID_SOCKET")
        .output()
        .expect("run knictl");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--port"), "{stderr:?}");
}
