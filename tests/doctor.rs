//! `knictl doctor` against a real knid: clean on a healthy node; then each fault planted alone
//! inside the node's private netns — bridge deleted, forwarding off, orphan link, pool nearly
//! full, pod interfaces deleted, set down or renamed behind knid's back — is detected with exit
//! 5 and its fix, and the report is clean again once the fix ran.

use std::path::Path;
use std::process::Command;

use knid_transport::pb;
use testkit::cli::{knictl, knictl_exits, knictl_json, knictl_ok};
use testkit::cni::tool_in;
use testkit::{TestNode, BRIDGE, RPC, SETTLE};

/// doctor's exit when a check failed.
const PROBLEMS: i32 = 5;

/// The JSON report's check named `check` whose message contains `about`.
fn finding<'a>(
    report: &'a serde_json::Value,
    check: &str,
    about: &str,
) -> Option<&'a serde_json::Value> {
    report["checks"]
        .as_array()?
        .iter()
        .find(|c| c["check"] == check && c["message"].as_str().is_some_and(|m| m.contains(about)))
}

/// Asserts doctor exits 0 with every check ok, in text and JSON; returns the text.
fn assert_clean(node: &TestNode) -> String {
    let text = knictl_ok(node, &["doctor"]);
    assert!(text.contains("checks passed"), "doctor: {text}");
    let report = knictl_json(node, &["doctor"]);
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["exit_code"], 0, "{report}");
    let not_ok: Vec<&serde_json::Value> = report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["status"] != "ok")
        .collect();
    assert!(not_ok.is_empty(), "not ok: {not_ok:?}");
    text
}

/// Runs doctor expecting a failed check; returns (text, JSON report). The text's FAIL line
/// names `check` and contains `about`, and one of its fixes contains `fix`.
fn assert_fails(node: &TestNode, check: &str, about: &str, fix: &str) -> serde_json::Value {
    let text = knictl_exits(node, PROBLEMS, &["doctor"]);
    let fail_line = text
        .lines()
        .position(|l| l.starts_with("FAIL") && l.contains(check) && l.contains(about))
        .unwrap_or_else(|| panic!("no FAIL {check} line about {about}: {text}"));
    let fixes: Vec<&str> = text
        .lines()
        .skip(fail_line + 1)
        .take_while(|l| l.trim_start().starts_with("fix:"))
        .collect();
    assert!(
        fixes.iter().any(|l| l.contains(fix)),
        "FAIL {check} does not say {fix:?}: {text}"
    );
    let out = knictl(node, &["doctor", "-o", "json"]);
    assert_eq!(out.status.code(), Some(PROBLEMS));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("doctor JSON");
    assert_eq!(report["ok"], false, "{report}");
    assert_eq!(report["exit_code"], PROBLEMS, "{report}");
    let f = finding(&report, check, about)
        .unwrap_or_else(|| panic!("JSON lacks the {check} finding about {about}: {report}"));
    assert_eq!(f["status"], "fail", "{report}");
    println!("{text}");
    report
}

#[test]
fn doctor_is_clean_on_a_healthy_node() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    let text = assert_clean(&node);
    for check in [
        "socket",
        "condition",
        "bridge",
        "forwarding",
        "pool",
        "orphans",
        "extension",
    ] {
        assert!(
            text.lines()
                .any(|l| l.starts_with("ok") && l.contains(check)),
            "no ok {check} line: {text}"
        );
    }
    println!("{text}");
}

#[test]
fn doctor_names_a_missing_bridge_and_says_setup_node_network() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    assert_clean(&node);
    assert!(node
        .host_rtnl()
        .delete_link_by_name(BRIDGE)
        .expect("delete the bridge"));

    let report = assert_fails(
        &node,
        "bridge",
        "bridge knid0 is missing",
        "knictl setup-node-network",
    );
    // knid's own readiness agrees, and says the same fix.
    let condition = finding(&report, "condition", "NetworkReady").expect("NetworkReady");
    assert_eq!(condition["status"], "fail", "{report}");
    assert_eq!(condition["fixes"][0], "knictl setup-node-network");

    knictl_ok(&node, &["setup-node-network"]);
    node.bridge(BRIDGE);
    assert_clean(&node);
}

/// Writes `value` to the node's net.ipv4.ip_forward (per netns: the machine's is untouched).
fn set_ip_forward(node: &TestNode, value: &str) {
    knid_netops::run_in(&node.host(), || {
        knid_netops::sysctl::write("net/ipv4/ip_forward", value)
    })
    .expect("enter the node's netns")
    .expect("write ip_forward");
}

#[test]
fn doctor_flags_forwarding_turned_off_and_gives_the_sysctl_fix() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    assert_clean(&node);
    set_ip_forward(&node, "0");

    let report = assert_fails(
        &node,
        "forwarding",
        "net.ipv4.ip_forward = 0",
        "sysctl -w net.ipv4.ip_forward=1",
    );
    let f = finding(&report, "forwarding", "ip_forward").expect("forwarding");
    assert!(
        f["fixes"]
            .as_array()
            .expect("fixes")
            .iter()
            .any(|x| x.as_str().is_some_and(|x| x.contains("/etc/sysctl.d/"))),
        "no persistent fix: {report}"
    );
    // Only IPv4 was turned off.
    let v6 = finding(&report, "forwarding", "net.ipv6.conf.all.forwarding").expect("ipv6");
    assert_eq!(v6["status"], "ok", "{report}");

    // The fix doctor offers besides sysctl -w: knid turns forwarding on again.
    knictl_ok(&node, &["setup-node-network"]);
    assert_clean(&node);
}

#[test]
fn doctor_flags_an_orphan_link_and_says_knictl_gc() {
    if !testkit::privileged() {
        return;
    }
    // Named like knid's host ends (`kn` + 10 hex digits) and marked as this knid's, with no
    // record owning it.
    const ORPHAN: &str = "kn00c0ffee00";
    let node = TestNode::start("");
    assert_clean(&node);
    node.host_veth(ORPHAN, "orphan-peer");
    node.set_host_link_alias(ORPHAN, &node.link_mark());

    let report = assert_fails(&node, "orphans", ORPHAN, "knictl gc");
    let f = finding(&report, "orphans", ORPHAN).expect("orphans");
    assert!(
        f["message"]
            .as_str()
            .is_some_and(|m| m.contains("host-link") && m.contains("no-record")),
        "{report}"
    );
    assert!(
        testkit::link_in(node.host_path(), ORPHAN).is_some(),
        "doctor removed {ORPHAN}: it must only look"
    );

    knictl_ok(&node, &["gc"]);
    testkit::wait_for(&format!("{ORPHAN} to be deleted"), SETTLE, || {
        testkit::link_in(node.host_path(), ORPHAN).is_none()
    });
    assert_clean(&node);
}

/// A bridge network with one IPv4 /27: 32 addresses less network, broadcast and gateway leave
/// 29 assignable ones.
const SMALL_NETWORK: &str = r#"
[networks.small]
bridge = "small0"
subnets = ["10.99.0.0/27"]
"#;
const SMALL_TOTAL: u64 = 29;

/// Attaches `count` interfaces (eth0, eth1, ...) of sandbox `id` to the small network.
fn attach_many(node: &TestNode, netns: &Path, id: &str, count: usize) {
    let req = pb::AttachRequest {
        sandbox_id: id.to_owned(),
        netns_path: netns.display().to_string(),
        interfaces: (0..count)
            .map(|i| pb::InterfaceRequest {
                name: format!("eth{i}"),
                network: "small".to_owned(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    node.client().attach(&req, RPC).expect("Attach");
}

#[test]
fn doctor_warns_at_90_percent_and_when_a_pool_is_exhausted_and_never_fails_for_it() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start(SMALL_NETWORK);
    assert_clean(&node);
    assert_eq!(node.network("small").capacity[0].total, SMALL_TOTAL);

    // 29 of 29: two sandboxes of 15 and 14 interfaces (at most 16 per sandbox).
    let (a, b) = (node.netns("pool-a"), node.netns("pool-b"));
    attach_many(&node, &a, "pool-a", 15);
    attach_many(&node, &b, "pool-b", 14);
    assert_eq!(node.capacity_used("small"), SMALL_TOTAL);
    // A full pool stops new pods only: a warning, and doctor exits 0.
    let text = knictl_ok(&node, &["doctor"]);
    assert!(
        text.lines().any(|l| l.starts_with("warn")
            && l.contains("network small: ipv4 29/29 used")
            && l.contains("exhausted")),
        "doctor: {text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("warn") && l.contains("NetworkSchedulable/small: Exhausted")),
        "doctor: {text}"
    );
    assert!(
        !text.lines().any(|l| l.starts_with("FAIL")),
        "doctor: {text}"
    );
    let report = knictl_json(&node, &["doctor"]);
    let f = finding(&report, "pool", "network small").expect("pool");
    assert!(
        f["fixes"][1]
            .as_str()
            .is_some_and(|x| x.contains("wider subnet")),
        "{report}"
    );

    // 27 of 29 (93.1 %): still a warning.
    knictl_ok(&node, &["detach", "pool-b", "--ifname", "eth13"]);
    knictl_ok(&node, &["detach", "pool-a", "--ifname", "eth14"]);
    node.wait_capacity_used("small", 27);
    let text = knictl_ok(&node, &["doctor"]);
    assert!(
        text.lines()
            .any(|l| l.starts_with("warn") && l.contains("network small: ipv4 27/29 used")),
        "doctor: {text}"
    );
    assert!(
        !text.lines().any(|l| l.starts_with("FAIL")),
        "doctor: {text}"
    );

    knictl_ok(&node, &["detach", "pool-a"]);
    knictl_ok(&node, &["detach", "pool-b"]);
    node.wait_capacity_used("small", 0);
    assert_clean(&node);
}

#[test]
fn doctor_exits_3_and_says_what_to_check_when_knid_is_unreachable() {
    // Needs no daemon and no privilege: nothing listens on this path.
    let out = Command::new(env!("CARGO_BIN_EXE_knictl"))
        .args(["--socket", "/nonexistent/knid.sock", "doctor"])
        .env_remove("KNID_SOCKET")
        .output()
        .expect("run knictl");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{text}");
    let fail = text
        .lines()
        .find(|l| l.starts_with("FAIL") && l.contains("socket"))
        .unwrap_or_else(|| panic!("no FAIL socket line: {text}"));
    assert!(
        fail.contains("/nonexistent/knid.sock does not exist"),
        "{fail}"
    );
    assert!(
        text.contains("fix: ") && text.contains("KNID_SOCKET"),
        "{text}"
    );
}

#[test]
fn doctor_run_by_a_user_knid_does_not_serve_names_allowed_uids() {
    if !testkit::privileged() {
        return;
    }
    // A socket anyone may connect to: knid itself refuses the caller (allowed_uids).
    let node = TestNode::start("socket_mode = 0o666\n");
    let out = Command::new("nsenter")
        .arg(format!("--net={}", node.host_path().display()))
        .args([
            "--",
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ])
        .arg(env!("CARGO_BIN_EXE_knictl"))
        .arg("--socket")
        .arg(node.socket())
        .arg("doctor")
        .env_remove("KNID_SOCKET")
        .output()
        .expect("run nsenter setpriv knictl (util-linux)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("FAIL") && l.contains("socket") && l.contains("allowed_uids")),
        "{text}"
    );
    assert!(text.contains("fix: run knictl as root"), "{text}");
    assert!(text.contains("allowed_uids = [0, 65534]"), "{text}");
}

/// The reconciler every 200 ms, so its look at the attached interfaces comes quickly.
const FAST_RECONCILER: &str = r#"gc_interval = "200ms""#;

/// Attaches sandbox `id` (one eth0) in a new netns of the same name.
fn attach_one(node: &TestNode, id: &str) -> (std::path::PathBuf, pb::Sandbox) {
    let netns = node.netns(id);
    let sandbox = node
        .client()
        .attach(&node.attach_req(id, &netns, "eth0"), RPC)
        .unwrap_or_else(|e| panic!("Attach {id}: {e}"));
    (netns, sandbox)
}

/// The `PodInterfacesReady` condition of Status.
fn pod_interfaces(node: &TestNode) -> pb::Condition {
    node.condition("PodInterfacesReady")
}

#[test]
fn interfaces_gone_down_or_renamed_behind_knids_back_are_reported_everywhere() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start(FAST_RECONCILER);
    let (_, _ok) = attach_one(&node, "pod-ok");
    let (gone_ns, _) = attach_one(&node, "pod-gone");
    let (down_ns, _) = attach_one(&node, "pod-down");
    let (renamed_ns, _) = attach_one(&node, "pod-renamed");
    let (_, host_down) = attach_one(&node, "pod-host-down");
    assert!(pod_interfaces(&node).status, "healthy pods are reported");

    // Behind knid's back, with netlink in each netns: eth0 deleted (its host end goes with it),
    // set down, renamed; and one host end set down.
    let mut pod = testkit::rtnl_in(&gone_ns);
    assert!(pod.delete_link_by_name("eth0").expect("delete eth0"));
    let mut pod = testkit::rtnl_in(&down_ns);
    let eth0 = pod.link_by_name("eth0").expect("look up").expect("eth0");
    pod.set_down(eth0.index).expect("set eth0 down");
    let mut pod = testkit::rtnl_in(&renamed_ns);
    let eth0 = pod.link_by_name("eth0").expect("look up").expect("eth0");
    pod.set_down(eth0.index).expect("set eth0 down");
    pod.rename(eth0.index, "moved0").expect("rename eth0");
    let host_name = host_down.interfaces[0].host_ifname.clone();
    let mut host = node.host_rtnl();
    let link = host
        .link_by_name(&host_name)
        .expect("look up")
        .expect("host end");
    host.set_down(link.index).expect("set the host end down");

    let wants = [
        "pod-gone/eth0: interface eth0 does not exist".to_owned(),
        "pod-down/eth0: interface eth0 in netns".to_owned(),
        "pod-renamed/eth0: interface eth0 does not exist".to_owned(),
        "it was renamed to moved0".to_owned(),
        format!("pod-host-down/eth0: interface {host_name} in the host netns is down"),
    ];
    // A round may run while the changes above are being made: wait for one that saw them all.
    testkit::wait_for(
        "the reconciler to report every changed interface",
        SETTLE,
        || {
            let c = pod_interfaces(&node);
            !c.status && wants.iter().all(|w| c.message.contains(w))
        },
    );
    let c = pod_interfaces(&node);
    assert_eq!(c.reason, "InterfacesChanged", "{c:?}");
    assert!(!c.message.contains("pod-ok"), "{:?}", c.message);
    assert!(
        node.client().status(RPC).expect("Status").ready,
        "one pod's interface turned the node not ready"
    );

    let metrics = knictl_ok(&node, &["metrics", "knid_pod_interfaces_changed"]);
    for want in [
        "knid_pod_interfaces_changed{difference=\"missing\"} 1",
        "knid_pod_interfaces_changed{difference=\"renamed\"} 1",
        "knid_pod_interfaces_changed{difference=\"down\"} 2",
    ] {
        assert!(metrics.contains(want), "no {want:?} in:\n{metrics}");
    }
    // The rounds that reported them were counted.
    let rounds = testkit::cli::knictl_metric(&node, "knid_reconciler_rounds_total");
    assert!(rounds >= 1, "knid_reconciler_rounds_total {rounds}");

    assert_fails(&node, "condition", "PodInterfacesReady", "knictl check");

    // knictl check names the interface and exits with the difference code.
    for (id, want) in [
        ("pod-gone", "interface eth0 does not exist".to_owned()),
        ("pod-down", "interface eth0 in netns".to_owned()),
        ("pod-renamed", "it was renamed to moved0".to_owned()),
        (
            "pod-host-down",
            format!("interface {host_name} in the host netns is down"),
        ),
    ] {
        let out = knictl_exits(&node, PROBLEMS, &["check", id]);
        assert!(
            out.contains(&format!("{id}: differs")) && out.contains(&want),
            "check {id}: {out}"
        );
    }
    assert_eq!(knictl_ok(&node, &["check", "pod-ok"]).trim(), "pod-ok: ok");

    // Fixed behind knid's back too: the next round clears the condition.
    for id in ["pod-gone", "pod-down", "pod-renamed", "pod-host-down"] {
        node.client()
            .detach(&testkit::detach_req(id), RPC)
            .unwrap_or_else(|e| panic!("Detach {id}: {e}"));
    }
    testkit::wait_for("the condition to clear", SETTLE, || {
        pod_interfaces(&node).status
    });
}

/// Whether a TCP connection from `client_ns` reaches a listener on `server_ip` in `server_ns`
/// within two seconds.
fn tcp_reaches(server_ns: &Path, server_ip: std::net::IpAddr, client_ns: &Path) -> bool {
    use knid_netops::NetnsHandle;
    let server = NetnsHandle::open(server_ns).expect("open server netns");
    let client = NetnsHandle::open(client_ns).expect("open client netns");
    let listener = knid_netops::run_in(&server, || std::net::TcpListener::bind((server_ip, 0)))
        .expect("enter server netns")
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    knid_netops::run_in(&client, || {
        std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(2)).is_ok()
    })
    .expect("enter client netns")
}

#[test]
fn a_forward_chain_that_drops_pod_traffic_fails_doctor_with_a_fix_that_lets_it_through() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start(
        r#"
[networks.rt]
kind = "routed"
subnets = ["10.77.0.0/24"]
"#,
    );
    let mut pods = Vec::new();
    for id in ["fw-a", "fw-b"] {
        let netns = node.netns(id);
        let mut req = node.attach_req(id, &netns, "eth0");
        req.interfaces[0].network = "rt".to_owned();
        let sandbox = node
            .client()
            .attach(&req, RPC)
            .unwrap_or_else(|e| panic!("Attach {id}: {e}"));
        let (ip, _) = testkit::ip_of(&sandbox.interfaces[0], "ipv4");
        pods.push((netns, ip.addr()));
    }
    let reaches = || tcp_reaches(&pods[0].0, pods[0].1, &pods[1].0);
    assert!(
        reaches(),
        "routed pods do not reach each other on a clean node"
    );
    knictl_ok(&node, &["doctor"]);

    // As Docker leaves it, in the node's own netns.
    testkit::cni::tool_in(node.host_path(), "iptables", &["-P", "FORWARD", "DROP"]);
    assert!(
        !reaches(),
        "the forward chain's drop policy let pod traffic through"
    );
    let out = knictl(&node, &["-o", "json", "doctor"]);
    assert_eq!(out.status.code(), Some(PROBLEMS));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    let f = finding(&report, "firewall", "ip filter FORWARD").unwrap_or_else(|| panic!("{report}"));
    assert_eq!(f["status"], "fail", "{report}");
    assert!(
        f["message"].as_str().is_some_and(|m| m.contains("kn*")),
        "{f}"
    );
    let fixes: Vec<String> = f["fixes"]
        .as_array()
        .expect("fixes")
        .iter()
        .filter_map(|x| x.as_str())
        .filter_map(|x| x.strip_prefix("nft "))
        .map(str::to_owned)
        .collect();
    assert_eq!(fixes.len(), 2, "{f}");
    // Apply the fixes exactly as doctor wrote them.
    for fix in &fixes {
        let args: Vec<String> = fix.split_whitespace().map(|a| a.replace('"', "")).collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        testkit::cni::tool_in(node.host_path(), "nft", &args);
    }
    assert!(reaches(), "doctor's fixes did not let the pods through");

    // The nftables equivalent: a table of the admin's own with a dropping forward chain.
    let host = node.host_path();
    testkit::cni::tool_in(host, "nft", &["add", "table", "inet", "hostfw"]);
    testkit::cni::tool_in(
        host,
        "nft",
        &[
            "add",
            "chain",
            "inet",
            "hostfw",
            "fw_forward",
            "{",
            "type",
            "filter",
            "hook",
            "forward",
            "priority",
            "0",
            ";",
            "policy",
            "drop",
            ";",
            "}",
        ],
    );
    assert!(
        !reaches(),
        "the nftables forward chain let pod traffic through"
    );
    let out = knictl(&node, &["-o", "json", "doctor"]);
    assert_eq!(out.status.code(), Some(PROBLEMS));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    let f = finding(&report, "firewall", "inet hostfw fw_forward")
        .unwrap_or_else(|| panic!("{report}"));
    for fix in f["fixes"]
        .as_array()
        .expect("fixes")
        .iter()
        .filter_map(|x| x.as_str())
    {
        let Some(fix) = fix.strip_prefix("nft ") else {
            continue;
        };
        let args: Vec<String> = fix.split_whitespace().map(|a| a.replace('"', "")).collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        testkit::cni::tool_in(host, "nft", &args);
    }
    assert!(
        reaches(),
        "doctor's nftables fixes did not let the pods through"
    );
    let report = knictl_json(&node, &["doctor"]);
    let f = finding(&report, "firewall", "no forward chain drops")
        .unwrap_or_else(|| panic!("{report}"));
    assert_eq!(f["status"], "ok", "{report}");
    for id in ["fw-a", "fw-b"] {
        knictl_ok(&node, &["detach", id]);
    }
}

/// The elements of knid's host-port maps, as `nft` lists them.
fn host_port_elements(node: &TestNode) -> Vec<String> {
    let listing = tool_in(node.host_path(), "nft", &["list", "table", "inet", "knid"]);
    listing
        .lines()
        .filter(|l| l.contains("elements = "))
        .map(|l| l.trim().to_owned())
        .collect()
}

#[test]
fn host_ports_missing_from_the_kernel_fail_check_inspect_and_doctor_until_setup_node_network() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start(FAST_RECONCILER);
    let netns = node.netns("web");
    let mut req = node.attach_req("web", &netns, "eth0");
    req.port_mappings = vec![pb::PortMapping {
        host_port: 8080,
        container_port: 80,
        protocol: "tcp".to_owned(),
        ..Default::default()
    }];
    let sandbox = node.client().attach(&req, RPC).expect("Attach web");
    let v4 = sandbox.interfaces[0]
        .ips
        .iter()
        .find_map(|c| c.address.split_once('/').map(|(a, _)| a.to_owned()))
        .filter(|a| !a.contains(':'))
        .expect("an IPv4 address first");
    let element = format!("tcp/8080 -> {v4}:80");
    assert_eq!(knictl_ok(&node, &["check", "web"]).trim(), "web: ok");
    let inspect = knictl_ok(&node, &["inspect", "web"]);
    assert!(
        inspect.contains("host port tcp/8080 -> pod port 80"),
        "{inspect}"
    );
    assert!(
        inspect.contains(&format!("element {element}  [in the kernel]")),
        "{inspect}"
    );
    let report = knictl_json(&node, &["doctor"]);
    let nat = finding(&report, "nat", "host-port element").expect("a nat finding");
    assert_eq!(nat["status"], "ok", "{report}");

    let gauges = knictl_ok(&node, &["metrics"]);
    for want in ["knid_host_ports 1", "knid_nat_map_elements 2"] {
        assert!(gauges.contains(want), "no {want:?} in:\n{gauges}");
    }

    // One element deleted behind knid's back (its IPv6 twin stays).
    tool_in(
        node.host_path(),
        "nft",
        &[
            "delete",
            "element",
            "inet",
            "knid",
            "hostports4",
            "{ tcp . 8080 }",
        ],
    );
    let out = knictl_exits(&node, PROBLEMS, &["check", "web"]);
    assert!(
        out.contains("web: differs") && out.contains(&format!("host port {element} is missing")),
        "check: {out}"
    );
    let inspect = knictl_ok(&node, &["inspect", "web"]);
    assert!(
        inspect.contains(&format!("element {element}  [MISSING from the kernel]")),
        "{inspect}"
    );
    assert_fails(&node, "nat", &element, "knictl setup-node-network");
    testkit::wait_for("the reconciler to report the host port", SETTLE, || {
        pod_interfaces(&node).message.contains(&element)
    });
    let metrics = knictl_ok(&node, &["metrics", "knid_pod_interfaces_changed"]);
    assert!(
        metrics.contains("knid_pod_interfaces_changed{difference=\"hostport\"} 1"),
        "{metrics}"
    );

    knictl_ok(&node, &["setup-node-network"]);
    assert_eq!(knictl_ok(&node, &["check", "web"]).trim(), "web: ok");
    assert_eq!(host_port_elements(&node).len(), 2);

    // The whole table deleted.
    tool_in(
        node.host_path(),
        "nft",
        &["delete", "table", "inet", "knid"],
    );
    let out = knictl_exits(&node, PROBLEMS, &["check", "web"]);
    assert!(out.contains("does not exist"), "check: {out}");
    assert_fails(&node, "nat", "does not exist", "knictl setup-node-network");
    knictl_ok(&node, &["setup-node-network"]);
    assert_eq!(knictl_ok(&node, &["check", "web"]).trim(), "web: ok");
    testkit::wait_for("the condition to clear", SETTLE, || {
        pod_interfaces(&node).status
    });
    assert_clean(&node);
}
