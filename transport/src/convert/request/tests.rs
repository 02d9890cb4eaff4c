use super::*;
use knid_core::ErrorKind;

/// A valid request that sets every field.
fn good() -> pb::AttachRequest {
    let mut req = pb::AttachRequest::new();
    req.sandbox_id = "pod-1.abc_2".into();
    let pod = req.pod.mut_or_insert_default();
    pod.name = "web".into();
    pod.namespace = "prod".into();
    pod.uid = "0b9e0c52-4e1f-4a53-9d1d-8b2a8e7c2c11".into();
    req.netns_path = "/run/netns/pod-1".into();

    let mut eth0 = pb::InterfaceRequest::new();
    eth0.name = "eth0".into();
    eth0.network = "default".into();
    eth0.kind = "veth".into();
    eth0.mac = "02:42:ac:11:00:02".into();
    eth0.mtu = 1400;
    eth0.static_ips = vec!["10.88.0.5".into(), "fd00:88::5".into()];
    let mut net1 = pb::InterfaceRequest::new();
    net1.name = "net1".into();
    net1.network = "storage_v2".into();
    req.interfaces = vec![eth0, net1];

    let dns = req.dns.mut_or_insert_default();
    dns.servers = vec!["10.96.0.10".into(), "fd00::a".into()];
    dns.searches = vec!["prod.svc.cluster.local".into()];
    dns.options = vec!["ndots:5".into()];
    dns.domain = "cluster.local".into();

    let mut port = pb::PortMapping::new();
    port.host_port = 8080;
    port.container_port = 80;
    port.protocol = "udp".into();
    port.host_ip = "127.0.0.1".into();
    req.port_mappings = vec![port];
    req.labels.insert("app".into(), "web".into());
    req.annotations.insert("note".into(), "x".repeat(100));
    req
}

fn ip(s: &str) -> IpAddr {
    s.parse().expect("test address")
}

#[test]
fn good_request_converts_to_the_expected_core_request() {
    let got = attach_request(&good()).expect("good request rejected");
    let want = AttachRequest {
        sandbox_id: SandboxId::parse("pod-1.abc_2").expect("id"),
        pod: PodRef {
            name: "web".into(),
            namespace: "prod".into(),
            uid: "0b9e0c52-4e1f-4a53-9d1d-8b2a8e7c2c11".into(),
        },
        netns_path: PathBuf::from("/run/netns/pod-1"),
        interfaces: vec![
            InterfaceSpec {
                name: IfName::parse("eth0").expect("ifname"),
                network: "default".into(),
                kind: Some(InterfaceKind::Veth),
                mac: Some(MacAddr([0x02, 0x42, 0xac, 0x11, 0x00, 0x02])),
                mtu: Some(1400),
                static_ips: vec![ip("10.88.0.5"), ip("fd00:88::5")],
                tap: None,
                device: None,
                bandwidth: None,
            },
            InterfaceSpec {
                name: IfName::parse("net1").expect("ifname"),
                network: "storage_v2".into(),
                kind: None,
                mac: None,
                mtu: None,
                static_ips: vec![],
                tap: None,
                device: None,
                bandwidth: None,
            },
        ],
        dns: Dns {
            servers: vec![ip("10.96.0.10"), ip("fd00::a")],
            searches: vec!["prod.svc.cluster.local".into()],
            options: vec!["ndots:5".into()],
            domain: "cluster.local".into(),
        },
        port_mappings: vec![PortMapping {
            host_port: 8080,
            container_port: 80,
            protocol: "udp".into(),
            host_ip: Some(ip("127.0.0.1")),
        }],
        labels: [("app".to_owned(), "web".to_owned())].into(),
        annotations: [("note".to_owned(), "x".repeat(100))].into(),
    };
    assert_eq!(got, want);
}

#[test]
fn empty_values_take_their_defaults() {
    let mut req = pb::AttachRequest::new();
    req.sandbox_id = "a".into();
    req.netns_path = "/run/netns/a".into();
    req.interfaces = vec![pb::InterfaceRequest::new()];
    let mut port = pb::PortMapping::new();
    port.host_port = 1;
    port.container_port = 65535;
    req.port_mappings = vec![port];
    // An empty tap message is "not set", not a tap request.
    req.interfaces[0].tap.mut_or_insert_default();

    let got = attach_request(&req).expect("minimal request rejected");
    let iface = &got.interfaces[0];
    assert_eq!(iface.name.as_str(), DEFAULT_IFNAME);
    assert_eq!(iface.network, DEFAULT_NETWORK);
    assert_eq!((iface.kind, iface.mac, iface.mtu), (None, None, None));
    assert_eq!(got.port_mappings[0].protocol, "tcp");
    assert_eq!(got.port_mappings[0].host_ip, None);
    assert_eq!(got.pod, PodRef::default());
    assert_eq!(got.dns, Dns::default());
}

type Mutation = fn(&mut pb::AttachRequest);

/// One bad value per rule, with the field path its error must name.
const BAD: &[(&str, &str, Mutation)] = &[
    ("sandbox_id empty", "sandbox_id", |r| r.sandbox_id.clear()),
    ("sandbox_id too long", "sandbox_id", |r| {
        r.sandbox_id = "a".repeat(129)
    }),
    ("sandbox_id bad char", "sandbox_id", |r| {
        r.sandbox_id = "pod/1".into()
    }),
    ("sandbox_id leading dash", "sandbox_id", |r| {
        r.sandbox_id = "-pod".into()
    }),
    ("pod name control char", "pod.name", |r| {
        r.pod.mut_or_insert_default().name = "we\nb".into()
    }),
    ("pod uid too long", "pod.uid", |r| {
        r.pod.mut_or_insert_default().uid = "u".repeat(254)
    }),
    ("netns_path relative", "netns_path", |r| {
        r.netns_path = "run/netns/pod-1".into()
    }),
    ("netns_path with ..", "netns_path", |r| {
        r.netns_path = "/run/netns/../../etc".into()
    }),
    ("ifname too long", "interfaces[1].name", |r| {
        r.interfaces[1].name = "abcdefghijklmnop".into()
    }),
    ("ifname with slash", "interfaces[0].name", |r| {
        r.interfaces[0].name = "eth/0".into()
    }),
    ("empty ifname among two", "interfaces[1].name", |r| {
        r.interfaces[1].name.clear()
    }),
    ("duplicate ifname", "interfaces[1].name", |r| {
        r.interfaces[1].name = "eth0".into()
    }),
    ("mac multicast", "interfaces[0].mac", |r| {
        r.interfaces[0].mac = "01:00:5e:00:00:01".into()
    }),
    ("mac garbage", "interfaces[0].mac", |r| {
        r.interfaces[0].mac = "garbage".into()
    }),
    ("mtu 67", "interfaces[0].mtu", |r| r.interfaces[0].mtu = 67),
    ("mtu 65536", "interfaces[0].mtu", |r| {
        r.interfaces[0].mtu = 65536
    }),
    ("static ip garbage", "interfaces[0].static_ips[2]", |r| {
        r.interfaces[0].static_ips.push("10.88.0.300".into())
    }),
    ("two ipv4 static ips", "interfaces[0].static_ips[2]", |r| {
        r.interfaces[0].static_ips.push("10.88.0.6".into())
    }),
    ("kind unknown", "interfaces[0].kind", |r| {
        r.interfaces[0].kind = "bridge".into()
    }),
    ("network with slash", "interfaces[1].network", |r| {
        r.interfaces[1].network = "a/b".into()
    }),
    ("network too long", "interfaces[1].network", |r| {
        r.interfaces[1].network = "n".repeat(65)
    }),
    ("257 queue pairs", "interfaces[0].tap.queue_pairs", |r| {
        r.interfaces[0].tap.mut_or_insert_default().queue_pairs = 257
    }),
    ("device by name and pci", "interfaces[0].device", |r| {
        let d = r.interfaces[0].device.mut_or_insert_default();
        d.name = "ens1f1".into();
        d.pci_address = "0000:3b:00.1".into();
    }),
    ("device name with '/'", "interfaces[0].device.name", |r| {
        r.interfaces[0].device.mut_or_insert_default().name = "a/b".into()
    }),
    (
        "device pci not sysfs form",
        "interfaces[0].device.pci_address",
        |r| r.interfaces[0].device.mut_or_insert_default().pci_address = "3b:00.1".into(),
    ),
    (
        "device pci traversal",
        "interfaces[0].device.pci_address",
        |r| r.interfaces[0].device.mut_or_insert_default().pci_address = "../../../../x".into(),
    ),
    ("zero interfaces", "interfaces", |r| r.interfaces.clear()),
    ("17 interfaces", "interfaces", |r| {
        r.interfaces = (0..17)
            .map(|i| {
                let mut iface = pb::InterfaceRequest::new();
                iface.name = format!("eth{i}");
                iface
            })
            .collect()
    }),
    ("dns server garbage", "dns.servers[0]", |r| {
        r.dns.mut_or_insert_default().servers[0] = "dns.example".into()
    }),
    ("dns search with space", "dns.searches[0]", |r| {
        r.dns.mut_or_insert_default().searches[0] = "a b".into()
    }),
    ("port protocol icmp", "port_mappings[0].protocol", |r| {
        r.port_mappings[0].protocol = "icmp".into()
    }),
    ("host_port 0", "port_mappings[0].host_port", |r| {
        r.port_mappings[0].host_port = 0
    }),
    (
        "container_port 65536",
        "port_mappings[0].container_port",
        |r| r.port_mappings[0].container_port = 65536,
    ),
    ("host_ip garbage", "port_mappings[0].host_ip", |r| {
        r.port_mappings[0].host_ip = "localhost".into()
    }),
    ("host port twice", "port_mappings[1]", |r| {
        let mut again = r.port_mappings[0].clone();
        again.container_port = 81;
        again.host_ip = String::new();
        r.port_mappings.push(again);
    }),
    ("label key empty", "labels[\"\"]", |r| {
        r.labels.insert(String::new(), "v".into());
    }),
    ("too many labels", "labels", |r| {
        r.labels = (0..=validate::MAX_LABELS)
            .map(|i| (format!("k{i}"), String::new()))
            .collect()
    }),
    ("annotation value too long", "annotations[\"note\"]", |r| {
        r.annotations.insert("note".into(), "x".repeat(4097));
    }),
];

/// Checks `result` is an InvalidArgument whose message starts by naming `field`.
fn assert_invalid<T>(case: &str, field: &str, result: Result<T, Error>) {
    let err = match result {
        Ok(_) => panic!("{case}: accepted"),
        Err(err) => err,
    };
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{case}: {err}");
    let message = err.chain();
    assert!(
        message.starts_with(&format!("invalid {field}: ")),
        "{case}: {message:?} does not name {field}"
    );
}

#[test]
fn each_bad_value_is_invalid_argument_naming_its_field() {
    for (case, field, mutate) in BAD {
        let mut req = good();
        mutate(&mut req);
        assert_invalid(case, field, attach_request(&req));
    }
}

#[test]
fn duplicate_ifname_names_the_first_holder() {
    let mut req = good();
    req.interfaces[1].name = "eth0".into();
    let err = attach_request(&req).err().map(|e| e.chain());
    assert_eq!(
        err.as_deref(),
        Some("invalid interfaces[1].name: duplicates interfaces[0].name")
    );
}

#[test]
fn mtu_zero_means_the_network_default() {
    let mut req = good();
    req.interfaces[0].mtu = 0;
    let got = attach_request(&req).expect("mtu 0 rejected");
    assert_eq!(got.interfaces[0].mtu, None);
}

#[test]
fn detach_takes_an_optional_ifname() {
    let mut req = pb::DetachRequest::new();
    req.sandbox_id = "pod-1".into();
    let (id, ifname) = detach_request(&req).expect("detach all");
    assert_eq!((id.as_str(), ifname), ("pod-1", None));

    req.ifname = "net1".into();
    let (_, ifname) = detach_request(&req).expect("detach one");
    assert_eq!(ifname.as_ref().map(IfName::as_str), Some("net1"));

    req.ifname = "a:b".into();
    let err = detach_request(&req).err().map(|e| e.chain());
    assert!(err.is_some_and(|m| m.starts_with("invalid ifname: ")));

    req.sandbox_id = ".hidden".into();
    let err = detach_request(&req).err().map(|e| e.chain());
    assert!(err.is_some_and(|m| m.starts_with("invalid sandbox_id: ")));
}

#[test]
fn inspect_validates_the_sandbox_id() {
    let mut req = pb::InspectRequest::new();
    req.sandbox_id = "pod-1".into();
    assert_eq!(
        inspect_request(&req).ok().map(|id| id.to_string()),
        Some("pod-1".to_owned())
    );
    req.sandbox_id.clear();
    let err = inspect_request(&req).err().map(|e| e.chain());
    assert_eq!(
        err.as_deref(),
        Some("invalid sandbox_id: must not be empty")
    );
}

#[test]
fn list_filters_parse_and_validate() {
    let mut req = pb::ListRequest::new();
    assert_eq!(list_request(&req).ok(), Some(ListFilter::default()));

    req.network = "default".into();
    req.state = "rolling-back".into();
    req.labels.insert("app".into(), "web".into());
    let filter = list_request(&req).expect("filter rejected");
    assert_eq!(filter.network.as_deref(), Some("default"));
    assert_eq!(filter.state, Some(AttachmentState::RollingBack));
    assert_eq!(filter.labels.get("app").map(String::as_str), Some("web"));

    for (field, mutate) in [
        (
            "state",
            (|r| r.state = "up".into()) as fn(&mut pb::ListRequest),
        ),
        ("network", |r| r.network = "no/slash".into()),
        ("labels[\"\"]", |r| {
            r.labels.insert(String::new(), String::new());
        }),
    ] {
        let mut bad = req.clone();
        mutate(&mut bad);
        let err = list_request(&bad).err().map(|e| e.chain());
        assert!(
            err.as_deref()
                .is_some_and(|m| m.starts_with(&format!("invalid {field}: "))),
            "{field}: {err:?}"
        );
    }
}

fn attachment_ref(sandbox_id: &str, ifname: &str) -> pb::AttachmentRef {
    pb::AttachmentRef {
        sandbox_id: sandbox_id.into(),
        ifname: ifname.into(),
        ..Default::default()
    }
}

fn id(s: &str) -> SandboxId {
    SandboxId::parse(s).expect("test id")
}

fn ifname(s: &str) -> IfName {
    IfName::parse(s).expect("test ifname")
}

#[test]
fn gc_lists_become_the_kept_set_with_duplicates_folded() {
    let req = pb::GarbageCollectRequest {
        valid_sandbox_ids: vec!["pod-1".into(), "pod-2".into(), "pod-1".into()],
        valid_attachments: vec![
            attachment_ref("pod-3", "eth0"),
            attachment_ref("pod-3", "net1"),
            attachment_ref("pod-3", "eth0"),
        ],
        dry_run: true,
        network: "pods".into(),
        ..Default::default()
    };
    let got = garbage_collect_request(&req).expect("gc request rejected");
    let want = GcRequest {
        keep: Some(GcKeep {
            sandboxes: [id("pod-1"), id("pod-2")].into(),
            attachments: [(id("pod-3"), ifname("eth0")), (id("pod-3"), ifname("net1"))].into(),
            network: Some("pods".into()),
            allow_detach_all: false,
        }),
        dry_run: true,
    };
    assert_eq!(got, want);
}

#[test]
fn an_empty_gc_request_is_a_sweep_never_keep_nothing() {
    let got = garbage_collect_request(&pb::GarbageCollectRequest::new()).expect("empty gc");
    assert_eq!(
        got,
        GcRequest {
            keep: None,
            dry_run: false,
        }
    );
}

#[test]
fn keep_nothing_must_be_asked_for() {
    let req = pb::GarbageCollectRequest {
        allow_detach_all: true,
        ..Default::default()
    };
    let got = garbage_collect_request(&req).expect("explicit keep-nothing gc");
    assert_eq!(
        got.keep,
        Some(GcKeep {
            allow_detach_all: true,
            ..GcKeep::default()
        })
    );
    let network_only = pb::GarbageCollectRequest {
        network: "pods".into(),
        ..Default::default()
    };
    let err = garbage_collect_request(&network_only).expect_err("a network without lists");
    assert!(err.to_string().contains("network"), "{err}");
    assert!(err.to_string().contains("allow_detach_all"), "{err}");
}

#[test]
fn gc_sweep_only_judges_no_attachment_by_the_lists() {
    let req = pb::GarbageCollectRequest {
        sweep_only: true,
        ..Default::default()
    };
    let got = garbage_collect_request(&req).expect("sweep-only gc");
    assert_eq!(
        got,
        GcRequest {
            keep: None,
            dry_run: false,
        }
    );
}

type GcMutation = fn(&mut pb::GarbageCollectRequest);

/// One bad GarbageCollect request per rule, with the field path its error must name.
const BAD_GC: &[(&str, &str, GcMutation)] = &[
    ("sweep_only with sandbox ids", "sweep_only", |r| {
        r.sweep_only = true;
        r.valid_sandbox_ids.push("pod-9".into());
    }),
    ("sweep_only with attachments", "sweep_only", |r| {
        r.sweep_only = true;
        r.valid_attachments.push(attachment_ref("pod-9", "eth0"));
    }),
    ("sweep_only with a network", "sweep_only", |r| {
        r.sweep_only = true;
        r.network = "pods".into();
    }),
    ("network with a slash", "network", |r| {
        r.network = "po/ds".into()
    }),
    ("sandbox id with slash", "valid_sandbox_ids[3]", |r| {
        r.valid_sandbox_ids[3] = "pod/3".into()
    }),
    ("sandbox id empty", "valid_sandbox_ids[0]", |r| {
        r.valid_sandbox_ids[0].clear()
    }),
    (
        "attachment ifname too long",
        "valid_attachments[1].ifname",
        |r| r.valid_attachments[1].ifname = "abcdefghijklmnop".into(),
    ),
    (
        "attachment ifname empty",
        "valid_attachments[0].ifname",
        |r| r.valid_attachments[0].ifname.clear(),
    ),
    (
        "attachment sandbox id leading dot",
        "valid_attachments[1].sandbox_id",
        |r| r.valid_attachments[1].sandbox_id = ".pod".into(),
    ),
    ("too many sandbox ids", "valid_sandbox_ids", |r| {
        r.valid_sandbox_ids = vec!["pod-1".into(); MAX_GC_VALID_ENTRIES + 1]
    }),
    ("too many attachments", "valid_attachments", |r| {
        r.valid_attachments = vec![attachment_ref("pod-1", "eth0"); MAX_GC_VALID_ENTRIES + 1]
    }),
];

#[test]
fn each_bad_gc_value_is_invalid_argument_naming_its_field() {
    for (case, field, mutate) in BAD_GC {
        let mut req = pb::GarbageCollectRequest {
            valid_sandbox_ids: (0..4).map(|i| format!("pod-{i}")).collect(),
            valid_attachments: vec![
                attachment_ref("pod-8", "eth0"),
                attachment_ref("pod-8", "net1"),
            ],
            ..Default::default()
        };
        assert!(
            garbage_collect_request(&req).is_ok(),
            "base request rejected"
        );
        mutate(&mut req);
        assert_invalid(case, field, garbage_collect_request(&req));
    }
}

#[test]
fn gc_lists_of_exactly_the_maximum_are_accepted() {
    let req = pb::GarbageCollectRequest {
        valid_sandbox_ids: vec!["pod-1".into(); MAX_GC_VALID_ENTRIES],
        valid_attachments: vec![attachment_ref("pod-1", "eth0"); MAX_GC_VALID_ENTRIES],
        ..Default::default()
    };
    let keep = garbage_collect_request(&req)
        .expect("lists at the maximum rejected")
        .keep
        .expect("lists given, so keep is set");
    assert_eq!((keep.sandboxes.len(), keep.attachments.len()), (1, 1));
}

#[test]
fn bandwidth_converts_with_the_default_burst_and_names_its_bad_fields() {
    let mut req = good();
    req.interfaces[0].bandwidth = Some(pb::Bandwidth {
        ingress_rate: 10_000_000,
        egress_rate: 5_000_000,
        egress_burst: 400_000,
        ..Default::default()
    })
    .into();
    let got = attach_request(&req).expect("limits rejected");
    let bw = got.interfaces[0].bandwidth.expect("limits");
    assert_eq!(
        bw.ingress.map(|l| (l.rate, l.burst)),
        Some((10_000_000, 1_000_000))
    );
    assert_eq!(
        bw.egress.map(|l| (l.rate, l.burst)),
        Some((5_000_000, 400_000))
    );

    req.interfaces[0].bandwidth = Some(pb::Bandwidth::new()).into();
    let got = attach_request(&req).expect("empty limits rejected");
    assert_eq!(got.interfaces[0].bandwidth, None, "all zero is unlimited");

    for (bad, field) in [
        (
            pb::Bandwidth {
                ingress_rate: 10,
                ..Default::default()
            },
            "interfaces[0].bandwidth.ingress_rate",
        ),
        (
            pb::Bandwidth {
                egress_burst: 10,
                ..Default::default()
            },
            "interfaces[0].bandwidth.egress_burst",
        ),
    ] {
        req.interfaces[0].bandwidth = Some(bad).into();
        assert_invalid(field, field, attach_request(&req));
    }
}
