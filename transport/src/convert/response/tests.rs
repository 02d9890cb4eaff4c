use super::*;
use knid_core::{
    AttachmentState, BridgePorts, GcObject, GcReason, IfName, InterfaceKind, MacAddr, RouteScope,
    SandboxId,
};
use protobuf::Message;

fn ip(s: &str) -> IpAddr {
    s.parse().expect("test address")
}

fn net(s: &str) -> ipnet::IpNet {
    s.parse().expect("test cidr")
}

fn full_sandbox() -> Sandbox {
    let eth0 = InterfaceResult {
        name: IfName::parse("eth0").expect("ifname"),
        network: "default".into(),
        kind: InterfaceKind::Veth,
        state: AttachmentState::Attached,
        mac: MacAddr([0x02, 0x42, 0xac, 0x11, 0x00, 0x02]),
        mtu: 1450,
        host_ifname: "kv1a2b3c4d".into(),
        ips: vec![
            IpConfig {
                address: net("10.88.0.5/16"),
                gateway: Some(ip("10.88.0.1")),
            },
            IpConfig {
                address: net("fd00:88::5/64"),
                gateway: None,
            },
        ],
        routes: vec![
            RouteInfo {
                dst: net("0.0.0.0/0"),
                gateway: Some(ip("10.88.0.1")),
                mtu: Some(1400),
                scope: RouteScope::Universe,
                table: 254,
                metric: Some(100),
            },
            RouteInfo {
                dst: net("fd00:88::/64"),
                gateway: None,
                mtu: None,
                scope: RouteScope::Link,
                table: 100,
                metric: None,
            },
        ],
        neighbors: vec![Neighbor {
            ip: ip("10.88.0.1"),
            mac: MacAddr([0x02, 0, 0, 0, 0, 0x01]),
        }],
        tap: None,
        device: None,
        dan_path: None,
        parent: None,
        mode: None,
        cni: None,
        bandwidth: None,
    };
    let mut net1 = eth0.clone();
    net1.name = IfName::parse("net1").expect("ifname");
    net1.state = AttachmentState::Provisioning;
    net1.kind = InterfaceKind::Tap;
    net1.tap = Some(TapInfo {
        name: "kt0123456789".into(),
        netns_path: None,
        queue_pairs: 4,
        multi_queue: true,
        vnet_hdr: true,
        no_pi: true,
        vhost_net_ok: false,
        owner_uid: Some(107),
        owner_gid: None,
        redirect_peer: String::new(),
        dan: true,
    });
    net1.dan_path = Some("/run/kata-containers/dans/pod-1.json".into());
    Sandbox {
        id: SandboxId::parse("pod-1").expect("id"),
        netns_path: "/run/netns/pod-1".into(),
        netns_inode: 4026532281,
        netns_dev: 4,
        generation: 3,
        pod: PodRef {
            name: "web".into(),
            namespace: "prod".into(),
            uid: "uid-1".into(),
        },
        interfaces: vec![eth0, net1],
        dns: Dns {
            servers: vec![ip("10.96.0.10")],
            searches: vec!["svc.cluster.local".into()],
            options: vec!["ndots:5".into()],
            domain: "cluster.local".into(),
        },
        port_mappings: vec![PortMapping {
            host_port: 8080,
            container_port: 80,
            protocol: "tcp".into(),
            host_ip: Some(ip("::1")),
        }],
        labels: [("app".to_owned(), "web".to_owned())].into(),
        annotations: [("a".to_owned(), "b".to_owned())].into(),
        created_at_ms: 1_700_000_000_000,
        updated_at_ms: 1_700_000_000_123,
    }
}

#[test]
fn full_sandbox_survives_encoding_and_the_wire() {
    let bytes = sandbox(&full_sandbox()).write_to_bytes().expect("encode");
    let s = pb::Sandbox::parse_from_bytes(&bytes).expect("decode");

    assert_eq!(s.id, "pod-1");
    assert_eq!(s.netns_path, "/run/netns/pod-1");
    assert_eq!((s.netns_inode, s.generation), (4026532281, 3));
    assert_eq!(
        s.state, "provisioning",
        "first non-attached interface state"
    );
    let pod = s.pod.get_or_default();
    assert_eq!((pod.name.as_str(), pod.namespace.as_str()), ("web", "prod"));
    assert_eq!(pod.uid, "uid-1");
    let dns = s.dns.get_or_default();
    assert_eq!(dns.servers, ["10.96.0.10"]);
    assert_eq!(dns.searches, ["svc.cluster.local"]);
    assert_eq!(dns.options, ["ndots:5"]);
    assert_eq!(dns.domain, "cluster.local");
    let pm = &s.port_mappings[0];
    assert_eq!((pm.host_port, pm.container_port), (8080, 80));
    assert_eq!((pm.protocol.as_str(), pm.host_ip.as_str()), ("tcp", "::1"));
    assert_eq!(s.labels.get("app").map(String::as_str), Some("web"));
    assert_eq!(s.annotations.get("a").map(String::as_str), Some("b"));
    assert_eq!(
        (s.created_at, s.updated_at),
        (1_700_000_000_000, 1_700_000_000_123)
    );

    assert_eq!(s.interfaces.len(), 2);
    let i = &s.interfaces[0];
    assert_eq!((i.name.as_str(), i.network.as_str()), ("eth0", "default"));
    assert_eq!((i.kind.as_str(), i.state.as_str()), ("veth", "attached"));
    assert_eq!((i.mac.as_str(), i.mtu), ("02:42:ac:11:00:02", 1450));
    assert_eq!(i.host_ifname, "kv1a2b3c4d");
    let ips: Vec<_> = i
        .ips
        .iter()
        .map(|c| (c.address.as_str(), c.family.as_str(), c.gateway.as_str()))
        .collect();
    assert_eq!(
        ips,
        [
            ("10.88.0.5/16", "ipv4", "10.88.0.1"),
            ("fd00:88::5/64", "ipv6", "")
        ]
    );
    let routes: Vec<_> = i
        .routes
        .iter()
        .map(|r| {
            (
                r.dst.as_str(),
                r.gateway.as_str(),
                r.mtu,
                r.scope.as_str(),
                r.table,
            )
        })
        .collect();
    assert_eq!(
        routes,
        [
            ("0.0.0.0/0", "10.88.0.1", 1400, "universe", 254),
            ("fd00:88::/64", "", 0, "link", 100)
        ]
    );
    assert_eq!(i.neighbors.len(), 1);
    assert_eq!(i.neighbors[0].ip, "10.88.0.1");
    assert_eq!(i.neighbors[0].mac, "02:00:00:00:00:01");
    assert!(i.tap.is_none() && i.device.is_none() && i.dan_path.is_empty());
    assert_eq!(
        (
            s.interfaces[1].name.as_str(),
            s.interfaces[1].state.as_str()
        ),
        ("net1", "provisioning")
    );
    let t = s.interfaces[1].tap.as_ref().expect("tap result");
    assert_eq!(
        (t.name.as_str(), t.netns_path.as_str()),
        ("kt0123456789", "")
    );
    assert_eq!(
        (t.queue_pairs, t.multi_queue, t.vnet_hdr, t.no_pi),
        (4, true, true, true)
    );
    assert_eq!(
        (t.owner_uid, t.owner_gid, t.vhost_net_ok),
        (Some(107), None, false)
    );
    assert_eq!(
        s.interfaces[1].dan_path,
        "/run/kata-containers/dans/pod-1.json"
    );
    assert_eq!(s.interfaces[1].kind, "tap");
}

#[test]
fn summary_lists_plain_addresses() {
    let s = SandboxSummary {
        id: "pod-2".into(),
        pod: PodRef::default(),
        netns_path: "/proc/42/ns/net".into(),
        state: Some(AttachmentState::Reaping),
        interfaces: vec!["eth0".into()],
        ips: vec![ip("10.88.0.9"), ip("fd00:88::9")],
        networks: vec!["default".into()],
        created_at_ms: 5,
        error: None,
    };
    let out = list_response(std::slice::from_ref(&s));
    let got = &out.sandboxes[0];
    assert_eq!((got.id.as_str(), got.state.as_str()), ("pod-2", "reaping"));
    assert_eq!(got.netns_path, "/proc/42/ns/net");
    assert_eq!(got.interfaces, ["eth0"]);
    assert_eq!(got.ips, ["10.88.0.9", "fd00:88::9"]);
    assert_eq!(got.networks, ["default"]);
    assert_eq!(got.created_at, 5);
    assert_eq!(got.error, "");
}

#[test]
fn a_summary_with_a_corrupt_record_is_state_corrupt_with_its_error() {
    let s = SandboxSummary {
        id: "pod/3".into(),
        pod: PodRef::default(),
        netns_path: "".into(),
        state: None,
        interfaces: vec!["eth0".into()],
        ips: Vec::new(),
        networks: Vec::new(),
        created_at_ms: 0,
        error: Some("corrupt record pod/3/eth0: invalid mac \"\"".into()),
    };
    let got = summary(&s);
    assert_eq!((got.id.as_str(), got.state.as_str()), ("pod/3", "corrupt"));
    assert_eq!(got.error, "corrupt record pod/3/eth0: invalid mac \"\"");
}

#[test]
fn status_and_networks_carry_every_field() {
    let st = status(&Status {
        ready: false,
        conditions: vec![Condition {
            kind: "NetworkSchedulable/default".into(),
            status: false,
            reason: "Exhausted".into(),
            message: "ipv4 pool exhausted (5 of 5 addresses in use)".into(),
            since_ms: 42,
        }],
        version: "0.1.0".into(),
        boot_id: "b00t".into(),
        link_mark: "knid:00ff".into(),
        cluster: Some(knid_core::ClusterInfo {
            node_name: "node-a".into(),
            api_server: "https://10.96.0.1:443".into(),
            api_reachable: false,
            api_message: "connection refused".into(),
            last_contact_ms: 7,
            resource_version: "4711".into(),
            nodes: 3,
            pod_cidrs: vec![net("10.244.0.0/24")],
            pod_cidr_network: "default".into(),
            cluster_cidrs: vec![net("10.244.0.0/16")],
            cluster_cidrs_from: "config".into(),
            routes: vec![
                knid_core::NodeRoute {
                    node: "node-b".into(),
                    dst: net("10.244.1.0/24"),
                    via: Some(ip("192.168.1.2")),
                    state: knid_core::RouteState::Installed,
                    message: String::new(),
                    backend: knid_core::RouteBackend::HostGw,
                    overlay: None,
                },
                knid_core::NodeRoute {
                    node: "node-d".into(),
                    dst: net("10.244.3.0/24"),
                    via: Some(ip("10.244.3.0")),
                    state: knid_core::RouteState::Installed,
                    message: String::new(),
                    backend: knid_core::RouteBackend::Vxlan,
                    overlay: Some(knid_core::OverlayPath {
                        device: "vxlan.knid".into(),
                        mac: [0x0a, 0, 0, 0, 0, 3],
                        underlay: ip("192.168.101.3"),
                        fdb: true,
                        neighbour: false,
                    }),
                },
                knid_core::NodeRoute {
                    node: "node-c".into(),
                    dst: net("fd00:10:244:2::/64"),
                    via: None,
                    state: knid_core::RouteState::Unreachable,
                    message: "the node has no IPv6 InternalIP".into(),
                    backend: knid_core::RouteBackend::HostGw,
                    overlay: None,
                },
            ],
            published: knid_core::Published {
                network_unavailable: Some(true),
                condition_reason: "KnidNodeNetworkBroken".into(),
                condition_message: "bridge knid0 is missing".into(),
                condition_ms: 11,
                tainted: true,
                taint_ms: 12,
                annotation_ms: 13,
                error: "409".into(),
                vtep_ms: 14,
            },
            backend: "auto".into(),
            vtep: Some(knid_core::VtepInfo {
                vni: 1,
                port: 8472,
                mac: [0x0a, 0, 0, 0, 0, 1],
                devices: vec!["vxlan.knid mtu 1450 over eth0".into()],
                on_node: true,
            }),
        }),
    });
    let cl = st.cluster.as_ref().expect("cluster");
    assert_eq!(
        (
            cl.node_name.as_str(),
            cl.api_server.as_str(),
            cl.api_reachable
        ),
        ("node-a", "https://10.96.0.1:443", false)
    );
    assert_eq!(
        (cl.api_message.as_str(), cl.last_contact_ms),
        ("connection refused", 7)
    );
    assert_eq!((cl.resource_version.as_str(), cl.nodes), ("4711", 3));
    assert_eq!(cl.pod_cidrs, ["10.244.0.0/24"]);
    assert_eq!(cl.pod_cidr_network, "default");
    assert_eq!(cl.cluster_cidrs, ["10.244.0.0/16"]);
    assert_eq!(cl.cluster_cidrs_from, "config");
    let r = &cl.routes[0];
    assert_eq!(
        (
            r.node.as_str(),
            r.dst.as_str(),
            r.via.as_str(),
            r.state.as_str()
        ),
        ("node-b", "10.244.1.0/24", "192.168.1.2", "installed")
    );
    let p = cl.published.as_ref().expect("published");
    assert_eq!(
        (
            p.network_unavailable.as_str(),
            p.condition_reason.as_str(),
            p.condition_message.as_str(),
            p.condition_ms
        ),
        (
            "True",
            "KnidNodeNetworkBroken",
            "bridge knid0 is missing",
            11
        )
    );
    assert_eq!(
        (p.tainted, p.taint_ms, p.annotation_ms, p.error.as_str()),
        (true, 12, 13, "409")
    );
    assert_eq!(p.vtep_ms, 14);
    assert_eq!(cl.backend, "auto");
    let v = cl.vtep.as_ref().expect("vtep");
    assert_eq!(
        (v.vni, v.port, v.mac.as_str(), v.on_node),
        (1, 8472, "0a:00:00:00:00:01", true)
    );
    assert_eq!(v.devices, ["vxlan.knid mtu 1450 over eth0"]);
    let r = &cl.routes[1];
    assert_eq!(
        (
            r.backend.as_str(),
            r.via.as_str(),
            r.device.as_str(),
            r.vtep_mac.as_str(),
            r.underlay.as_str(),
            r.fdb,
            r.neighbour
        ),
        (
            "vxlan",
            "10.244.3.0",
            "vxlan.knid",
            "0a:00:00:00:00:03",
            "192.168.101.3",
            true,
            false
        )
    );
    assert_eq!(cl.routes[0].backend, "host-gw");
    assert_eq!(cl.routes[0].device, "");
    let r = &cl.routes[2];
    assert_eq!((r.via.as_str(), r.state.as_str()), ("", "unreachable"));
    assert_eq!(r.message, "the node has no IPv6 InternalIP");
    assert!(!st.ready);
    assert_eq!(st.link_mark, "knid:00ff");
    assert_eq!(
        (st.version.as_str(), st.boot_id.as_str()),
        ("0.1.0", "b00t")
    );
    let c = &st.conditions[0];
    assert_eq!(
        (c.type_.as_str(), c.status),
        ("NetworkSchedulable/default", false)
    );
    assert_eq!((c.reason.as_str(), c.since), ("Exhausted", 42));
    assert_eq!(c.message, "ipv4 pool exhausted (5 of 5 addresses in use)");

    let nets = networks(&[NetworkInfo {
        name: "default".into(),
        kind: "bridge".into(),
        subnets: vec![net("10.88.0.0/16"), net("fd00:88::/64")],
        gateways: vec![ip("10.88.0.1"), ip("fd00:88::1")],
        mtu: 1500,
        bridge: "knid0".into(),
        parent: String::new(),
        mode: String::new(),
        capacity: vec![Capacity {
            family: Family::V6,
            total: u64::MAX,
            used: 3,
            free: u64::MAX - 3,
        }],
        ports: Some(BridgePorts::of("knid0", 1023)),
        ready: false,
        schedulable: true,
        reason: "NodeNetworkBroken".into(),
        message: "bridge knid0 is down".into(),
        subnets_from: "Node node-a spec.podCIDRs".into(),
    }]);
    assert_eq!(nets.networks[0].subnets_from, "Node node-a spec.podCIDRs");
    let n = &nets.networks[0];
    assert_eq!((n.name.as_str(), n.kind.as_str()), ("default", "bridge"));
    assert_eq!(n.subnets, ["10.88.0.0/16", "fd00:88::/64"]);
    assert_eq!(n.gateways, ["10.88.0.1", "fd00:88::1"]);
    assert_eq!((n.mtu, n.bridge.as_str()), (1500, "knid0"));
    let c = &n.capacity[0];
    assert_eq!(c.family, "ipv6");
    assert_eq!((c.total, c.used, c.free), (u64::MAX, 3, u64::MAX - 3));
    let p = n.bridge_ports.as_ref().expect("bridge ports");
    assert_eq!(
        (p.bridge.as_str(), p.total, p.used, p.free),
        ("knid0", 1023, 1023, 0)
    );
    assert!(!n.ready);
    assert!(n.schedulable);
    assert_eq!(
        (n.reason.as_str(), n.message.as_str()),
        ("NodeNetworkBroken", "bridge knid0 is down")
    );
}

#[test]
fn gc_report_survives_encoding_and_the_wire() {
    let report = GcReport {
        removed: vec![
            GcFinding {
                sandbox_id: "pod-1".into(),
                ifname: "eth0".into(),
                what: GcObject::Attachment,
                reason: GcReason::NotValid,
                detail: "/run/netns/pod-1".into(),
            },
            GcFinding {
                sandbox_id: String::new(),
                ifname: String::new(),
                what: GcObject::HostLink,
                reason: GcReason::NoRecord,
                detail: "kn0123abcdef".into(),
            },
            GcFinding {
                sandbox_id: "pod-2".into(),
                ifname: String::new(),
                what: GcObject::Reservation,
                reason: GcReason::NoOwner,
                detail: "default/10.88.0.9".into(),
            },
        ],
        left: vec![GcFinding {
            sandbox_id: String::new(),
            ifname: String::new(),
            what: GcObject::HostLink,
            reason: GcReason::NotOurs,
            detail: "kn00c0ffee00".into(),
        }],
        errors: vec!["delete link kn0123abcdef: Operation not permitted (os error 1)".into()],
        dry_run: true,
    };
    let bytes = garbage_collect_response(&report)
        .write_to_bytes()
        .expect("encode");
    let got = pb::GarbageCollectResponse::parse_from_bytes(&bytes).expect("decode");

    assert!(got.dry_run);
    assert_eq!(got.errors, report.errors);
    let removed: Vec<_> = got
        .removed
        .iter()
        .map(|f| {
            (
                f.sandbox_id.as_str(),
                f.ifname.as_str(),
                f.what.as_str(),
                f.reason.as_str(),
                f.detail.as_str(),
            )
        })
        .collect();
    assert_eq!(
        removed,
        [
            (
                "pod-1",
                "eth0",
                "attachment",
                "not-valid",
                "/run/netns/pod-1"
            ),
            ("", "", "host-link", "no-record", "kn0123abcdef"),
            ("pod-2", "", "reservation", "no-owner", "default/10.88.0.9"),
        ]
    );
    let left: Vec<_> = got
        .left
        .iter()
        .map(|f| (f.what.as_str(), f.reason.as_str(), f.detail.as_str()))
        .collect();
    assert_eq!(left, [("host-link", "not-ours", "kn00c0ffee00")]);
}

#[test]
fn empty_gc_report_encodes_as_an_empty_response() {
    let got = garbage_collect_response(&GcReport::default());
    assert_eq!(got, pb::GarbageCollectResponse::new());
}
