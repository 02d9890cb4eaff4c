//! The real `knictl` binary against a test daemon: every subcommand, its table, wide and JSON
//! output, inspect's live kernel view, shell completions, and each documented exit code (0
//! success, 1 request failed, 2 bad usage, 3 knid unreachable, 4 not found, 5 difference found).
//! Against a node, knictl runs inside the node's private host netns, as on a real node.

use std::path::Path;
use std::process::{Command, Output};

use testkit::cli::{knictl_exits, knictl_json, knictl_ok};
use testkit::{TestNode, RPC, SETTLE};

/// Runs `knictl --socket <socket> <args>` in the test's own netns: for the cases that need no
/// daemon.
fn knictl(socket: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_knictl"))
        .arg("--socket")
        .arg(socket)
        .args(args)
        .env_remove("KNID_SOCKET")
        .output()
        .expect("run knictl")
}

#[test]
fn knictl_drives_attach_inspect_list_and_detach() {
    if !testkit::privileged() {
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
    let sandbox = node.inspect("pod-cli");
    testkit::assert_pod_side(&netns, &sandbox.interfaces[0]);

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
        testkit::link_in(&netns, "eth0").is_none(),
        "eth0 left after knictl detach"
    );
    assert!(!knictl_ok(&node, &["ls"]).contains("pod-cli"));
}

#[test]
fn knictl_inspect_of_unknown_sandbox_exits_4_with_not_found() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    let out = testkit::cli::knictl(&node, &["inspect", "unknown"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "stderr: {stderr}");
    assert!(
        stderr.contains("NotFound"),
        "stderr lacks NotFound: {stderr:?}"
    );
}

#[test]
fn knictl_attach_with_a_bad_sandbox_id_exits_1_naming_the_field() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    let netns = node.netns("bad-id");
    let out = testkit::cli::knictl(
        &node,
        &["attach", "bad/id", "--netns", &netns.display().to_string()],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(
        testkit::names_field(&stderr, "sandbox_id"),
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
    if !testkit::privileged() {
        return;
    }
    // Named like knid's host ends (`kn` + 10 hex digits) and marked as this knid's, but with
    // no record: what a crash between link creation and the store write leaves behind.
    const ORPHAN: &str = "kn0123abcdef";
    let node = TestNode::start("");
    node.host_veth(ORPHAN, "gc-peer");
    node.set_host_link_alias(ORPHAN, &node.link_mark());

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
        testkit::link_in(node.host_path(), ORPHAN).is_some(),
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
    testkit::wait_for(&format!("{ORPHAN} to be deleted"), SETTLE, || {
        testkit::link_in(node.host_path(), ORPHAN).is_none()
    });
    assert!(testkit::link_in(node.host_path(), "gc-peer").is_none());

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
    if !testkit::privileged() {
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

#[test]
fn every_read_verb_honours_table_wide_and_json() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    let netns = node.netns("fmt");
    let sandbox = node
        .client()
        .attach(&node.attach_req("pod-fmt", &netns, "eth0"), RPC)
        .expect("Attach");

    // JSON: one document per verb, with the API's field names.
    assert_eq!(knictl_json(&node, &["status"])["ready"], true);
    assert_eq!(
        knictl_json(&node, &["networks"])["networks"][0]["name"],
        "default"
    );
    assert_eq!(knictl_json(&node, &["ls"])["sandboxes"][0]["id"], "pod-fmt");
    assert_eq!(knictl_json(&node, &["inspect", "pod-fmt"])["id"], "pod-fmt");
    let check = knictl_json(&node, &["check", "pod-fmt"]);
    assert_eq!(check["ok"], true, "{check}");
    assert_eq!(check["sandbox_id"], "pod-fmt", "{check}");
    assert_eq!(
        knictl_json(&node, &["gc", "--dry-run"])["removed"],
        serde_json::json!([])
    );
    assert_eq!(
        knictl_json(&node, &["extensions"])["extensions"],
        serde_json::json!([])
    );
    assert_eq!(knictl_json(&node, &["doctor"])["ok"], true);

    // wide: the table's columns and more.
    let table = knictl_ok(&node, &["ls"]);
    let wide = knictl_ok(&node, &["-o", "wide", "ls"]);
    assert!(!table.contains("GENERATION"), "ls: {table}");
    let header: Vec<&str> = wide
        .lines()
        .next()
        .expect("header")
        .split_whitespace()
        .collect();
    for column in ["ID", "IFS", "NETWORKS", "NETNS", "GENERATION", "CREATED"] {
        assert!(
            header.contains(&column),
            "ls -o wide lacks {column}: {wide}"
        );
    }
    let row: Vec<&str> = wide
        .lines()
        .find(|l| l.starts_with("pod-fmt"))
        .unwrap_or_else(|| panic!("ls -o wide lacks pod-fmt: {wide}"))
        .split_whitespace()
        .collect();
    let cell = |column: &str| row[header.iter().position(|h| *h == column).expect("column")];
    assert_eq!(cell("GENERATION"), sandbox.generation.to_string());
    assert_eq!(cell("IFS"), "1");
    assert_eq!(cell("NETWORKS"), "default");
    assert_eq!(cell("NETNS"), netns.display().to_string());
    assert!(
        cell("CREATED").ends_with('Z'),
        "created: {}",
        cell("CREATED")
    );

    let networks = knictl_ok(&node, &["-o", "wide", "networks"]);
    // 10.88.0.0/24 has 253 assignable addresses; the pod holds one.
    assert!(
        networks.contains("1/253 (0.3%)"),
        "networks -o wide: {networks}"
    );
    assert!(networks.contains("GATEWAYS") && networks.contains("10.88.0.1"));
    assert!(!knictl_ok(&node, &["networks"]).contains("GATEWAYS"));
    assert!(knictl_ok(&node, &["-o", "wide", "status"]).contains("SINCE"));
    assert!(!knictl_ok(&node, &["status"]).contains("SINCE"));

    knictl_ok(&node, &["detach", "pod-fmt"]);
    node.assert_host_clean();
}

#[test]
fn inspect_shows_the_kernel_view_and_flags_links_changed_behind_knids_back() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    let netns = node.netns("live");
    let sandbox = node
        .client()
        .attach(&node.attach_req("pod-live", &netns, "eth0"), RPC)
        .expect("Attach");
    let iface = &sandbox.interfaces[0];
    let host = node
        .host_rtnl()
        .link_by_name(&iface.host_ifname)
        .expect("look up host end")
        .expect("host end exists");

    let text = knictl_ok(&node, &["inspect", "pod-live"]);
    assert!(
        text.contains("kernel:     every recorded object is present"),
        "{text}"
    );
    assert!(text.contains("  kernel: ok"), "{text}");
    assert!(
        text.contains(&format!("ifindex {}, up, master knid0", host.index)),
        "{text}"
    );
    assert!(
        !text.contains("MISSING") && !text.contains("DOWN"),
        "{text}"
    );
    println!("{text}");
    let json = knictl_json(&node, &["inspect", "pod-live"]);
    assert_eq!(json["id"], "pod-live", "the recorded view is unchanged");
    let live = &json["kernel"]["interfaces"][0];
    assert_eq!(json["kernel"]["ok"], true, "{json}");
    assert_eq!(live["host_link"]["master"], "knid0", "{json}");
    assert_eq!(live["host_link"]["index"], host.index, "{json}");
    assert_eq!(live["pod_link"]["mac"], iface.mac.to_lowercase(), "{json}");

    // The host end set down behind knid's back.
    node.host_rtnl()
        .set_down(host.index)
        .expect("set host end down");
    let text = knictl_ok(&node, &["inspect", "pod-live"]);
    assert!(
        text.contains(&format!("kernel: DOWN host link {}", iface.host_ifname)),
        "{text}"
    );
    node.host_rtnl()
        .set_up(host.index)
        .expect("set host end up");

    // The pod link deleted: the veth pair goes with it, both ends MISSING.
    testkit::rtnl_in(&netns)
        .delete_link_by_name("eth0")
        .expect("delete eth0");
    let text = knictl_ok(&node, &["inspect", "pod-live"]);
    println!("{text}");
    assert!(text.contains("kernel: MISSING pod link eth0"), "{text}");
    assert!(
        text.contains(&format!("kernel: MISSING host link {}", iface.host_ifname)),
        "{text}"
    );
    let json = knictl_json(&node, &["inspect", "pod-live"]);
    assert_eq!(json["kernel"]["ok"], false, "{json}");
    let live = &json["kernel"]["interfaces"][0];
    assert_eq!(live["pod_link"]["present"], false, "{json}");
    assert_eq!(live["host_link"]["present"], false, "{json}");
    let recorded = knictl_json(&node, &["inspect", "pod-live", "--no-kernel"]);
    assert!(recorded.get("kernel").is_none(), "{recorded}");
    assert!(!knictl_ok(&node, &["inspect", "pod-live", "--no-kernel"]).contains("kernel:"));

    // check calls it a difference: exit 5, in text and JSON.
    let out = testkit::cli::knictl(&node, &["check", "pod-live"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "stderr: {stderr}");
    assert!(stderr.contains("FailedPrecondition"), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("pod-live: differs"));
    let json: serde_json::Value = serde_json::from_str(&knictl_exits(
        &node,
        5,
        &["check", "pod-live", "-o", "json"],
    ))
    .expect("check -o json is JSON");
    assert_eq!(json["ok"], false, "{json}");
    assert!(
        json["difference"]
            .as_str()
            .is_some_and(|d| d.contains("eth0")),
        "{json}"
    );

    // The netns itself deleted behind knid's back.
    node.remove_netns(&netns);
    let text = knictl_ok(&node, &["inspect", "pod-live"]);
    assert!(
        text.contains(&format!("kernel:     MISSING netns {}", netns.display())),
        "{text}"
    );
    assert!(
        text.contains("kernel: MISSING netns: eth0 not visible"),
        "{text}"
    );

    knictl_ok(&node, &["detach", "pod-live"]);
    node.assert_host_clean();
}

#[test]
fn check_of_an_unknown_sandbox_exits_4() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    let out = testkit::cli::knictl(&node, &["check", "nobody-here"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "stderr: {stderr}");
    assert!(stderr.contains("NotFound"), "{stderr}");
}

#[test]
fn help_documents_every_exit_code() {
    let out = knictl(Path::new("/nonexistent"), &["--help"]);
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8_lossy(&out.stdout);
    for code in 0..=5 {
        assert!(
            help.contains(&format!("\n  {code}  ")),
            "--help does not document exit code {code}: {help}"
        );
    }
}

/// The verbs `knictl --help` lists (help itself excepted).
fn verbs() -> Vec<String> {
    let out = knictl(Path::new("/nonexistent"), &["--help"]);
    let help = String::from_utf8_lossy(&out.stdout).into_owned();
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|v| *v != "help")
        .map(str::to_owned)
        .collect()
}

#[test]
fn completion_scripts_name_every_subcommand() {
    let verbs = verbs();
    for want in ["status", "inspect", "gc", "doctor", "completion", "netns"] {
        assert!(
            verbs.iter().any(|v| v == want),
            "--help lacks {want}: {verbs:?}"
        );
    }
    let bash = knictl(Path::new("/nonexistent"), &["completion", "bash"]);
    assert_eq!(bash.status.code(), Some(0));
    let bash = String::from_utf8(bash.stdout).expect("utf-8");
    let words: Vec<&str> = bash
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .collect();
    for verb in &verbs {
        assert!(
            words.contains(&verb.as_str()),
            "bash completion lacks {verb}"
        );
    }
    for shell in ["zsh", "fish"] {
        let out = knictl(Path::new("/nonexistent"), &["completion", shell]);
        assert_eq!(out.status.code(), Some(0), "completion {shell}");
        let script = String::from_utf8_lossy(&out.stdout);
        assert!(
            script.contains("doctor") && script.contains("setup-node-network"),
            "{shell} completion: {script}"
        );
    }
}

#[test]
fn knictl_metrics_prints_the_exposition_and_filters_families() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    let netns = node.netns("metrics");
    node.client()
        .attach(&node.attach_req("pod-metrics", &netns, "eth0"), RPC)
        .expect("Attach");

    let all = knictl_ok(&node, &["metrics"]);
    assert!(
        all.contains("knid_operations_total{code=\"OK\",op=\"attach\"} 1"),
        "{all}"
    );
    assert!(all.contains("# TYPE knid_operation_duration_seconds histogram"));
    let ipam = knictl_ok(&node, &["metrics", "knid_ipam"]);
    assert!(
        ipam.contains("knid_ipam_used_addresses{family=\"ipv4\",network=\"default\"} 1"),
        "{ipam}"
    );
    assert!(
        ipam.lines().all(|l| l.contains("knid_ipam_")),
        "only knid_ipam families: {ipam}"
    );
    let json = knictl_json(&node, &["metrics", "knid_sandboxes"]);
    assert!(
        json["text"]
            .as_str()
            .is_some_and(|t| t.contains("knid_sandboxes 1")),
        "{json}"
    );
}
