//! A graceful restart keeps everything: the recorded sandbox (byte for byte what Attach answered),
//! the kernel objects, the address reservations; and detach still works afterwards. A knid that
//! crashes leaves the backtraces of its threads for the failing test.

use std::collections::HashMap;

use knid_transport::pb;
use protobuf::MessageField;
use testkit::{TestNode, BRIDGE, RPC};

/// An Attach request that sets every recorded field, so the comparison after the restart covers
/// them all.
fn full_request(node: &TestNode, id: &str, netns: &std::path::Path) -> pb::AttachRequest {
    let mut req = node.attach_req(id, netns, "eth0");
    req.pod = MessageField::some(pb::PodRef {
        name: "web-0".to_owned(),
        namespace: "shop".to_owned(),
        uid: "0b4c1c3e-5c1a-4b8e-9d61-2f3a4b5c6d7e".to_owned(),
        ..Default::default()
    });
    req.dns = MessageField::some(pb::Dns {
        servers: vec!["10.96.0.10".to_owned(), "fd00:96::a".to_owned()],
        searches: vec!["shop.svc.cluster.local".to_owned()],
        options: vec!["ndots:5".to_owned()],
        domain: "cluster.local".to_owned(),
        ..Default::default()
    });
    req.port_mappings = vec![pb::PortMapping {
        host_port: 8080,
        container_port: 80,
        protocol: "tcp".to_owned(),
        ..Default::default()
    }];
    req.labels = HashMap::from([("app".to_owned(), "web".to_owned())]);
    req.annotations = HashMap::from([("team".to_owned(), "shop".to_owned())]);
    req
}

#[test]
fn restart_keeps_the_sandbox_identical_and_detach_still_works() {
    if !testkit::privileged() {
        return;
    }
    let mut node = TestNode::start("");
    let netns = node.netns("survivor");
    let attached = node
        .client()
        .attach(&full_request(&node, "pod-survivor", &netns), RPC)
        .expect("Attach");
    let iface = attached.interfaces[0].clone();

    let status = node.stop();
    assert_eq!(status.code(), Some(0), "knid exit status {status}");
    // While knid is down the kernel objects stay: they belong to the namespaces, not to knid.
    testkit::assert_pod_side(&netns, &iface);
    node.restart();

    let inspected = node.inspect("pod-survivor");
    assert_eq!(
        inspected, attached,
        "Inspect after restart differs from the Attach reply"
    );
    testkit::assert_pod_side(&netns, &iface);
    node.assert_host_side(&iface);
    assert_eq!(node.capacity_used("default"), 2, "reservations reloaded");
    assert_eq!(node.list_ids(), vec!["pod-survivor".to_owned()]);

    // The reloaded pools must not hand out the survivor's addresses again.
    let other_ns = node.netns("newcomer");
    let other = node
        .client()
        .attach(&node.attach_req("pod-newcomer", &other_ns, "eth0"), RPC)
        .expect("Attach after restart");
    for family in ["ipv4", "ipv6"] {
        assert_ne!(
            testkit::ip_of(&other.interfaces[0], family).0.addr(),
            testkit::ip_of(&iface, family).0.addr(),
            "{family} address handed out twice"
        );
    }

    for id in ["pod-survivor", "pod-newcomer"] {
        node.client()
            .detach(&testkit::detach_req(id), RPC)
            .expect("Detach after restart");
    }
    node.assert_host_clean();
    assert!(node
        .host_rtnl()
        .link_by_name(&iface.host_ifname)
        .expect("look up")
        .is_none());
    testkit::wait_for("eth0 gone from the sandbox", testkit::SETTLE, || {
        testkit::link_in(&netns, "eth0").is_none()
    });
    assert!(node.list_ids().is_empty(), "List not empty after detach");
    assert!(node.bridge_ports(BRIDGE).is_empty());
    node.wait_capacity_used("default", 0);
}

/// A pod that crash-loops across a crash of knid's does not get an address it had just before:
/// the round-robin cursor's mark on disk is ahead of every address handed out.
#[test]
fn a_crash_looping_pod_gets_no_recent_address_back_after_knid_is_killed() {
    if !testkit::privileged() {
        return;
    }
    let mut node = TestNode::start("");
    let netns = node.netns("looping");
    let mut had = Vec::new();
    for _ in 0..3 {
        let attached = node
            .client()
            .attach(&node.attach_req("pod-looping", &netns, "eth0"), RPC)
            .expect("Attach");
        had.push(attached.interfaces[0].clone());
        node.client()
            .detach(&testkit::detach_req("pod-looping"), RPC)
            .expect("Detach");
        node.wait_capacity_used("default", 0);
    }
    nix::sys::signal::kill(node.pid(), nix::sys::signal::Signal::SIGKILL).expect("SIGKILL knid");
    node.wait_exit(testkit::SETTLE);
    node.restart();
    let again = node
        .client()
        .attach(&node.attach_req("pod-looping", &netns, "eth0"), RPC)
        .expect("Attach after the restart");
    for family in ["ipv4", "ipv6"] {
        let now = testkit::ip_of(&again.interfaces[0], family).0.addr();
        for before in &had {
            assert_ne!(
                now,
                testkit::ip_of(before, family).0.addr(),
                "{family} address handed out again right after the restart"
            );
        }
    }
    node.client()
        .detach(&testkit::detach_req("pod-looping"), RPC)
        .expect("Detach");
    node.wait_capacity_used("default", 0);
}

#[test]
fn restart_with_an_empty_store_comes_back_ready_and_empty() {
    if !testkit::privileged() {
        return;
    }
    let mut node = TestNode::start("");
    let status = node.stop();
    assert_eq!(status.code(), Some(0), "knid exit status {status}");
    node.restart();
    let status = node.client().status(RPC).expect("Status");
    assert!(status.ready, "not ready after restart: {status:?}");
    assert!(node.list_ids().is_empty());
    assert_eq!(node.capacity_used("default"), 0);
    // The bridge set up by the first run is reused, not duplicated or broken.
    assert!(node.bridge(BRIDGE).up, "bridge down after restart");
}

#[test]
fn start_up_detaches_sandboxes_whose_netns_vanished_or_was_replaced_while_knid_was_down() {
    if !testkit::privileged() {
        return;
    }
    let mut node = TestNode::start("");
    let mut attached = Vec::new();
    for name in ["gone", "replaced", "kept"] {
        let netns = node.netns(name);
        let sandbox = node
            .client()
            .attach(
                &node.attach_req(&format!("pod-{name}"), &netns, "eth0"),
                RPC,
            )
            .expect("Attach");
        attached.push((netns, sandbox.interfaces[0].clone()));
    }
    let status = node.stop();
    assert_eq!(status.code(), Some(0), "knid exit status {status}");

    // While knid is down: one netns deleted, another deleted and a new one mounted at its path.
    node.remove_netns(&attached[0].0);
    node.remove_netns(&attached[1].0);
    let reused = node.netns("replaced");
    assert_eq!(reused, attached[1].0);
    node.restart();

    assert_eq!(node.list_ids(), vec!["pod-kept".to_owned()]);
    node.assert_not_found("pod-gone");
    node.assert_not_found("pod-replaced");
    node.wait_capacity_used("default", 2);
    for (_, iface) in &attached[..2] {
        testkit::wait_for(
            "host link of a vanished netns deleted",
            testkit::SETTLE,
            || {
                node.host_rtnl()
                    .link_by_name(&iface.host_ifname)
                    .expect("look up")
                    .is_none()
            },
        );
    }
    let log = node.log_text();
    for id in ["pod-gone/eth0", "pod-replaced/eth0"] {
        assert!(
            log.lines()
                .any(|l| l.contains("recovery: removed attachment")
                    && l.contains(id)
                    && l.contains("netns-gone")),
            "no recovery line for {id}"
        );
    }
    assert!(
        log.contains("is another namespace now"),
        "inode change not reported"
    );
    // The namespace now at the reused path is not knid's: left alone.
    let names: Vec<String> = testkit::links_in(&reused)
        .into_iter()
        .map(|l| l.name)
        .collect();
    assert_eq!(names, vec!["lo".to_owned()]);
    // The survivor is intact and still detaches.
    testkit::assert_pod_side(&attached[2].0, &attached[2].1);
    node.assert_host_side(&attached[2].1);
    node.client()
        .detach(&testkit::detach_req("pod-kept"), RPC)
        .expect("Detach");
    node.assert_host_clean();
    node.wait_capacity_used("default", 0);
}

/// What a crash leaves when it comes after an attach created its veth and before the attach's
/// intent was durable (the one kernel call allowed to race the intent's flush): a veth under
/// knid's deterministic host name in knid's attaching link group, without an alias, its pod end
/// in the sandbox, and no record of either. Start-up recovery's sweep deletes it, and the
/// sandbox can be attached again.
#[test]
fn start_up_deletes_a_veth_whose_attach_intent_never_became_durable() {
    if !testkit::privileged() {
        return;
    }
    let mut node = TestNode::start("");
    let mark = node.link_mark();
    let status = node.stop();
    assert_eq!(status.code(), Some(0), "knid exit status {status}");
    let netns = node.netns("lost-intent");
    let host_name = knid_core::names::host_ifname("lost-intent", "eth0");
    let pod_ns = knid_netops::NetnsHandle::open(&netns).expect("open the sandbox netns");
    let end = |name: &str| knid_netops::VethEnd {
        name: name.to_owned(),
        mtu: None,
        mac: None,
    };
    node.host_rtnl()
        .create_veth_up_in_group(
            &knid_netops::VethSpec {
                host: end(&host_name),
                peer: end("eth0"),
                peer_netns: Some(&pod_ns),
                host_controller: None,
            },
            knid_core::names::attaching_group(&mark),
        )
        .expect("plant the veth of a lost intent");
    assert!(testkit::link_in(&netns, "eth0").is_some());

    node.restart();
    // The orphan sweep runs once knid serves, on its own thread.
    testkit::wait_for("the lost intent's veth swept", testkit::SETTLE, || {
        testkit::link_in(node.host_path(), &host_name).is_none()
    });
    assert!(
        testkit::link_in(&netns, "eth0").is_none(),
        "the pod end outlived recovery"
    );
    let sandbox = node
        .client()
        .attach(&node.attach_req("lost-intent", &netns, "eth0"), RPC)
        .expect("Attach after recovery");
    assert_eq!(sandbox.interfaces[0].host_ifname, host_name);
    testkit::assert_pod_side(&netns, &sandbox.interfaces[0]);
}

/// A knid that dies of a signal other than the intended ones (a heap corruption's abort, a
/// segfault) leaves a core in its node's tempdir, and the harness reads every thread's backtrace
/// from it for the failing test's output (testkit's `core_dump`): what a crash in CI needs to be
/// diagnosed after the fact.
#[test]
fn a_knid_that_dies_of_a_signal_leaves_backtraces_for_the_failing_test() {
    if !testkit::privileged() {
        return;
    }
    let pattern = std::fs::read_to_string("/proc/sys/kernel/core_pattern").expect("core_pattern");
    assert!(
        !pattern.starts_with('|') && !pattern.starts_with('/'),
        "the kernel's core_pattern is {pattern:?}: cores go elsewhere than the crashed \
         process's working directory, where the harness looks for them"
    );
    let mut node = TestNode::start("");
    assert!(
        testkit::core_dump::backtraces(node.dir(), &testkit::bins::knid()).is_empty(),
        "a core before any crash"
    );
    nix::sys::signal::kill(node.pid(), nix::sys::signal::Signal::SIGABRT).expect("SIGABRT knid");
    let status = node.wait_exit(testkit::SETTLE);
    assert!(
        std::os::unix::process::ExitStatusExt::core_dumped(&status),
        "knid dumped no core: {status}"
    );
    let reports = testkit::core_dump::backtraces(node.dir(), &testkit::bins::knid());
    assert_eq!(reports.len(), 1, "one core: {reports:?}");
    let (core, text) = &reports[0];
    // Every thread's stack, down to knid's own frames with their source lines (its main
    // thread's `main`, named `knid::main` or `main` as the build's debug info has it).
    assert!(
        text.contains("Thread 1") && text.contains("at src/knid/main.rs:"),
        "no backtrace of knid's threads from {}:\n{text}",
        core.display()
    );
}
