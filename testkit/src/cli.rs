//! The real `knictl` run as an operator runs it on the node: inside the [`TestNode`]'s private
//! host netns (so its netlink and /proc/sys/net reads see the node's kernel state, never the
//! machine's), on the node's socket.

use std::process::{Command, Output};

use crate::node::TestNode;

/// Runs `knictl --socket <node's socket> <args>` inside the node's host netns.
pub fn knictl(node: &TestNode, args: &[&str]) -> Output {
    Command::new("nsenter")
        .arg(format!("--net={}", node.host_path().display()))
        .arg("--")
        .arg(crate::bins::knictl())
        .arg("--socket")
        .arg(node.socket())
        .args(args)
        .env_remove("KNID_SOCKET")
        .output()
        .expect("run nsenter knictl")
}

/// [`knictl`], asserting exit code `code`; returns stdout.
pub fn knictl_exits(node: &TestNode, code: i32, args: &[&str]) -> String {
    let out = knictl(node, args);
    assert_eq!(
        out.status.code(),
        Some(code),
        "knictl {args:?}: stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// [`knictl`], asserting success; returns stdout.
pub fn knictl_ok(node: &TestNode, args: &[&str]) -> String {
    knictl_exits(node, 0, args)
}

/// [`knictl_ok`] with `-o json` appended, parsed.
pub fn knictl_json(node: &TestNode, args: &[&str]) -> serde_json::Value {
    let mut args = args.to_vec();
    args.extend(["-o", "json"]);
    let text = knictl_ok(node, &args);
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("knictl {args:?}: not JSON ({e}): {text}"))
}

/// `knictl policy explain --from <from> --to <to> --port <port> -o json` on `node`, asserting
/// exit 0 (a denied flow is an answer too): the ExplainPolicy response as JSON, with `allowed`,
/// `egress.decision` and `ingress.decision` (`NOT_A_POD`, `NOT_ISOLATED`, `ALLOWED`, `DENIED`),
/// the allowing `policy` and `rule` or the `isolated_by` policies.
pub fn knictl_explain(node: &TestNode, from: &str, to: &str, port: &str) -> serde_json::Value {
    knictl_json(
        node,
        &[
            "policy", "explain", "--from", from, "--to", to, "--port", port,
        ],
    )
}

/// The value of the unlabelled counter or gauge `name`, read through `knictl metrics <name>`;
/// panics naming the output when there is none.
pub fn knictl_metric(node: &TestNode, name: &str) -> u64 {
    let text = knictl_ok(node, &["metrics", name]);
    let prefix = format!("{name} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in:\n{text}"))
}
