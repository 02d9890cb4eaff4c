use knid_core::{
    AttachmentState, Capacity, Dns, IfName, InterfaceKind, IpConfig, PodRef, RouteInfo, RouteScope,
    SandboxId,
};
use protobuf::Message;

use super::*;

fn net(s: &str) -> ipnet::IpNet {
    s.parse().expect("test cidr")
}

fn ip(s: &str) -> std::net::IpAddr {
    s.parse().expect("test address")
}

fn route(dst: &str, gateway: Option<&str>) -> RouteInfo {
    RouteInfo {
        dst: net(dst),
        gateway: gateway.map(ip),
        mtu: None,
        scope: RouteScope::Universe,
        table: 254,
        metric: None,
    }
}

/// `eth0`, a dual-stack veth whose IPv6 address knid lists first, and `net1`, a cni interface
/// whose MAC is not known.
fn sandbox() -> Sandbox {
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
                address: net("fd00:88::5/64"),
                gateway: Some(ip("fd00:88::1")),
            },
            IpConfig {
                address: net("10.88.0.5/24"),
                gateway: Some(ip("10.88.0.1")),
            },
        ],
        routes: vec![
            route("0.0.0.0/0", Some("10.88.0.1")),
            route("::/0", Some("fd00:88::1")),
            route("10.99.0.0/16", None),
        ],
        neighbors: Vec::new(),
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
    net1.network = "storage".into();
    net1.kind = InterfaceKind::Cni;
    net1.mac = MacAddr::UNKNOWN;
    net1.mtu = 0;
    net1.host_ifname = String::new();
    net1.ips = vec![IpConfig {
        address: net("192.168.7.9/24"),
        gateway: None,
    }];
    net1.routes = Vec::new();
    Sandbox {
        id: SandboxId::parse("pod-1").expect("id"),
        netns_path: "/run/netns/kni-uid-1".into(),
        netns_inode: 4026532281,
        netns_dev: 4,
        generation: 2,
        pod: PodRef::default(),
        interfaces: vec![eth0, net1],
        dns: Dns::default(),
        port_mappings: Vec::new(),
        labels: Default::default(),
        annotations: Default::default(),
        created_at_ms: 0,
        updated_at_ms: 0,
    }
}

fn get<'a>(map: &'a HashMap<String, String>, key: &str) -> Option<&'a str> {
    map.get(key).map(String::as_str)
}

#[test]
fn ipconfigs_hold_pod_side_interfaces_with_plain_ips_and_documented_extradata() {
    // Through the wire, as the KNI kubelet would read it.
    let bytes = attach_interface(&sandbox())
        .write_to_bytes()
        .expect("encode");
    let r = kni::AttachInterfaceResponse::parse_from_bytes(&bytes).expect("decode");

    let mut names: Vec<&str> = r.ipconfigs.keys().map(String::as_str).collect();
    names.sort();
    assert_eq!(
        names,
        ["eth0", "net1"],
        "pod-side interfaces only, no host side, no lo"
    );

    let eth0 = &r.ipconfigs["eth0"];
    assert_eq!(eth0.ip, ["10.88.0.5", "fd00:88::5"], "plain, IPv4 first");
    assert_eq!(eth0.mac, "02:42:ac:11:00:02");
    let x = &eth0.extradata;
    assert_eq!(get(x, "prefixes"), Some("10.88.0.5/24,fd00:88::5/64"));
    assert_eq!(get(x, "gateways"), Some("10.88.0.1,fd00:88::1"));
    assert_eq!(
        get(x, "routes"),
        Some("0.0.0.0/0 via 10.88.0.1,::/0 via fd00:88::1,10.99.0.0/16 dev eth0")
    );
    assert_eq!(get(x, "mtu"), Some("1450"));
    assert_eq!(get(x, "network"), Some("default"));
    assert_eq!(get(x, "kind"), Some("veth"));
    assert_eq!(get(x, "host_ifname"), Some("kv1a2b3c4d"));
    assert_eq!(x.len(), 7, "{x:?}");

    let net1 = &r.ipconfigs["net1"];
    assert_eq!(net1.ip, ["192.168.7.9"]);
    assert_eq!(
        net1.mac, "",
        "an unknown MAC is left empty, not 00:00:00:00:00:00"
    );
    let mut keys: Vec<&str> = net1.extradata.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(
        keys,
        ["kind", "network", "prefixes"],
        "empty values are left out"
    );

    assert_eq!(get(&r.extradata, "netns"), Some("/run/netns/kni-uid-1"));
    assert_eq!(get(&r.extradata, "sandbox_state"), Some("attached"));
}

#[test]
fn query_pod_network_answers_what_attach_interface_answered() {
    let s = sandbox();
    let attached = attach_interface(&s);
    let queried = query_pod_network(&s);
    assert_eq!(queried.ipconfigs, attached.ipconfigs);
    assert_eq!(queried.extradata, attached.extradata);
}

#[test]
fn create_network_response_carries_path_inode_and_created() {
    let mut info = NetnsInfo {
        owner: "kni-uid-1".into(),
        path: "/run/netns/kni-uid-1".into(),
        inode: 4026532281,
        created: true,
        sandbox_id: String::new(),
        pod: None,
    };
    let r = create_network(&info);
    assert_eq!(r.netns_path, "/run/netns/kni-uid-1");
    assert_eq!(get(&r.extradata, "netns_inode"), Some("4026532281"));
    assert_eq!(get(&r.extradata, "created"), Some("true"));
    info.created = false;
    assert_eq!(
        get(&create_network(&info).extradata, "created"),
        Some("false")
    );
}

fn network_info(name: &str, subnets: &[&str], capacity: &[(Family, u64)]) -> NetworkInfo {
    NetworkInfo {
        name: name.into(),
        kind: "bridge".into(),
        subnets: subnets.iter().map(|s| net(s)).collect(),
        gateways: Vec::new(),
        mtu: 1500,
        bridge: "knid0".into(),
        parent: String::new(),
        mode: String::new(),
        capacity: capacity
            .iter()
            .map(|(family, free)| Capacity {
                family: *family,
                total: 5,
                used: 5 - free,
                free: *free,
            })
            .collect(),
        ports: None,
        ready: true,
        schedulable: capacity.iter().all(|(_, free)| *free > 0),
        reason: String::new(),
        message: String::new(),
        subnets_from: String::new(),
    }
}

#[test]
fn node_networks_report_readiness_capacity_and_why_not_ready() {
    let ready = network_info(
        "default",
        &["10.88.0.0/24", "fd00:88::/64"],
        &[(Family::V4, 3), (Family::V6, 5)],
    );
    // A full pool: still ready (its pods run on), not schedulable.
    let mut full = network_info("small", &["10.55.0.0/29"], &[(Family::V4, 0)]);
    full.ports = Some(knid_core::BridgePorts::of("knid0", 1));
    let mut broken = network_info("gone", &["10.56.0.0/24"], &[(Family::V4, 4)]);
    broken.ready = false;
    broken.reason = "NodeNetworkBroken".into();
    broken.message = "bridge br-gone is missing".into();

    let r = query_node_networks(&[ready, full, broken], false);
    assert_eq!(get(&r.extradata, "ready"), Some("false"));
    assert_eq!(r.networks.len(), 3);

    let n = &r.networks[0];
    assert_eq!((n.name.as_str(), n.ready), ("default", true));
    let x = &n.extradata;
    assert_eq!(get(x, "kind"), Some("bridge"));
    assert_eq!(get(x, "subnets"), Some("10.88.0.0/24,fd00:88::/64"));
    assert_eq!(
        (get(x, "free_ipv4"), get(x, "free_ipv6")),
        (Some("3"), Some("5"))
    );
    assert_eq!((get(x, "reason"), get(x, "message")), (None, None));
    assert_eq!(get(x, "schedulable"), Some("true"));
    assert_eq!(get(x, "free_bridge_ports"), None, "no port count");

    let n = &r.networks[1];
    assert_eq!((n.name.as_str(), n.ready), ("small", true));
    let x = &n.extradata;
    assert_eq!(get(x, "free_ipv4"), Some("0"));
    assert_eq!(get(x, "free_ipv6"), None, "no IPv6 pool");
    assert_eq!(get(x, "free_bridge_ports"), Some("1022"));
    assert_eq!(get(x, "schedulable"), Some("false"));
    assert_eq!((get(x, "reason"), get(x, "message")), (None, None));

    let n = &r.networks[2];
    assert_eq!((n.name.as_str(), n.ready), ("gone", false));
    let x = &n.extradata;
    assert_eq!(get(x, "reason"), Some("NodeNetworkBroken"));
    assert_eq!(get(x, "message"), Some("bridge br-gone is missing"));
}
