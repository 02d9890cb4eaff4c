//! The `knid-cni` binary exec'd exactly as libcni execs a plugin, against the real knid in a
//! private network namespace: every verb in every version, results checked against the spec
//! (testkit/src/cni.rs) and against the kernel, chained with the reference plugins, and the
//! error codes of bad input.

use knid_transport::client::oneshot::OneshotClient;
use serde_json::{json, Value};
use testkit::bins::knid_cni;
use testkit::cni::{
    assert_in_kernel, assert_result, cni_env, exec_in, host_interfaces, knid_conf, pod_side, shim,
    tool_in, with_prev, NetList,
};
use testkit::kernel::{kernel_addresses, sysctl_in};
use testkit::{TestNode, RPC};

/// The network the conflists name (`name`, no `network` key).
const NETWORKS: &str = r#"
[networks.cninet]
bridge = "knid0"
subnets = ["10.88.0.0/24", "fd00:88::/64"]
mtu = 1500
"#;
/// Plus the smallest pool knid takes (a /29: five addresses besides network, broadcast and
/// gateway) and a network of its own bridge for GC's per-network scope.
const TINY_POOL: usize = 5;
const MORE_NETWORKS: &str = r#"
[networks.tiny]
bridge = "tinybr0"
subnets = ["10.66.0.0/29"]

[networks.side]
bridge = "sidebr0"
subnets = ["10.67.0.0/24"]
"#;

#[test]
fn every_verb_in_every_version_against_the_real_daemon() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start(NETWORKS);
    for (i, version) in ["0.3.1", "0.4.0", "1.0.0", "1.1.0"].into_iter().enumerate() {
        let id = format!("ver{i}");
        let netns = node.netns(&id);
        let conf = knid_conf(version, "cninet", node.socket());
        let add_env = cni_env("ADD", &id, Some(&netns), "eth0");
        let result = shim(&node, &add_env, &conf).ok("ADD");
        assert_result(&result, version);
        assert_in_kernel(&node, &netns, &result);

        // knid's Attach is idempotent: a retried ADD gets the same result.
        let again = shim(&node, &add_env, &conf).ok("ADD again");
        assert_eq!(
            again, result,
            "{version}: a repeated ADD changed the result"
        );

        let check_env = cni_env("CHECK", &id, Some(&netns), "eth0");
        let check = shim(&node, &check_env, &with_prev(&conf, &result));
        if version == "0.3.1" {
            check.err(1, "CHECK", "CHECK in 0.3.1");
        } else {
            assert_eq!(check.ok("CHECK"), Value::Null, "CHECK prints nothing");
        }

        let del_env = cni_env("DEL", &id, Some(&netns), "eth0");
        assert_eq!(
            shim(&node, &del_env, &with_prev(&conf, &result)).ok("DEL"),
            Value::Null
        );
        assert!(
            node.client()
                .inspect(&testkit::inspect_req(&id), RPC)
                .map(|s| s.interfaces.is_empty())
                .unwrap_or(true),
            "{version}: eth0 still attached after DEL"
        );
        testkit::wait_only_lo(&netns);
        // DEL again, and DEL without CNI_NETNS (the netns may be gone): both succeed.
        shim(&node, &del_env, &with_prev(&conf, &result)).ok("second DEL");
        shim(&node, &cni_env("DEL", &id, None, "eth0"), &conf).ok("DEL without netns");
        if version != "0.3.1" {
            shim(&node, &check_env, &with_prev(&conf, &result)).err(3, &id, "CHECK after DEL");
        }
    }
    node.assert_host_clean();
}

#[test]
fn check_names_what_differs_from_knid_and_the_kernel() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start(NETWORKS);
    let netns = node.netns("chk");
    let conf = knid_conf("1.0.0", "cninet", node.socket());
    let result = shim(&node, &cni_env("ADD", "chk", Some(&netns), "eth0"), &conf).ok("ADD");
    let check_env = cni_env("CHECK", "chk", Some(&netns), "eth0");
    shim(&node, &check_env, &with_prev(&conf, &result)).ok("CHECK of a healthy pod");

    let mut wrong = result.clone();
    let ips = wrong["ips"].as_array_mut().expect("ips");
    let v4 = ips
        .iter_mut()
        .find(|ip| ip["address"].as_str().is_some_and(|a| a.contains('.')))
        .expect("v4");
    v4["address"] = json!("10.88.0.250/24");
    shim(&node, &check_env, &with_prev(&conf, &wrong)).err(
        110,
        "prevResult ips",
        "CHECK, other IP",
    );

    // Someone removes the pod's IPv4 address behind knid's back.
    let (_, _, addresses) = pod_side(&result, "eth0");
    let gone = *addresses
        .iter()
        .find(|a| a.addr().is_ipv4())
        .expect("v4 address");
    let mut rtnl = testkit::rtnl_in(&netns);
    let index = rtnl
        .link_by_name("eth0")
        .expect("look up")
        .expect("eth0")
        .index;
    rtnl.delete_address(index, gone)
        .expect("delete the pod address");
    shim(&node, &check_env, &with_prev(&conf, &result)).err(
        110,
        &gone.to_string(),
        "CHECK, address gone",
    );

    shim(
        &node,
        &cni_env("CHECK", "nobody", Some(&netns), "eth0"),
        &conf,
    )
    .err(3, "nobody", "CHECK of an unknown container");
    shim(
        &node,
        &cni_env("DEL", "chk", Some(&netns), "eth0"),
        &with_prev(&conf, &result),
    )
    .ok("DEL");
    node.assert_host_clean();
}

#[test]
fn runtime_config_and_pod_args_reach_knid_and_a_changed_add_is_refused() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start(NETWORKS);
    let netns = node.netns("rc");
    let mut conf = knid_conf("1.1.0", "cninet", node.socket());
    conf["runtimeConfig"] = json!({
        "portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}],
        "dns": {"servers": ["10.96.0.10"], "searches": ["svc.cluster.local"], "options": ["ndots:5"]},
        "ips": ["10.88.0.77/24"],
        "mac": "02:42:0a:58:00:4d"
    });
    let env = cni_env("ADD", "rc", Some(&netns), "eth0");
    let result = shim(&node, &env, &conf).ok("ADD");
    assert_result(&result, "1.1.0");
    let (_, mac, addresses) = pod_side(&result, "eth0");
    assert_eq!(mac, [0x02, 0x42, 0x0a, 0x58, 0x00, 0x4d]);
    assert!(
        addresses.contains(&"10.88.0.77/24".parse().expect("cidr")),
        "{result}"
    );
    assert_eq!(result["dns"]["nameservers"], json!(["10.96.0.10"]));
    assert_eq!(result["dns"]["search"], json!(["svc.cluster.local"]));
    assert_in_kernel(&node, &netns, &result);

    let sandbox = node.inspect("rc");
    let pod = sandbox.pod.as_ref().expect("pod recorded");
    assert_eq!(
        (pod.name.as_str(), pod.namespace.as_str(), pod.uid.as_str()),
        ("rc", "test", "uid-rc")
    );
    assert_eq!(sandbox.port_mappings.len(), 1);
    assert_eq!(
        (
            sandbox.port_mappings[0].host_port,
            sandbox.port_mappings[0].container_port
        ),
        (8080, 80)
    );

    // The same container and interface with another MAC: knid's AlreadyExists.
    let mut changed = conf.clone();
    changed["runtimeConfig"]["mac"] = json!("02:42:0a:58:00:4e");
    shim(&node, &env, &changed).err(102, "AlreadyExists", "ADD with another MAC");
    // A field knid refuses (multicast MAC) comes back as invalid config naming it.
    let mut bad = conf.clone();
    bad["runtimeConfig"]["mac"] = json!("01:00:5e:00:00:01");
    shim(
        &node,
        &cni_env("ADD", "rc2", Some(&node.netns("rc2")), "eth0"),
        &bad,
    )
    .err(7, "interfaces[0].mac", "ADD with a multicast MAC");

    shim(
        &node,
        &cni_env("DEL", "rc", Some(&netns), "eth0"),
        &with_prev(&conf, &result),
    )
    .ok("DEL");
    node.assert_host_clean();
}

#[test]
fn status_is_ready_until_the_network_pool_is_exhausted() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start(&format!("{NETWORKS}{MORE_NETWORKS}"));
    let tiny = knid_conf("1.1.0", "tiny", node.socket());
    let status = |conf: &Value| shim(&node, &cni_env("STATUS", "x", None, "x"), conf);
    assert_eq!(
        status(&tiny).ok("STATUS"),
        Value::Null,
        "STATUS prints nothing when ready"
    );
    status(&knid_conf("1.0.0", "tiny", node.socket())).err(1, "STATUS", "STATUS in 1.0.0");
    status(&knid_conf("1.1.0", "nonet", node.socket())).err(
        50,
        "nonet",
        "STATUS of a network knid lacks",
    );

    let mut results = Vec::new();
    for i in 0..TINY_POOL {
        let id = format!("t{i}");
        let netns = node.netns(&id);
        status(&tiny).ok("STATUS while addresses are left");
        let result = shim(&node, &cni_env("ADD", &id, Some(&netns), "eth0"), &tiny).ok("ADD");
        results.push((id, netns, result));
    }
    status(&tiny).err(50, "NetworkSchedulable/tiny", "STATUS of the full pool");
    let full = status(&tiny).json();
    assert!(
        full["msg"]
            .as_str()
            .unwrap_or_default()
            .contains("Exhausted"),
        "{full}"
    );
    // Another network's full pool does not make this one unable to serve ADDs.
    status(&knid_conf("1.1.0", "cninet", node.socket())).ok("STATUS of cninet");
    shim(
        &node,
        &cni_env("ADD", "late", Some(&node.netns("late")), "eth0"),
        &tiny,
    )
    .err(101, "ResourceExhausted", "ADD into the full pool");

    for (id, netns, result) in &results {
        shim(
            &node,
            &cni_env("DEL", id, Some(netns), "eth0"),
            &with_prev(&tiny, result),
        )
        .ok("DEL");
    }
    shim(&node, &cni_env("DEL", "late", None, "eth0"), &tiny).ok("DEL of the failed ADD");
    node.wait_capacity_used("tiny", 0);
    status(&tiny).ok("STATUS after DEL");
    node.assert_host_clean();
}

#[test]
fn gc_detaches_the_unlisted_attachments_of_its_network_only() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start(&format!("{NETWORKS}{MORE_NETWORKS}"));
    let conf = knid_conf("1.1.0", "cninet", node.socket());
    for id in ["gca", "gcb"] {
        let netns = node.netns(id);
        shim(&node, &cni_env("ADD", id, Some(&netns), "eth0"), &conf).ok("ADD");
    }
    // An attachment of another network: GC of cninet must keep it.
    let side_ns = node.netns("gcside");
    let mut req = node.attach_req("gcside", &side_ns, "eth0");
    req.interfaces[0].network = "side".into();
    node.client().attach(&req, RPC).expect("Attach on side");

    let gc = |conf: &Value| shim(&node, &[("CNI_COMMAND".to_owned(), "GC".to_owned())], conf);
    let mut keep_a = conf.clone();
    keep_a["cni.dev/valid-attachments"] = json!([{"containerID": "gca", "ifname": "eth0"}]);
    let out = gc(&keep_a);
    assert_eq!(out.ok("GC"), Value::Null, "GC prints nothing on success");
    node.assert_not_found("gcb");
    testkit::wait_only_lo(&node.dir().join("ns/gcb"));
    assert_eq!(node.list_ids().len(), 2, "gca and gcside are kept");

    // The older key alone, listing nothing: every cninet attachment goes.
    let mut none = conf.clone();
    none["cni.dev/attachments"] = json!([]);
    gc(&none).ok("GC with an empty list");
    node.assert_not_found("gca");
    assert_eq!(node.list_ids(), ["gcside"]);

    gc(&conf).err(7, "cni.dev/valid-attachments", "GC without a list");
    gc(&knid_conf("1.0.0", "cninet", node.socket())).err(1, "GC", "GC in 1.0.0");
    node.client()
        .detach(&testkit::detach_req("gcside"), RPC)
        .expect("Detach");
    node.assert_host_clean();
}

#[test]
fn version_lists_0_3_1_through_1_1_0() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start(NETWORKS);
    let env = [("CNI_COMMAND".to_owned(), "VERSION".to_owned())];
    for (stdin, want) in [
        ("{}", "1.1.0"),
        (r#"{"cniVersion":"1.0.0"}"#, "1.0.0"),
        ("", "1.1.0"),
    ] {
        let out = exec_in(node.host_path(), &knid_cni(), &env, stdin.as_bytes()).ok("VERSION");
        assert_eq!(out["cniVersion"], want, "{stdin}");
        let list: Vec<&str> = out["supportedVersions"]
            .as_array()
            .expect("supportedVersions")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        for v in ["0.3.1", "0.4.0", "1.0.0", "1.1.0"] {
            assert!(list.contains(&v), "{v} missing from {list:?}");
        }
    }
}

#[test]
fn bad_input_gets_the_spec_code_and_names_the_problem() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start(NETWORKS);
    let netns = node.netns("bad");
    let good = knid_conf("1.0.0", "cninet", node.socket());
    let add = cni_env("ADD", "bad", Some(&netns), "eth0");
    let without = |var: &str| -> Vec<(String, String)> {
        add.iter().filter(|(k, _)| k != var).cloned().collect()
    };
    let with = |var: &str, value: &str| -> Vec<(String, String)> {
        let mut env = without(var);
        env.push((var.to_owned(), value.to_owned()));
        env
    };
    let conf_with = |key: &str, value: Value| {
        let mut conf = good.clone();
        match value {
            Value::Null => {
                conf.as_object_mut().expect("object").remove(key);
            }
            v => conf[key] = v,
        }
        conf
    };
    let run =
        |env: &[(String, String)], stdin: &[u8]| exec_in(node.host_path(), &knid_cni(), env, stdin);
    let good_bytes = good.to_string();

    run(&add, b"{\"cniVersion\": ").err(6, "JSON", "malformed stdin");
    for var in ["CNI_COMMAND", "CNI_CONTAINERID", "CNI_IFNAME", "CNI_NETNS"] {
        run(&without(var), good_bytes.as_bytes()).err(4, var, &format!("without {var}"));
    }
    for (var, value) in [
        ("CNI_COMMAND", "ATTACH"),
        ("CNI_CONTAINERID", "-dash-first"),
        ("CNI_IFNAME", "eth0:1"),
        ("CNI_IFNAME", "sixteen-bytes-xx"),
        ("CNI_NETNS", "relative/netns"),
    ] {
        run(&with(var, value), good_bytes.as_bytes()).err(4, var, &format!("{var}={value}"));
    }
    for version in ["0.2.0", "2.0.0"] {
        let out = shim(&node, &add, &conf_with("cniVersion", json!(version)));
        let err = out.err(1, version, "unknown cniVersion");
        assert_eq!(
            err["cniVersion"], version,
            "the error echoes the requested version"
        );
    }
    for (key, value) in [
        ("name", Value::Null),
        ("type", json!("bridge")),
        ("network", json!("bad/network")),
        ("socket", json!("run/knid.sock")),
    ] {
        shim(&node, &add, &conf_with(key, value)).err(7, key, &format!("config key {key}"));
    }
    // knid's own checks: a netns outside the allowed prefixes, and one that is not there.
    shim(&node, &with("CNI_NETNS", "/tmp/not-allowed"), &good).err(
        7,
        "netns_path",
        "netns outside the prefixes",
    );
    let missing = node.missing_netns_path("missing");
    shim(
        &node,
        &with("CNI_NETNS", &missing.display().to_string()),
        &good,
    )
    .err(100, "FailedPrecondition", "missing netns");

    // knid unreachable: try again later, never success — above all on DEL.
    let gone = conf_with("socket", json!(node.dir().join("nothing.sock")));
    for command in ["ADD", "DEL", "CHECK"] {
        shim(&node, &cni_env(command, "bad", Some(&netns), "eth0"), &gone).err(
            11,
            "nothing.sock",
            command,
        );
    }
    let mut gone11 = gone.clone();
    gone11["cniVersion"] = json!("1.1.0");
    gone11["cni.dev/valid-attachments"] = json!([]);
    shim(
        &node,
        &[("CNI_COMMAND".to_owned(), "GC".to_owned())],
        &gone11,
    )
    .err(11, "nothing.sock", "GC");
    shim(
        &node,
        &[("CNI_COMMAND".to_owned(), "STATUS".to_owned())],
        &gone11,
    )
    .err(50, "nothing.sock", "STATUS");
    assert!(
        node.list_ids().is_empty(),
        "a failed ADD left a sandbox: {:?}",
        node.list_ids()
    );
}

#[test]
fn oneshot_client_speaks_to_the_real_daemon() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start(NETWORKS);
    let mut client = OneshotClient::connect(node.socket(), RPC).expect("connect");
    assert!(client.status(RPC).expect("Status").ready);
    let netns = node.netns("one");
    let mut req = node.attach_req("one", &netns, "eth0");
    req.interfaces[0].network = "cninet".into();
    let attached = client.attach(&req, RPC).expect("Attach");
    let inspected = node
        .client()
        .inspect(&testkit::inspect_req("one"), RPC)
        .expect("Inspect through ttrpc's client");
    assert_eq!(attached.interfaces, inspected.interfaces);
    testkit::assert_pod_side(&netns, &attached.interfaces[0]);
    let err = client
        .inspect(&testkit::inspect_req("ghost"), RPC)
        .expect_err("unknown sandbox");
    assert_eq!(err.code(), Some(ttrpc::Code::NOT_FOUND), "{err}");
    client
        .detach(&testkit::detach_req("one"), RPC)
        .expect("Detach");
    node.assert_host_clean();
}

#[test]
fn chained_portmap_tuning_and_bandwidth_accept_the_result() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start(NETWORKS);
    let netns = node.netns("chain");
    // A value the fresh netns does not already have, so the check can fail.
    let default = sysctl_in(&netns, "net/ipv4/conf/default/rp_filter");
    let wanted = if default == "1" { "2" } else { "1" };
    let net = NetList {
        list: json!({
            "cniVersion": "1.0.0",
            "name": "cninet",
            "plugins": [
                {"type": "knid", "socket": node.socket(), "capabilities": {"portMappings": true}},
                {"type": "portmap", "capabilities": {"portMappings": true}, "snat": true},
                {"type": "tuning", "sysctl": {"net.ipv4.conf.eth0.rp_filter": wanted}},
                {"type": "bandwidth", "ingressRate": 8_000_000, "ingressBurst": 800_000,
                 "egressRate": 8_000_000, "egressBurst": 800_000}
            ]
        }),
        capability_args:
            json!({"portMappings": [{"hostPort": 18080, "containerPort": 80, "protocol": "tcp"}]})
                .as_object()
                .expect("object")
                .clone(),
    };
    let env = cni_env("ADD", "chain", Some(&netns), "eth0");
    let result = net
        .add(node.host_path(), &env)
        .unwrap_or_else(|(plugin, out)| panic!("ADD failed at {plugin}: {out:?}"));
    assert_result(&result, "1.0.0");
    assert_in_kernel(&node, &netns, &result);
    let (_, _, addresses) = pod_side(&result, "eth0");
    let pod_v4 = addresses
        .iter()
        .find(|a| a.addr().is_ipv4())
        .expect("v4")
        .addr();

    assert_eq!(
        sysctl_in(&netns, "net/ipv4/conf/eth0/rp_filter"),
        wanted,
        "tuning's sysctl"
    );
    let host = host_interfaces(&result).remove(0);
    assert!(
        node.host_qdiscs(&host).contains(&"tbf".to_owned()),
        "no tbf on {host}: {:?}",
        node.host_qdiscs(&host)
    );
    let ifbs = node.host_links_with_prefix("bwp");
    assert_eq!(ifbs.len(), 1, "bandwidth's egress ifb");
    assert!(
        node.host_qdiscs(&ifbs[0].name).contains(&"tbf".to_owned()),
        "no tbf on the ifb"
    );
    let nat = tool_in(node.host_path(), "iptables", &["-t", "nat", "-S"]);
    let dnat = format!("--to-destination {pod_v4}:80");
    assert!(
        nat.contains("-N CNI-DN-") && nat.contains(&dnat),
        "portmap's chain: {nat}"
    );

    let del_env = cni_env("DEL", "chain", Some(&netns), "eth0");
    net.del(node.host_path(), &del_env, &result)
        .unwrap_or_else(|(plugin, out)| panic!("DEL failed at {plugin}: {out:?}"));
    testkit::wait_only_lo(&netns);
    node.assert_host_clean();
    assert!(
        node.host_qdiscs(&host).is_empty(),
        "{host} still has qdiscs"
    );
    assert!(
        node.host_links_with_prefix("bwp").is_empty(),
        "the ifb is left"
    );
    let nat = tool_in(node.host_path(), "iptables", &["-t", "nat", "-S"]);
    assert!(
        !nat.contains("-N CNI-DN-") && !nat.contains(&dnat),
        "portmap's chain is left: {nat}"
    );
    // A second DEL of the whole chain succeeds too.
    net.del(node.host_path(), &del_env, &result)
        .unwrap_or_else(|(plugin, out)| panic!("second DEL failed at {plugin}: {out:?}"));
}

#[test]
fn the_shim_in_front_of_a_cni_network_answers_with_its_plugins_result() {
    if !testkit::privileged() {
        return;
    }
    let ipam = tempfile::tempdir().expect("ipam tempdir");
    let list = json!({
        "cniVersion": "1.0.0", "name": "inner",
        "plugins": [{"type": "bridge", "bridge": "cnibr7",
                     "ipam": {"type": "host-local", "subnet": "10.85.0.0/24",
                              "dataDir": ipam.path()}}]
    });
    let node = TestNode::start(&format!(
        "cni_path = [\"/usr/lib/cni\"]\n\n[networks.outer]\nkind = \"cni\"\nconflist_inline = '''{list}'''\n"
    ));
    let netns = node.netns("front");
    let conf = knid_conf("1.0.0", "outer", node.socket());
    let result = shim(&node, &cni_env("ADD", "front", Some(&netns), "eth0"), &conf).ok("ADD");
    assert_result(&result, "1.0.0");
    let (_, mac, addresses) = pod_side(&result, "eth0");
    let eth0 = testkit::link_in(&netns, "eth0").expect("eth0 in the pod netns");
    assert_eq!(eth0.mac, Some(mac));
    assert_eq!(kernel_addresses(&netns, "eth0"), addresses);
    // The bridge plugin's own interfaces: its bridge, the host veth, the pod's eth0.
    let names: Vec<&str> = result["interfaces"]
        .as_array()
        .expect("interfaces")
        .iter()
        .filter_map(|i| i["name"].as_str())
        .collect();
    assert_eq!(names.first(), Some(&"cnibr7"), "{result}");
    assert_eq!(names.last(), Some(&"eth0"), "{result}");
    let reservations = || {
        std::fs::read_dir(ipam.path().join("inner"))
            .map(|d| {
                d.filter_map(Result::ok)
                    .filter(|e| e.file_name().to_string_lossy().starts_with("10.85."))
                    .count()
            })
            .unwrap_or(0)
    };
    assert_eq!(reservations(), 1);
    // CHECK goes through knid's Check: the kernel, then the bridge plugin's own CHECK.
    let check = cni_env("CHECK", "front", Some(&netns), "eth0");
    assert_eq!(
        shim(&node, &check, &with_prev(&conf, &result)).ok("CHECK"),
        Value::Null
    );
    let del = cni_env("DEL", "front", Some(&netns), "eth0");
    shim(&node, &del, &with_prev(&conf, &result)).ok("DEL");
    testkit::wait_only_lo(&netns);
    assert_eq!(reservations(), 0, "host-local kept the address");
}

#[test]
fn add_del_then_add_of_another_container_into_the_same_netns_never_fails() {
    if !testkit::privileged() {
        return;
    }
    const REUSES: usize = 100;
    let node = TestNode::start(NETWORKS);
    let netns = node.netns("cni-reused");
    let conf = knid_conf("1.1.0", "cninet", node.socket());
    for i in 0..REUSES {
        let id = format!("cni-reuse-{i}");
        let result = shim(&node, &cni_env("ADD", &id, Some(&netns), "eth0"), &conf)
            .ok(&format!("ADD {id} after {i} DELs in this netns"));
        shim(
            &node,
            &cni_env("DEL", &id, Some(&netns), "eth0"),
            &with_prev(&conf, &result),
        )
        .ok(&format!("DEL {id}"));
    }
    testkit::wait_only_lo(&netns);
    node.wait_no_kn_links();
}

#[test]
fn check_of_a_chain_whose_tuning_changed_the_mac_passes_and_still_catches_what_is_missing() {
    if !testkit::privileged() {
        return;
    }
    const TUNED: &str = "02:42:0a:58:00:99";
    let node = TestNode::start(NETWORKS);
    let netns = node.netns("tuned");
    let net = NetList {
        list: json!({
            "cniVersion": "1.0.0",
            "name": "cninet",
            "plugins": [
                {"type": "knid", "socket": node.socket()},
                {"type": "tuning", "mac": TUNED}
            ]
        }),
        capability_args: serde_json::Map::new(),
    };
    let env = cni_env("ADD", "tuned", Some(&netns), "eth0");
    let result = net
        .add(node.host_path(), &env)
        .unwrap_or_else(|(plugin, out)| panic!("ADD failed at {plugin}: {out:?}"));
    let (_, mac, _) = pod_side(&result, "eth0");
    assert_eq!(
        testkit::cni::parse_mac(TUNED),
        Some(mac),
        "tuning's MAC: {result}"
    );

    let check_env = cni_env("CHECK", "tuned", Some(&netns), "eth0");
    net.check(node.host_path(), &check_env, &result)
        .unwrap_or_else(|(plugin, out)| panic!("CHECK failed at {plugin}: {out:?}"));
    // knictl check compares with knid's record, and says the chain changed the MAC.
    let own = testkit::cli::knictl_exits(&node, 5, &["check", "tuned"]);
    assert!(own.contains(&format!("mac of eth0 is {TUNED}")), "{own}");

    // What knid owns still counts: with the pod's eth0 down, knid's CHECK names it.
    let mut pod = testkit::rtnl_in(&netns);
    let eth0 = pod.link_by_name("eth0").expect("look up").expect("eth0");
    pod.set_down(eth0.index).expect("set eth0 down");
    let (plugin, out) = net
        .check(node.host_path(), &check_env, &result)
        .expect_err("CHECK with eth0 down");
    assert_eq!(plugin, "\"knid\"", "{out:?}");
    out.err(110, "eth0", "CHECK with eth0 down");

    let del_env = cni_env("DEL", "tuned", Some(&netns), "eth0");
    net.del(node.host_path(), &del_env, &result)
        .unwrap_or_else(|(plugin, out)| panic!("DEL failed at {plugin}: {out:?}"));
    testkit::wait_only_lo(&netns);
    node.assert_host_clean();
}
