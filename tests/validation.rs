//! Every bad field is refused over the real socket with InvalidArgument, and the message names
//! the exact field path (docs/security.md#validation-rules). Refused requests change nothing.

use std::collections::HashMap;

use knid_transport::pb;
use protobuf::MessageField;
use testkit::{TestNode, RPC};

/// One bad Attach: a description, how to spoil a valid request, the field the error must name.
type Case = (&'static str, fn(&mut pb::AttachRequest), &'static str);

fn set_ifname(req: &mut pb::AttachRequest, name: &str) {
    req.interfaces[0].name = name.to_owned();
}

fn set_mac(req: &mut pb::AttachRequest, mac: &str) {
    req.interfaces[0].mac = mac.to_owned();
}

fn set_static_ips(req: &mut pb::AttachRequest, ips: &[&str]) {
    req.interfaces[0].static_ips = ips.iter().map(|ip| (*ip).to_owned()).collect();
}

fn numbered_interfaces(req: &mut pb::AttachRequest, count: usize) {
    let template = req.interfaces[0].clone();
    req.interfaces = (0..count)
        .map(|i| pb::InterfaceRequest {
            name: format!("eth{i}"),
            ..template.clone()
        })
        .collect();
}

const ATTACH_CASES: &[Case] = &[
    ("empty sandbox id", |r| r.sandbox_id.clear(), "sandbox_id"),
    (
        "129-char sandbox id",
        |r| r.sandbox_id = "a".repeat(129),
        "sandbox_id",
    ),
    (
        "sandbox id with '/'",
        |r| r.sandbox_id = "pod/1".into(),
        "sandbox_id",
    ),
    (
        "sandbox id with leading '-'",
        |r| r.sandbox_id = "-pod".into(),
        "sandbox_id",
    ),
    (
        "relative netns path",
        |r| r.netns_path = "ns/pod".into(),
        "netns_path",
    ),
    (
        "netns path with '..'",
        |r| r.netns_path = format!("{}/../pod", r.netns_path),
        "netns_path",
    ),
    (
        "netns path outside the prefixes",
        |r| r.netns_path = "/etc/hosts".into(),
        "netns_path",
    ),
    (
        "16-byte ifname",
        |r| set_ifname(r, "abcdefghijklmnop"),
        "interfaces[0].name",
    ),
    (
        "ifname with '/'",
        |r| set_ifname(r, "eth/0"),
        "interfaces[0].name",
    ),
    (
        "ifname with ':'",
        |r| set_ifname(r, "eth0:1"),
        "interfaces[0].name",
    ),
    ("ifname '..'", |r| set_ifname(r, ".."), "interfaces[0].name"),
    // The kernel would expand it as a name template: the link would not be the recorded one.
    (
        "ifname with a '%' template",
        |r| set_ifname(r, "eth%d"),
        "interfaces[0].name",
    ),
    (
        "multicast mac",
        |r| set_mac(r, "01:00:5e:00:00:01"),
        "interfaces[0].mac",
    ),
    (
        "garbage mac",
        |r| set_mac(r, "not-a-mac"),
        "interfaces[0].mac",
    ),
    (
        "all-zero mac",
        |r| set_mac(r, "00:00:00:00:00:00"),
        "interfaces[0].mac",
    ),
    ("mtu 67", |r| r.interfaces[0].mtu = 67, "interfaces[0].mtu"),
    (
        "mtu 65536",
        |r| r.interfaces[0].mtu = 65536,
        "interfaces[0].mtu",
    ),
    (
        "garbage static ip",
        |r| set_static_ips(r, &["ten.88.0.5"]),
        "interfaces[0].static_ips[0]",
    ),
    (
        "static ip outside the subnet",
        |r| set_static_ips(r, &["10.99.0.5"]),
        "interfaces[0].static_ips[0]",
    ),
    (
        "static ipv6 outside the subnet",
        |r| set_static_ips(r, &["fd00:99::5"]),
        "interfaces[0].static_ips[0]",
    ),
    (
        "static ip = gateway",
        |r| set_static_ips(r, &["10.88.0.1"]),
        "interfaces[0].static_ips[0]",
    ),
    (
        "static ip = network address",
        |r| set_static_ips(r, &["10.88.0.0"]),
        "interfaces[0].static_ips[0]",
    ),
    (
        "static ip = broadcast",
        |r| set_static_ips(r, &["10.88.0.255"]),
        "interfaces[0].static_ips[0]",
    ),
    (
        "two static ipv4",
        |r| set_static_ips(r, &["10.88.0.5", "10.88.0.6"]),
        "interfaces[0].static_ips[1]",
    ),
    (
        "kind bogus",
        |r| r.interfaces[0].kind = "bogus".into(),
        "interfaces[0].kind",
    ),
    (
        "kind macvlan on a bridge network",
        |r| r.interfaces[0].kind = "macvlan".into(),
        "interfaces[0].kind",
    ),
    (
        "kind host-device on a bridge network",
        |r| r.interfaces[0].kind = "host-device".into(),
        "interfaces[0].kind",
    ),
    (
        "tap settings on a veth",
        |r| {
            r.interfaces[0].tap = MessageField::some(pb::TapRequest {
                queue_pairs: 2,
                ..Default::default()
            })
        },
        "interfaces[0].tap",
    ),
    (
        "257 tap queue pairs",
        |r| {
            r.interfaces[0].kind = "tap".into();
            r.interfaces[0].tap = MessageField::some(pb::TapRequest {
                queue_pairs: 257,
                ..Default::default()
            })
        },
        "interfaces[0].tap.queue_pairs",
    ),
    (
        "device on a veth",
        |r| {
            r.interfaces[0].device = MessageField::some(pb::DeviceRequest {
                name: "dummy0".into(),
                ..Default::default()
            })
        },
        "interfaces[0].device",
    ),
    (
        "unknown network",
        |r| r.interfaces[0].network = "nope".into(),
        "interfaces[0].network",
    ),
    (
        "network with '/'",
        |r| r.interfaces[0].network = "a/b".into(),
        "interfaces[0].network",
    ),
    (
        "duplicate interface names",
        |r| r.interfaces.push(r.interfaces[0].clone()),
        "interfaces[1].name",
    ),
    (
        "empty name beside another interface",
        |r| {
            numbered_interfaces(r, 2);
            r.interfaces[1].name.clear();
        },
        "interfaces[1].name",
    ),
    ("zero interfaces", |r| r.interfaces.clear(), "interfaces"),
    (
        "17 interfaces",
        |r| numbered_interfaces(r, 17),
        "interfaces",
    ),
    (
        "garbage dns server",
        |r| {
            r.dns = MessageField::some(pb::Dns {
                servers: vec!["dns.example".into()],
                ..Default::default()
            })
        },
        "dns.servers[0]",
    ),
    (
        "icmp port mapping",
        |r| {
            r.port_mappings = vec![pb::PortMapping {
                host_port: 8080,
                container_port: 80,
                protocol: "icmp".into(),
                ..Default::default()
            }]
        },
        "port_mappings[0].protocol",
    ),
    (
        "port 0",
        |r| {
            r.port_mappings = vec![pb::PortMapping {
                host_port: 0,
                container_port: 80,
                ..Default::default()
            }]
        },
        "port_mappings[0].host_port",
    ),
    (
        "pod name with a control character",
        |r| {
            r.pod = MessageField::some(pb::PodRef {
                name: "web\n0".into(),
                ..Default::default()
            })
        },
        "pod.name",
    ),
    (
        "label with an empty key",
        |r| r.labels = HashMap::from([(String::new(), "v".into())]),
        "labels[\"\"]",
    ),
    (
        "65 labels",
        |r| r.labels = (0..65).map(|i| (format!("k{i}"), "v".to_owned())).collect(),
        "labels",
    ),
];

fn assert_invalid<T: std::fmt::Debug>(
    result: Result<T, knid_transport::ClientError>,
    what: &str,
    field: &str,
) {
    let message = testkit::expect_code(result, ttrpc::Code::INVALID_ARGUMENT, what);
    assert!(
        testkit::names_field(&message, field),
        "{what}: message {message:?} does not name the field {field}"
    );
}

#[test]
fn every_bad_field_is_invalid_argument_naming_the_field_and_changes_nothing() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    let netns = node.netns("valid");
    let client = node.client();
    let valid = node.attach_req("pod-valid", &netns, "eth0");

    for (what, spoil, field) in ATTACH_CASES {
        let mut req = valid.clone();
        spoil(&mut req);
        assert_invalid(client.attach(&req, RPC), what, field);
    }

    for (id, ifname, field) in [
        ("pod/1", "", "sandbox_id"),
        ("", "", "sandbox_id"),
        ("pod-valid", "eth/0", "ifname"),
    ] {
        let req = pb::DetachRequest {
            sandbox_id: id.to_owned(),
            ifname: ifname.to_owned(),
            ..Default::default()
        };
        assert_invalid(client.detach(&req, RPC), "Detach", field);
    }
    for id in ["-pod", "pod 1"] {
        let req = testkit::inspect_req(id);
        assert_invalid(client.inspect(&req, RPC), "Inspect", "sandbox_id");
    }
    let bad_state = pb::ListRequest {
        state: "bogus".to_owned(),
        ..Default::default()
    };
    assert_invalid(client.list(&bad_state, RPC), "List", "state");

    // Nothing was created or reserved by any of them.
    assert!(
        node.list_ids().is_empty(),
        "a refused request left a sandbox"
    );
    assert!(
        node.host_kn_links().is_empty(),
        "a refused request left a host link"
    );
    assert_eq!(node.capacity_used("default"), 0);
    let pod_links: Vec<String> = testkit::links_in(&netns)
        .into_iter()
        .map(|l| l.name)
        .collect();
    assert_eq!(
        pod_links,
        ["lo"],
        "a refused request touched the sandbox netns"
    );

    // The valid request the table was built from does work: the cases failed for their field.
    let sandbox = client.attach(&valid, RPC).expect("the unspoilt request");
    testkit::assert_pod_side(&netns, &sandbox.interfaces[0]);
}

/// A netns path under an allowed prefix that is a symbolic link (here to knid's own host
/// namespace) is refused without being followed: a caller cannot aim knid at a namespace it
/// could not name directly.
#[test]
fn a_netns_path_that_is_a_symlink_is_refused_unfollowed() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    let link = node.dir().join("ns/sneaky");
    std::os::unix::fs::symlink(node.host_path(), &link).expect("symlink");
    let host_links_before = testkit::link_names(node.host_path());
    let message = testkit::expect_code(
        node.client()
            .attach(&node.attach_req("sneaky", &link, "eth0"), RPC),
        ttrpc::Code::FAILED_PRECONDITION,
        "Attach",
    );
    assert!(message.contains("symbolic link"), "{message}");
    assert!(node.list_ids().is_empty(), "a record was left");
    assert_eq!(node.capacity_used("default"), 0);
    assert_eq!(testkit::link_names(node.host_path()), host_links_before);
    std::fs::remove_file(&link).expect("remove symlink");
}

/// The per-request cap on interfaces also holds across attaches: a sandbox with the maximum
/// attached gets ResourceExhausted for one more, and nothing of it is made.
#[test]
fn a_sandbox_cannot_grow_past_the_interface_limit_attach_by_attach() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    let netns = node.netns("wide");
    let client = node.client();
    let mut full = node.attach_req("wide", &netns, "eth0");
    numbered_interfaces(&mut full, knid_core::validate::MAX_INTERFACES);
    client
        .attach(&full, RPC)
        .expect("the maximum in one request");
    let used = node.capacity_used("default");

    let message = testkit::expect_code(
        client.attach(&node.attach_req("wide", &netns, "extra0"), RPC),
        ttrpc::Code::RESOURCE_EXHAUSTED,
        "Attach one more",
    );
    assert!(message.contains("per sandbox"), "{message}");
    assert_eq!(node.capacity_used("default"), used, "an address was taken");
    assert!(testkit::link_in(&netns, "extra0").is_none());
    client
        .detach(&testkit::detach_req("wide"), RPC)
        .expect("Detach");
}

/// knid's own network namespace, bind-mounted under an allowed prefix, is refused as a
/// sandbox's: an attach there would rewrite the host's addresses and routes.
#[test]
fn the_hosts_own_netns_is_refused_as_a_sandbox() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    let alias = node.dir().join("ns/host-alias");
    std::fs::File::create(&alias).expect("create mount point");
    nix::mount::mount(
        Some(node.host_path()),
        &alias,
        None::<&str>,
        nix::mount::MsFlags::MS_BIND,
        None::<&str>,
    )
    .expect("bind-mount the host netns");
    let host_links_before = testkit::link_names(node.host_path());
    let result = node
        .client()
        .attach(&node.attach_req("hostile", &alias, "pod0"), RPC);
    nix::mount::umount2(&alias, nix::mount::MntFlags::MNT_DETACH).expect("unmount");
    let message = testkit::expect_code(result, ttrpc::Code::FAILED_PRECONDITION, "Attach");
    assert!(message.contains("host's network namespace"), "{message}");
    assert!(node.list_ids().is_empty(), "a record was left");
    assert_eq!(testkit::link_names(node.host_path()), host_links_before);
}

#[test]
fn a_netns_path_outside_the_prefixes_is_refused_saying_what_is_accepted() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start("");
    let netns = node.netns("outside");
    for path in ["/proc/self/ns/net", "/proc/1/ns/mnt", "/etc/hosts"] {
        let mut req = node.attach_req("outside", &netns, "eth0");
        req.netns_path = path.to_owned();
        let err = node.client().attach(&req, RPC).expect_err(path);
        let text = err.to_string();
        assert!(
            text.contains("netns_path")
                && text.contains(path)
                && text.contains("(netns_prefixes)")
                && text.contains("/<name>"),
            "{path}: the refusal does not say what is accepted: {text}"
        );
    }
    node.assert_not_found("outside");
}
