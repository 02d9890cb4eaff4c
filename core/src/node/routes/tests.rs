use super::*;

fn nets(list: &[&str]) -> Vec<IpNet> {
    list.iter().map(|s| s.parse().expect("net")).collect()
}
fn ips(list: &[&str]) -> Vec<IpAddr> {
    list.iter().map(|s| s.parse().expect("ip")).collect()
}

#[test]
fn a_peer_on_a_connected_subnet_is_routed_per_family() {
    let (cidrs, addrs) = (
        nets(&["10.244.2.0/24", "fd00:10:244:2::/64"]),
        ips(&["192.168.100.2", "fd00:100::2"]),
    );
    let peers = [Peer {
        name: "b",
        pod_cidrs: &cidrs,
        internal_ips: &addrs,
        vtep: None,
    }];
    let local = nets(&["192.168.100.1/24", "fd00:100::1/64", "127.0.0.1/8"]);
    let routes = plan(
        &peers,
        &nets(&["10.244.1.0/24"]),
        &local,
        &Overlay::host_gw(),
    );
    assert_eq!(routes.len(), 2);
    assert!(
        routes.iter().all(|r| r.state == RouteState::Installed),
        "{routes:?}"
    );
    assert_eq!(routes[0].via, Some("192.168.100.2".parse().expect("ip")));
    assert_eq!(routes[1].via, Some("fd00:100::2".parse().expect("ip")));
}

#[test]
fn a_peer_behind_a_router_or_without_the_family_is_unreachable() {
    let cidrs = nets(&["10.244.3.0/24", "fd00:10:244:3::/64"]);
    let addrs = ips(&["10.9.0.3"]);
    let peers = [Peer {
        name: "c",
        pod_cidrs: &cidrs,
        internal_ips: &addrs,
        vtep: None,
    }];
    // A /32 of our own is no connected subnet.
    let routes = plan(
        &peers,
        &[],
        &nets(&["192.168.100.1/24", "10.9.0.1/32"]),
        &Overlay::host_gw(),
    );
    assert_eq!(routes[0].state, RouteState::Unreachable);
    assert!(
        routes[0].message.contains("10.9.0.3"),
        "{}",
        routes[0].message
    );
    assert_eq!(routes[1].state, RouteState::Unreachable);
    assert!(routes[1].message.contains("IPv6"), "{}", routes[1].message);
}

#[test]
fn a_peer_cidr_overlapping_ours_is_never_routed() {
    let cidrs = nets(&["10.244.1.0/24"]);
    let addrs = ips(&["192.168.100.2"]);
    let peers = [Peer {
        name: "b",
        pod_cidrs: &cidrs,
        internal_ips: &addrs,
        vtep: None,
    }];
    let routes = plan(
        &peers,
        &nets(&["10.244.0.0/16"]),
        &nets(&["192.168.100.1/24"]),
        &Overlay::host_gw(),
    );
    assert_eq!(routes[0].state, RouteState::Failed);
    assert_eq!(routes[0].via, None);
}

fn overlay(backend: Backend) -> Overlay {
    Overlay {
        backend,
        vtep: Vtep {
            vni: 1,
            port: 8472,
            mac: [0x0a, 0, 0, 0, 0, 1],
        },
        v4: Ok((7, "vxlan.knid".into())),
        v6: Err("Node a has no IPv6 InternalIP".into()),
    }
}

#[test]
fn auto_routes_a_neighbour_directly_and_the_rest_through_the_overlay_via_their_vtep_address() {
    let near = (nets(&["10.244.2.0/24"]), ips(&["192.168.100.2"]));
    let far = (
        nets(&["10.244.3.0/24", "fd00:10:244:3::/64"]),
        ips(&["192.168.101.3", "fd00:101::3"]),
    );
    let published = Ok(Vtep {
        vni: 1,
        port: 8472,
        mac: [0x0a, 0, 0, 0, 0, 3],
    });
    let peers = [
        Peer {
            name: "b",
            pod_cidrs: &near.0,
            internal_ips: &near.1,
            vtep: Some(&published),
        },
        Peer {
            name: "c",
            pod_cidrs: &far.0,
            internal_ips: &far.1,
            vtep: Some(&published),
        },
    ];
    let local = nets(&["192.168.100.1/24", "fd00:100::1/64"]);
    let routes = plan(&peers, &[], &local, &overlay(Backend::Auto));
    assert_eq!(routes[0].backend, RouteBackend::HostGw);
    assert_eq!(routes[0].via, Some("192.168.100.2".parse().unwrap()));
    assert_eq!(routes[0].overlay, None);
    let c4 = &routes[1];
    assert_eq!(c4.backend, RouteBackend::Vxlan);
    assert_eq!(c4.state, RouteState::Installed, "{c4:?}");
    assert_eq!(c4.via, Some("10.244.3.0".parse().unwrap()));
    let path = c4.overlay.as_ref().expect("overlay path");
    assert_eq!(path.device, "vxlan.knid");
    assert_eq!(path.mac, [0x0a, 0, 0, 0, 0, 3]);
    assert_eq!(path.underlay, "192.168.101.3".parse::<IpAddr>().unwrap());
    // No IPv6 device here: the route says why.
    assert_eq!(routes[2].state, RouteState::Failed);
    assert!(
        routes[2].message.contains("no IPv6 InternalIP"),
        "{:?}",
        routes[2]
    );

    // host-gw reports what auto would send through the overlay; vxlan sends everything.
    let hostgw = plan(
        &peers,
        &[],
        &local,
        &Overlay {
            backend: Backend::HostGw,
            ..overlay(Backend::Auto)
        },
    );
    assert_eq!(hostgw[1].state, RouteState::Unreachable);
    let vxlan = plan(&peers, &[], &local, &overlay(Backend::Vxlan));
    assert_eq!(vxlan[0].backend, RouteBackend::Vxlan);
    assert_eq!(vxlan[0].via, Some("10.244.2.0".parse().unwrap()));
}

#[test]
fn a_far_node_without_its_endpoint_waits_and_one_on_another_vni_is_refused() {
    let far = (nets(&["10.244.3.0/24"]), ips(&["192.168.101.3"]));
    let other_vni = Ok(Vtep {
        vni: 2,
        port: 8472,
        mac: [0x0a, 0, 0, 0, 0, 3],
    });
    let garbled = Err("annotation knid.io/vxlan is not knid's VXLAN endpoint".to_owned());
    let local = nets(&["192.168.100.1/24"]);
    for (vtep, state, words) in [
        (None, RouteState::AwaitingVtep, "knid.io/vxlan"),
        (Some(&other_vni), RouteState::Failed, "VNI 2"),
        (Some(&garbled), RouteState::Failed, "not knid's"),
    ] {
        let peers = [Peer {
            name: "c",
            pod_cidrs: &far.0,
            internal_ips: &far.1,
            vtep,
        }];
        let routes = plan(&peers, &[], &local, &overlay(Backend::Auto));
        assert_eq!(routes[0].state, state, "{routes:?}");
        assert!(routes[0].message.contains(words), "{routes:?}");
    }
}
