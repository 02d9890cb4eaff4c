//! The `cni` driver end to end: knid runs Debian's real CNI plugins (bridge, ptp, host-local,
//! tuning) for networks of kind `cni`, in a private netns. Each test checks what the plugins did
//! in the kernel and in host-local's reservation files, that DEL undoes it (on detach, on a
//! failed ADD, after a crash between ADD and Attached, and in GC), and what knid reports.

use std::path::Path;
use std::time::Duration;

use knid_transport::client::ClientError;
use knid_transport::pb;
use nix::sys::signal::Signal::SIGABRT;
use std::os::unix::process::ExitStatusExt;
use tempfile::TempDir;
use testkit::{expect_code, link_in, TestNode, RPC};

/// Where Debian installs the plugins.
const CNI_BIN: &str = "/usr/lib/cni";

/// A knid whose `cni` networks keep host-local's reservations in a temp dir of their own.
struct CniNode {
    node: TestNode,
    ipam: TempDir,
}

/// The plugins, or a skip (a failure under CI=true, where .ci/run installs them).
fn plugins_present() -> bool {
    if !testkit::privileged() {
        return false;
    }
    let present = ["bridge", "ptp", "host-local", "tuning"]
        .iter()
        .all(|p| Path::new(CNI_BIN).join(p).is_file());
    if !present {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true but the CNI plugins are not in {CNI_BIN} (containernetworking-plugins)"
        );
        eprintln!("skipping: the CNI plugins are not in {CNI_BIN}");
    }
    present
}

/// The IPAM section every test list uses: host-local on `subnet`, data in `dir`.
fn host_local(subnet: &str, dir: &Path) -> String {
    format!(
        r#"{{"type": "host-local", "subnet": "{subnet}", "dataDir": "{}"}}"#,
        dir.display()
    )
}

impl CniNode {
    /// knid with network `net` of kind cni running the list `plugins(ipam_dir)`.
    fn start(plugins: impl Fn(&Path) -> String, env: &[(&str, &str)]) -> CniNode {
        let ipam = tempfile::Builder::new()
            .prefix("knid-cni-ipam-")
            .tempdir()
            .expect("ipam tempdir");
        let list = format!(
            r#"{{"cniVersion": "1.0.0", "name": "cninet", "plugins": [{}]}}"#,
            plugins(ipam.path())
        );
        let config = format!(
            "cni_path = [\"{CNI_BIN}\"]\n\n[networks.net]\nkind = \"cni\"\nconflist_inline = '''{list}'''\n"
        );
        CniNode {
            node: TestNode::start_with(&config, env, &[]),
            ipam,
        }
    }

    /// host-local's reservation files (one per address, named by it) of list `cninet`.
    fn reservations(&self) -> Vec<String> {
        let dir = self.ipam.path().join("cninet");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return Vec::new();
        };
        let mut out: Vec<String> = entries
            .map(|e| {
                e.expect("dir entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .filter(|n| n.parse::<std::net::IpAddr>().is_ok())
            .collect();
        out.sort();
        out
    }

    fn attach(&self, id: &str, netns: &Path) -> Result<pb::Sandbox, ClientError> {
        let mut req = testkit::attach_req(id, netns, "eth0");
        req.interfaces[0].network = "net".into();
        req.pod = Some(pb::PodRef {
            name: format!("{id}-name"),
            namespace: "ns1".into(),
            uid: format!("{id}-uid"),
            ..Default::default()
        })
        .into();
        self.node.client().attach(&req, RPC)
    }
}

/// The single cni interface of `sandbox`, checked against the pod netns: the link exists with
/// the reported MAC and address, and the plugins' raw result is reported.
fn check_attached(sandbox: &pb::Sandbox, netns: &Path) -> (pb::InterfaceResult, String) {
    assert_eq!(sandbox.state, "attached");
    let iface = sandbox.interfaces[0].clone();
    assert_eq!(
        (iface.kind.as_str(), iface.network.as_str()),
        ("cni", "net")
    );
    let link = link_in(netns, "eth0").expect("eth0 in the pod netns");
    assert_eq!(
        link.mac,
        Some(testkit::parse_mac(&iface.mac)),
        "reported MAC is eth0's"
    );
    assert_eq!(iface.ips.len(), 1, "{iface:?}");
    let addr: ipnet::IpNet = iface.ips[0].address.parse().expect("CIDR");
    assert!(
        testkit::addresses_in(netns, "eth0").contains(&addr),
        "{addr} not on eth0"
    );
    let result: serde_json::Value =
        serde_json::from_str(&iface.cni_result).expect("cni_result is the plugins' JSON");
    assert_eq!(result["cniVersion"], "1.0.0");
    (iface, addr.addr().to_string())
}

fn pod_has_no_eth0(netns: &Path) -> bool {
    link_in(netns, "eth0").is_none()
}

#[test]
fn bridge_and_host_local_pods_attach_talk_and_detach_without_leftovers() {
    if !plugins_present() {
        return;
    }
    let n = CniNode::start(
        |dir| {
            format!(
                r#"{{"type": "bridge", "bridge": "cnibr0", "isGateway": true, "ipam": {}}}"#,
                host_local("10.77.0.0/24", dir)
            )
        },
        &[],
    );
    let pods = [("cni-a", n.node.netns("a")), ("cni-b", n.node.netns("b"))];
    let mut addrs = Vec::new();
    for (id, netns) in &pods {
        let sandbox = n.attach(id, netns).expect("Attach on the cni network");
        let (iface, addr) = check_attached(&sandbox, netns);
        // The host end the bridge plugin made is reported, and is a port of its bridge.
        let host = n
            .node
            .host_rtnl()
            .link_by_name(&iface.host_ifname)
            .expect("dump");
        let host = host.unwrap_or_else(|| panic!("host end {} missing", iface.host_ifname));
        let bridge = n.node.bridge("cnibr0");
        assert_eq!(host.controller, Some(bridge.index));
        // host-local reserved the address for this container.
        let file = n.ipam.path().join("cninet").join(&addr);
        let owner = std::fs::read_to_string(&file).expect("host-local reservation file");
        assert!(
            owner.starts_with(id),
            "reservation of {addr} holds {owner:?}"
        );
        addrs.push(addr);
        // Inspect after the fact reports the same.
        let again = n.node.inspect(id);
        assert_eq!(again.interfaces[0], iface);
    }
    assert_eq!(n.reservations().len(), 2);
    testkit::tcp_exchange(&pods[0].1, addrs[0].parse().expect("ip"), &pods[1].1);

    for (id, netns) in &pods {
        n.node
            .client()
            .detach(&testkit::detach_req(id), RPC)
            .expect("Detach");
        assert!(pod_has_no_eth0(netns), "the DEL chain left eth0 in {id}");
        n.node.assert_not_found(id);
    }
    assert_eq!(
        n.reservations(),
        Vec::<String>::new(),
        "host-local kept addresses"
    );
    assert!(
        n.node.bridge_ports("cnibr0").is_empty(),
        "host veths left on the bridge"
    );
}

fn check(id: &str) -> pb::CheckRequest {
    pb::CheckRequest {
        sandbox_id: id.to_owned(),
        ..Default::default()
    }
}

#[test]
fn ptp_with_tuning_attaches_and_detaches() {
    if !plugins_present() {
        return;
    }
    let n = CniNode::start(
        |dir| {
            format!(
                r#"{{"type": "ptp", "ipam": {}}}, {{"type": "tuning", "sysctl": {{"net.ipv4.conf.eth0.arp_notify": "1"}}}}"#,
                host_local("10.78.0.0/24", dir)
            )
        },
        &[],
    );
    let netns = n.node.netns("p");
    let sandbox = n.attach("ptp-pod", &netns).expect("Attach over ptp");
    let (iface, addr) = check_attached(&sandbox, &netns);
    // ptp routes the pod's address to its host end.
    let host = n
        .node
        .host_rtnl()
        .link_by_name(&iface.host_ifname)
        .expect("dump")
        .expect("ptp host end");
    assert_eq!(host.kind.as_deref(), Some("veth"));
    let ns = knid_netops::NetnsHandle::open(&netns).expect("open pod netns");
    let sysctl = knid_netops::netns::run_in(&ns, || {
        knid_netops::sysctl::read("net/ipv4/conf/eth0/arp_notify")
    })
    .expect("enter pod netns");
    assert_eq!(sysctl.expect("read arp_notify").trim(), "1", "tuning ran");
    assert_eq!(n.reservations(), vec![addr.clone()]);

    // Check: the kernel matches, and the plugins' own CHECK (ptp verifies its routes) passes;
    // then an address removed behind knid's back is named.
    let client = n.node.client();
    client
        .check(&check("ptp-pod"), RPC)
        .expect("Check of a healthy pod");
    let mut pod = testkit::rtnl_in(&netns);
    let eth0 = pod.link_by_name("eth0").expect("dump").expect("eth0");
    let cidr: ipnet::IpNet = iface.ips[0].address.parse().expect("CIDR");
    assert!(pod
        .delete_address(eth0.index, cidr)
        .expect("delete address"));
    let message = expect_code(
        client.check(&check("ptp-pod"), RPC),
        ttrpc::Code::FAILED_PRECONDITION,
        "Check",
    );
    assert!(
        message.contains(&format!("address {cidr} is missing")),
        "{message}"
    );
    let mut unknown = check("ptp-pod");
    unknown.ifname = "net9".into();
    expect_code(
        client.check(&unknown, RPC),
        ttrpc::Code::NOT_FOUND,
        "Check net9",
    );
    expect_code(
        client.check(&check("nobody"), RPC),
        ttrpc::Code::NOT_FOUND,
        "Check nobody",
    );

    n.node
        .client()
        .detach(&testkit::detach_req("ptp-pod"), RPC)
        .expect("Detach");
    assert!(pod_has_no_eth0(&netns));
    assert!(n.reservations().is_empty());
    assert!(
        n.node
            .host_rtnl()
            .link_by_name(&iface.host_ifname)
            .expect("dump")
            .is_none(),
        "ptp host end left"
    );
}

#[test]
fn a_failing_plugin_fails_the_attach_after_the_del_chain_undid_the_others() {
    if !plugins_present() {
        return;
    }
    let n = CniNode::start(
        |dir| {
            format!(
                r#"{{"type": "bridge", "bridge": "cnibr1", "ipam": {}}}, {{"type": "tuning", "sysctl": {{"net.ipv4.conf.eth0.no_such_knob": "1"}}}}"#,
                host_local("10.79.0.0/24", dir)
            )
        },
        &[],
    );
    let netns = n.node.netns("f");
    let message = expect_code(
        n.attach("fail-pod", &netns),
        ttrpc::Code::INTERNAL,
        "Attach",
    );
    assert!(
        message.contains("network net") && message.contains("plugin tuning ADD"),
        "message does not name the network and plugin: {message}"
    );
    assert!(
        pod_has_no_eth0(&netns),
        "bridge's eth0 left after the failed chain"
    );
    assert!(n.reservations().is_empty(), "host-local kept the address");
    n.node.assert_not_found("fail-pod");
    assert!(n.node.bridge_ports("cnibr1").is_empty());
}

#[test]
fn a_crash_between_add_and_attached_is_undone_by_the_del_chain_at_start_up() {
    assert!(testkit::KIND_FAILPOINTS.contains(&"attach.cni_added"));
    if !plugins_present() || !testkit::failpoints_built() {
        return;
    }
    let (_, hard) = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_CORE)
        .expect("getrlimit");
    nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_CORE, 0, hard)
        .expect("setrlimit");
    let mut n = CniNode::start(
        |dir| {
            format!(
                r#"{{"type": "bridge", "bridge": "cnibr2", "ipam": {}}}"#,
                host_local("10.80.0.0/24", dir)
            )
        },
        &[("KNID_FAILPOINTS", "attach.cni_added=abort")],
    );
    let netns = n.node.netns("c");
    match n.attach("crash-pod", &netns) {
        Err(ClientError::Transport(_)) => {}
        other => panic!("expected the connection to die with knid, got {other:?}"),
    }
    let status = n.node.wait_exit(Duration::from_secs(10));
    assert_eq!(status.signal(), Some(SIGABRT as i32), "knid exit {status}");
    // The plugins' work outlives knid: eth0 and the reservation are there.
    assert!(!pod_has_no_eth0(&netns), "no eth0 at the crash");
    assert_eq!(n.reservations().len(), 1);
    n.node.set_env("KNID_FAILPOINTS", None);
    n.node.restart();
    assert!(pod_has_no_eth0(&netns), "recovery left eth0");
    assert!(n.reservations().is_empty(), "recovery left the reservation");
    n.node.assert_not_found("crash-pod");
    // The same sandbox attaches again cleanly.
    let sandbox = n
        .attach("crash-pod", &netns)
        .expect("Attach after recovery");
    check_attached(&sandbox, &netns);
    n.node
        .client()
        .detach(&testkit::detach_req("crash-pod"), RPC)
        .expect("Detach");
    assert!(n.reservations().is_empty());
}

#[test]
fn gc_of_one_network_runs_the_del_chain_of_stale_attachments_only() {
    if !plugins_present() {
        return;
    }
    let n = CniNode::start(
        |dir| {
            format!(
                r#"{{"type": "bridge", "bridge": "cnibr3", "ipam": {}}}"#,
                host_local("10.81.0.0/24", dir)
            )
        },
        &[],
    );
    let keep_ns = n.node.netns("keep");
    let stale_ns = n.node.netns("stale");
    let kept = n.attach("keep-pod", &keep_ns).expect("Attach keep");
    let (_, kept_addr) = check_attached(&kept, &keep_ns);
    n.attach("stale-pod", &stale_ns).expect("Attach stale");
    assert_eq!(n.reservations().len(), 2);
    let req = pb::GarbageCollectRequest {
        valid_attachments: vec![pb::AttachmentRef {
            sandbox_id: "keep-pod".into(),
            ifname: "eth0".into(),
            ..Default::default()
        }],
        network: "net".into(),
        ..Default::default()
    };
    let report = n.node.client().garbage_collect(&req, RPC).expect("GC");
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let removed: Vec<(&str, &str)> = report
        .removed
        .iter()
        .filter(|f| f.what == "attachment")
        .map(|f| (f.sandbox_id.as_str(), f.ifname.as_str()))
        .collect();
    assert_eq!(removed, vec![("stale-pod", "eth0")]);
    assert!(pod_has_no_eth0(&stale_ns));
    assert_eq!(n.reservations(), vec![kept_addr], "stale reservation left");
    n.node.assert_not_found("stale-pod");
    assert!(
        !pod_has_no_eth0(&keep_ns),
        "GC touched the valid attachment"
    );
    n.node
        .client()
        .detach(&testkit::detach_req("keep-pod"), RPC)
        .expect("Detach");
}

#[test]
fn a_missing_plugin_makes_the_network_unavailable_in_status() {
    if !plugins_present() {
        return;
    }
    let n = CniNode::start(|_| r#"{"type": "no-such-plugin"}"#.to_owned(), &[]);
    let status = n.node.client().status(RPC).expect("Status");
    let cond = status
        .conditions
        .iter()
        .find(|c| c.type_ == "PluginsAvailable/net")
        .expect("PluginsAvailable/net condition");
    assert!(!cond.status);
    assert_eq!(cond.reason, "PluginNotAvailable");
    assert!(cond.message.contains("no-such-plugin"), "{}", cond.message);
    let netns = n.node.netns("m");
    let message = expect_code(n.attach("m-pod", &netns), ttrpc::Code::INTERNAL, "Attach");
    assert!(message.contains("no-such-plugin"), "{message}");
    n.node.assert_not_found("m-pod");
    assert_eq!(testkit::link_names(&netns), ["lo"], "links left in the pod");
}

#[test]
fn a_pod_whose_netns_vanished_is_released_by_the_sweep_with_its_ipam_reservation() {
    if !plugins_present() {
        return;
    }
    let n = CniNode::start(
        |dir| {
            format!(
                r#"{{"type": "bridge", "bridge": "cnibr4", "ipam": {}}}"#,
                host_local("10.82.0.0/24", dir)
            )
        },
        &[],
    );
    let networks = n.node.client().networks(RPC).expect("Networks");
    let net = networks
        .networks
        .iter()
        .find(|x| x.name == "net")
        .expect("network net listed");
    assert_eq!(net.kind, "cni");
    assert!(net.subnets.is_empty() && net.capacity.is_empty(), "{net:?}");

    let netns = n.node.netns("gone");
    n.attach("gone-pod", &netns).expect("Attach");
    assert_eq!(n.reservations().len(), 1);
    n.node.remove_netns(&netns);
    let sweep = pb::GarbageCollectRequest {
        sweep_only: true,
        ..Default::default()
    };
    let report = n
        .node
        .client()
        .garbage_collect(&sweep, RPC)
        .expect("GC sweep");
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert!(
        report
            .removed
            .iter()
            .any(|f| f.sandbox_id == "gone-pod" && f.what == "attachment"),
        "{:?}",
        report.removed
    );
    // DEL ran without a netns (CNI_NETNS empty): host-local still released the address.
    assert!(
        n.reservations().is_empty(),
        "reservation outlived the netns"
    );
    n.node.assert_not_found("gone-pod");
}

#[test]
fn a_reloaded_conflist_serves_new_pods_while_old_ones_are_deleted_with_the_list_they_were_added_with(
) {
    if !plugins_present() {
        return;
    }
    let ipam = tempfile::tempdir().expect("ipam tempdir");
    let ipam_dir = ipam.path().to_owned();
    let list = |bridge: &str, subnet: &str| {
        format!(
            r#"{{"cniVersion": "1.0.0", "name": "cninet", "plugins": [{{"type": "bridge", "bridge": "{bridge}", "ipam": {}}}]}}"#,
            host_local(subnet, &ipam_dir)
        )
    };
    let lists = tempfile::tempdir().expect("conflist dir");
    let file = lists.path().join("10-net.conflist");
    std::fs::write(&file, list("cnibr5", "10.83.0.0/24")).expect("write conflist");
    let node = TestNode::start(&format!(
        "cni_path = [\"{CNI_BIN}\"]\n\n[networks.net]\nkind = \"cni\"\nconflist = \"{}\"\n",
        file.display()
    ));
    let n = CniNode { node, ipam };
    let old_ns = n.node.netns("old");
    let old = n
        .attach("old-pod", &old_ns)
        .expect("Attach before the reload");
    assert!(old.interfaces[0].ips[0].address.starts_with("10.83.0."));

    std::fs::write(&file, list("cnibr6", "10.84.0.0/24")).expect("rewrite conflist");
    nix::sys::signal::kill(n.node.pid(), nix::sys::signal::Signal::SIGHUP).expect("SIGHUP");
    let new_ns = n.node.netns("new");
    let mut new = None;
    testkit::wait_for("the new list to serve", testkit::SETTLE, || {
        let _ = n.node.client().detach(&testkit::detach_req("new-pod"), RPC);
        let sandbox = n
            .attach("new-pod", &new_ns)
            .expect("Attach after the reload");
        let on_new = sandbox.interfaces[0].ips[0].address.starts_with("10.84.0.");
        new = Some(sandbox);
        on_new
    });
    let new = new.expect("attached");
    assert_eq!(n.node.bridge_ports("cnibr6").len(), 1);

    // The old pod's DEL runs the list its ADD ran: its port leaves cnibr5, its address is freed.
    n.node
        .client()
        .detach(&testkit::detach_req("old-pod"), RPC)
        .expect("Detach old");
    assert!(n.node.bridge_ports("cnibr5").is_empty(), "old port left");
    let new_addr: ipnet::IpNet = new.interfaces[0].ips[0].address.parse().expect("CIDR");
    assert_eq!(n.reservations(), vec![new_addr.addr().to_string()]);
    n.node
        .client()
        .detach(&testkit::detach_req("new-pod"), RPC)
        .expect("Detach new");
    assert!(n.reservations().is_empty());
}
