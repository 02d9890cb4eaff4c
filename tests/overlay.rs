//! Cluster mode across subnets: four knid nodes in two L2 segments joined by a router namespace
//! (testkit's [`Lan`] with [`Lan::add_segment`]; the router forwards between the two subnets
//! and knows nothing of pod CIDRs), with the stand-in Kubernetes API server. Nodes in one
//! segment route each other's pods directly (host-gw); across the router they use knid's VXLAN
//! overlay. Everything is checked against the nodes' kernels and with real traffic.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use ipnet::IpNet;
use knid_netops::route::RTPROT_KNID;
use testkit::cli::{knictl_exits, knictl_ok};
use testkit::cluster_node::{
    api_on_lan, pod_cidrs, segment_node_spec, start_cluster_node_at, start_cluster_node_at_with,
    POD_NETWORK,
};
use testkit::kernel::{fragments_created, link_in, links_in, routes_in, rtnl_in};
use testkit::kube_api::KubeApi;
use testkit::lan::segment_addr;
use testkit::traffic::{udp_via, udp_whole};
use testkit::{tcp_exchange, wait_for, TestNode, RPC};

/// How long a change in the API may take to reach every node's kernel.
const CONVERGE: Duration = Duration::from_secs(30);

/// A node of the test: its name, station index and segment.
#[derive(Clone, Copy)]
struct Place(&'static str, u8, u8);

const A: Place = Place("node-a", 1, 0);
const B: Place = Place("node-b", 2, 0);
const C: Place = Place("node-c", 3, 1);
const D: Place = Place("node-d", 4, 1);
const E: Place = Place("node-e", 5, 1);

/// knid's routes in `host`'s kernel: (destination, gateway, device), sorted.
fn kernel_routes(host: &Path) -> Vec<(IpNet, IpAddr, String)> {
    let links = links_in(host);
    let name = |index: Option<u32>| {
        links
            .iter()
            .find(|l| Some(l.index) == index)
            .map(|l| l.name.clone())
            .unwrap_or_default()
    };
    let mut out: Vec<_> = [false, true]
        .into_iter()
        .flat_map(|v6| routes_in(host, v6))
        .filter(|r| r.protocol == RTPROT_KNID)
        .filter_map(|r| r.gateway.map(|g| (r.dst, g, name(r.oif))))
        .collect();
    out.sort();
    out
}

/// The routes `own` must have to `peers`: via the InternalIP out of eth0 in its own segment,
/// via the peer's VTEP address out of vxlan.knid / vxlan6.knid across the router.
fn wanted_routes(own: Place, peers: &[Place]) -> Vec<(IpNet, IpAddr, String)> {
    let mut out = Vec::new();
    for peer in peers.iter().filter(|p| p.1 != own.1) {
        for (cidr, v6) in pod_cidrs(peer.1).iter().zip([false, true]) {
            let cidr: IpNet = cidr.parse().expect("cidr");
            out.push(if peer.2 == own.2 {
                (cidr, segment_addr(peer.2, peer.1, v6), "eth0".to_owned())
            } else {
                let device = if v6 { "vxlan6.knid" } else { "vxlan.knid" };
                (cidr, cidr.network(), device.to_owned())
            });
        }
    }
    out.sort();
    out
}

fn wait_routes(nodes: &[(&TestNode, Place)], peers: &[Place]) {
    for (node, own) in nodes {
        let want = wanted_routes(*own, peers);
        wait_for(
            &format!("routes of {} to {} node(s)", own.0, peers.len()),
            CONVERGE,
            || kernel_routes(node.host_path()) == want,
        );
    }
}

/// The VTEP MAC `node` publishes on its Node object.
fn published_mac(api: &KubeApi, node: &str) -> Option<String> {
    let object = api.node(node)?;
    let text = object["metadata"]["annotations"]["knid.io/vxlan"].as_str()?;
    let json: serde_json::Value = serde_json::from_str(text).expect("annotation JSON");
    assert_eq!(json["vni"], 1, "{text}");
    assert_eq!(json["port"], 8472, "{text}");
    json["mac"].as_str().map(str::to_owned)
}

fn mac_text(mac: [u8; 6]) -> String {
    knid_core::MacAddr(mac).to_string()
}

/// The overlay device of a family in `host`'s kernel: (ifindex, MAC, MTU).
fn device(host: &Path, v6: bool) -> (u32, String, u32) {
    let name = if v6 { "vxlan6.knid" } else { "vxlan.knid" };
    let link = link_in(host, name).unwrap_or_else(|| panic!("{name} in {}", host.display()));
    (link.index, mac_text(link.mac.expect("mac")), link.mtu)
}

/// Whether `host`'s overlay device of the family holds an FDB entry and a permanent neighbour
/// for `peer`.
fn has_overlay_entries(host: &Path, peer: Place, v6: bool, mac: [u8; 6]) -> bool {
    let (index, _, _) = device(host, v6);
    let mut rtnl = rtnl_in(host);
    let underlay = segment_addr(peer.2, peer.1, v6);
    let vtep = pod_cidrs(peer.1)[usize::from(v6)]
        .parse::<IpNet>()
        .expect("cidr")
        .network();
    let fdb = rtnl.fdb(index).expect("fdb");
    let neighbours = rtnl.neighbours(index, v6).expect("neighbours");
    fdb.iter().any(|e| e.mac == mac && e.dst == Some(underlay))
        && neighbours
            .iter()
            .any(|n| n.ip == vtep && n.mac == Some(mac) && n.permanent)
}

fn parse_mac(text: &str) -> [u8; 6] {
    knid_core::MacAddr::parse(text).expect("mac").0
}

/// A pod on the cluster network: its netns and addresses (IPv4, IPv6).
fn pod(node: &TestNode, id: &str) -> (PathBuf, IpAddr, IpAddr) {
    node.attach_pod(id, |req| {
        req.interfaces[0].network = POD_NETWORK.to_owned();
    })
}

/// A UDP exchange from `client` to `server_ip` in `server`; the source the server saw.
fn udp(server: &Path, server_ip: IpAddr, client: &Path) -> Option<IpAddr> {
    let at = SocketAddr::new(server_ip, 5555);
    udp_via(server, at, client, at)
}

#[test]
fn nodes_in_two_subnets_reach_each_others_pods_over_vxlan_and_their_neighbours_directly() {
    if !testkit::privileged() {
        return;
    }
    let (mut lan, _api_dir, api, _port) = api_on_lan();
    lan.add_segment();
    let outside = lan.station_at("outside", 200, 0, true);
    for p in [A, B, C, D] {
        api.add_node(segment_node_spec(p.0, p.1, p.2));
    }
    let start = |p: Place| start_cluster_node_at(&lan, &api, p.0, p.1, p.2, "");
    let a = start(A);
    let b = start(B);
    let mut c = start(C);
    let d = start(D);
    let nodes = [(&a, A), (&b, B), (&c, C), (&d, D)];
    wait_routes(&nodes, &[A, B, C, D]);

    // Every node publishes its endpoint: the MAC of its devices, the same for both families.
    for (node, p) in nodes {
        let host = node.host_path();
        let (_, mac4, mtu4) = device(host, false);
        let (_, mac6, mtu6) = device(host, true);
        assert_eq!(mac4, mac6, "{}", p.0);
        assert_eq!((mtu4, mtu6), (1450, 1430), "{}: 1500 minus VXLAN", p.0);
        wait_for(&format!("{}'s endpoint on its Node", p.0), CONVERGE, || {
            published_mac(&api, p.0).as_deref() == Some(mac4.as_str())
        });
    }
    for (node, p) in nodes {
        wait_for(&format!("{}: routes ready", p.0), CONVERGE, || {
            node.condition("NodeRoutesReady").status
        });
        let status = node.client().status(RPC).expect("Status");
        assert!(status.ready, "{}", p.0);
        let cluster = status.cluster.as_ref().expect("cluster");
        assert_eq!(cluster.backend, "auto");
        assert!(cluster.vtep.as_ref().expect("vtep").on_node, "{}", p.0);
        for r in &cluster.routes {
            assert_eq!(r.state, "installed", "{}: {r:?}", p.0);
            let same_segment = [A, B, C, D]
                .iter()
                .find(|q| q.0 == r.node)
                .is_some_and(|q| q.2 == p.2);
            let want = if same_segment { "host-gw" } else { "vxlan" };
            assert_eq!(r.backend, want, "{}: {r:?}", p.0);
            if !same_segment {
                assert!(r.fdb && r.neighbour, "{}: {r:?}", p.0);
            }
        }
    }

    let doctor = knictl_ok(&a, &["doctor"]);
    assert!(
        doctor.contains("node node-c 10.244.3.0/24 (vxlan) via 10.244.3.0 dev vxlan.knid"),
        "{doctor}"
    );
    let shown = knictl_ok(&a, &["status"]);
    assert!(
        shown.contains("vxlan.knid mtu 1450 over eth0") && shown.contains("fdb yes, neighbour yes"),
        "{shown}"
    );

    // Pods talk across the router with their own addresses, TCP and UDP, both families.
    let (pa, pa4, pa6) = pod(&a, "pa");
    let (pb, pb4, _) = pod(&b, "pb");
    let (pc, pc4, pc6) = pod(&c, "pc");
    let (pd, pd4, pd6) = pod(&d, "pd");
    assert_eq!(tcp_exchange(&pc, pc4, &pa), pa4, "a→c IPv4 over VXLAN");
    assert_eq!(tcp_exchange(&pc, pc6, &pa), pa6, "a→c IPv6 over VXLAN");
    assert_eq!(tcp_exchange(&pa, pa4, &pd), pd4, "d→a IPv4 over VXLAN");
    assert_eq!(tcp_exchange(&pa, pa6, &pd), pd6, "d→a IPv6 over VXLAN");
    assert_eq!(udp(&pc, pc4, &pb), Some(pb4), "b→c UDP IPv4");
    assert_eq!(udp(&pd, pd6, &pa), Some(pa6), "a→d UDP IPv6");
    // Within a segment: host-gw, no encapsulation (the route goes out of eth0, checked above).
    assert_eq!(tcp_exchange(&pb, pb4, &pa), pa4, "a→b host-gw");
    assert_eq!(tcp_exchange(&pd, pd6, &pc), pc6, "c→d host-gw");
    // Leaving the cluster is still masqueraded, to the node's own address in its segment.
    let out4 = segment_addr(0, 200, false);
    let out6 = segment_addr(0, 200, true);
    assert_eq!(tcp_exchange(&outside, out4, &pc), segment_addr(1, 3, false));
    assert_eq!(tcp_exchange(&outside, out6, &pc), segment_addr(1, 3, true));
    assert_eq!(tcp_exchange(&outside, out4, &pa), segment_addr(0, 1, false));

    // A packet of the pod MTU crosses the overlay whole: nobody fragments it.
    let pod_mtu = link_in(&pa, "eth0").expect("pod eth0").mtu;
    assert_eq!(
        pod_mtu, 1430,
        "the pod network gets eth0's 1500 minus 70 (the underlay carries IPv6)"
    );
    let namespaces: Vec<PathBuf> = vec![
        lan.underlay().to_owned(),
        a.host_path().to_owned(),
        c.host_path().to_owned(),
    ];
    let fragments = |nss: &[PathBuf]| -> u64 { nss.iter().map(|n| fragments_created(n)).sum() };
    let before = fragments(&namespaces);
    assert!(
        udp_whole(&pc, pc4, &pa, pod_mtu as usize),
        "IPv4, {pod_mtu} bytes"
    );
    assert!(
        udp_whole(&pc, pc6, &pa, pod_mtu as usize),
        "IPv6, {pod_mtu} bytes"
    );
    assert_eq!(
        fragments(&namespaces),
        before,
        "no fragment was created anywhere"
    );

    // An FDB entry or a neighbour deleted by hand comes back.
    let c_mac = parse_mac(&published_mac(&api, C.0).expect("c's endpoint"));
    {
        let (index, _, _) = device(a.host_path(), false);
        let mut rtnl = rtnl_in(a.host_path());
        assert!(rtnl
            .delete_fdb(index, c_mac, Some(segment_addr(1, 3, false)))
            .expect("delete fdb"));
        let (index6, _, _) = device(a.host_path(), true);
        assert!(rtnl
            .delete_neighbour(index6, "fd00:10:244:3::".parse().expect("ip"))
            .expect("delete neighbour"));
    }
    wait_for("a's overlay entries for c back", CONVERGE, || {
        has_overlay_entries(a.host_path(), C, false, c_mac)
            && has_overlay_entries(a.host_path(), C, true, c_mac)
    });
    assert_eq!(tcp_exchange(&pc, pc4, &pa), pa4, "a→c after the repair");

    // c's endpoint removed from its Node by someone else: the others keep routing c's pods,
    // and c's knid writes it again.
    api.edit_node(C.0, |node| {
        node["metadata"]["annotations"]
            .as_object_mut()
            .expect("annotations")
            .remove("knid.io/vxlan");
    });
    assert_eq!(published_mac(&api, C.0), None);
    for _ in 0..5 {
        assert!(has_overlay_entries(a.host_path(), C, false, c_mac));
        assert_eq!(
            tcp_exchange(&pc, pc4, &pa),
            pa4,
            "a→c without c's annotation"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        kernel_routes(a.host_path()),
        wanted_routes(A, &[A, B, C, D])
    );
    wait_for("c's endpoint written again", CONVERGE, || {
        published_mac(&api, C.0).map(|m| parse_mac(&m)) == Some(c_mac)
    });

    // A node that has not published its endpoint yet is reported, not routed wrongly.
    api.add_node(segment_node_spec(E.0, E.1, E.2));
    wait_for("a reports node-e awaiting its endpoint", CONVERGE, || {
        let c = a.condition("NodeRoutesReady");
        !c.status && c.reason == "AwaitingVtep" && c.message.contains("node-e")
    });
    assert_eq!(
        kernel_routes(a.host_path()),
        wanted_routes(A, &[A, B, C, D])
    );
    let shown = knictl_ok(&a, &["status"]);
    assert!(
        shown.contains("node-e") && shown.contains("awaiting-vtep"),
        "{shown}"
    );
    let doctor = knictl_exits(&a, 5, &["doctor"]);
    assert!(
        doctor.contains("node node-e 10.244.5.0/24 (vxlan)") && doctor.contains("knid.io/vxlan"),
        "{doctor}"
    );
    // Its knid starts: every node routes it, by the overlay or directly.
    let e = start(E);
    let all = [(&a, A), (&b, B), (&c, C), (&d, D), (&e, E)];
    wait_routes(&all, &[A, B, C, D, E]);
    let (pe, pe4, _) = pod(&e, "pe");
    assert_eq!(tcp_exchange(&pe, pe4, &pb), pb4, "b→e over VXLAN");
    let e_mac = parse_mac(&published_mac(&api, E.0).expect("e's endpoint"));
    // It goes: its routes, FDB entries and neighbours go from every node.
    drop(e);
    api.delete_node(E.0);
    wait_routes(&nodes, &[A, B, C, D]);
    for (node, p) in [(&a, A), (&b, B)] {
        let (index, _, _) = device(node.host_path(), false);
        let fdb = rtnl_in(node.host_path()).fdb(index).expect("fdb");
        assert!(fdb.iter().all(|f| f.mac != e_mac), "{}: {fdb:?}", p.0);
        let neighbours = rtnl_in(node.host_path())
            .neighbours(index, false)
            .expect("neighbours");
        assert!(
            neighbours
                .iter()
                .all(|n| n.ip != "10.244.5.0".parse::<IpAddr>().expect("ip")),
            "{}: {neighbours:?}",
            p.0
        );
    }

    // A restart keeps the endpoint (same MAC, the device not replaced) and the traffic.
    let before = (device(c.host_path(), false), device(c.host_path(), true));
    c.stop();
    c.restart();
    wait_routes(&[(&a, A), (&b, B), (&c, C), (&d, D)], &[A, B, C, D]);
    assert_eq!(
        (device(c.host_path(), false), device(c.host_path(), true)),
        before,
        "the devices are the same after a restart"
    );
    assert_eq!(
        published_mac(&api, C.0).map(|m| parse_mac(&m)),
        Some(c_mac),
        "the same endpoint on the Node"
    );
    assert!(has_overlay_entries(a.host_path(), C, false, c_mac));
    assert_eq!(tcp_exchange(&pc, pc4, &pa), pa4, "a→c after c restarted");
    assert_eq!(tcp_exchange(&pa, pa6, &pc), pc6, "c→a after c restarted");
}

#[test]
fn a_pod_network_mtu_the_overlay_cannot_carry_is_refused_at_start_naming_both_numbers() {
    if !testkit::privileged() {
        return;
    }
    // The node's netns has no default route: the underlay is taken as 1500 bytes, IPv4.
    let config = "[cluster]\nenabled = true\nnode_name = \"node-a\"\nbackend = \"vxlan\"\n\n\
                  [networks.pods]\nkind = \"bridge\"\nbridge = \"kpod0\"\n\
                  pod_cidr_from_node = true\nmtu = 1460\n";
    let node = TestNode::prepare(config, &[], &[]);
    let (status, log) = node.run_to_exit(None, None);
    assert!(!status.success(), "{log}");
    assert!(
        log.contains("networks.pods.mtu: 1460") && log.contains("1450"),
        "{log}"
    );
    // The same with the overlay off starts far enough to need the API server: the MTU is not
    // what stops it.
    let host_gw = config.replace("backend = \"vxlan\"", "backend = \"host-gw\"");
    let node = TestNode::prepare(&host_gw, &[], &[]);
    let (_, log) = node.run_to_exit(None, None);
    assert!(!log.contains("networks.pods.mtu"), "{log}");
}

#[test]
fn a_pod_network_mtu_from_before_the_overlay_keeps_auto_on_host_gw_and_says_why() {
    if !testkit::privileged() {
        return;
    }
    // A configuration written before the overlay (the DaemonSet's pod network at 1500 bytes),
    // as an upgrade brings it: node-a starts and runs as before, on host-gw.
    let (lan, _api_dir, api, _port) = api_on_lan();
    lan.add_segment();
    for p in [A, B, C] {
        api.add_node(segment_node_spec(p.0, p.1, p.2));
    }
    let a = start_cluster_node_at_with(&lan, &api, (A.0, A.1, A.2), "", "mtu = 1500");
    let b = start_cluster_node_at(&lan, &api, B.0, B.1, B.2, "");
    let c = start_cluster_node_at(&lan, &api, C.0, C.1, C.2, "");
    wait_for("node-a's route to node-b", CONVERGE, || {
        kernel_routes(a.host_path()) == wanted_routes(A, &[A, B])
    });
    wait_for("node-a reports node-c unreachable", CONVERGE, || {
        let c = a.condition("NodeRoutesReady");
        !c.status && c.reason == "NotDirectlyReachable" && c.message.contains("node-c")
    });
    let status = a.client().status(RPC).expect("Status");
    assert!(status.ready, "node-a runs");
    let cluster = status.cluster.as_ref().expect("cluster");
    assert!(
        cluster.backend.starts_with("host-gw (auto fell back")
            && cluster.backend.contains("1500")
            && cluster.backend.contains("1430"),
        "{}",
        cluster.backend
    );
    assert!(cluster.vtep.is_none(), "no endpoint published: {cluster:?}");
    assert!(
        link_in(a.host_path(), "vxlan.knid").is_none(),
        "no overlay device"
    );
    assert_eq!(
        a.network(POD_NETWORK).mtu,
        1500,
        "the configured MTU stands"
    );
    // node-a publishes no endpoint: node-c reports it, and never routes it over the overlay.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(published_mac(&api, A.0), None);
    wait_for(
        "node-c reports node-a awaiting its endpoint",
        CONVERGE,
        || {
            let cond = c.condition("NodeRoutesReady");
            !cond.status && cond.reason == "AwaitingVtep" && cond.message.contains("node-a")
        },
    );
    assert!(kernel_routes(c.host_path())
        .iter()
        .all(|(dst, _, _)| !pod_cidrs(A.1).contains(&dst.to_string())));
    // Its neighbour is served as before.
    let (pa, pa4, _) = pod(&a, "pa");
    let (pb, pb4, _) = pod(&b, "pb");
    assert_eq!(tcp_exchange(&pb, pb4, &pa), pa4);
}
