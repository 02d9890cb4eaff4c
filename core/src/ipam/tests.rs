use super::*;

fn network(subnets: &[&str]) -> Network {
    let subnets = subnets
        .iter()
        .map(|s| {
            let net: IpNet = s.parse().expect("subnet");
            (net, first_host(&net))
        })
        .collect();
    Network {
        name: "n".into(),
        driver: crate::config::Driver::Bridge {
            bridge: "b".into(),
            hairpin: true,
        },
        mtu: 1500,
        subnets,
        masquerade: None,
        pod_cidr_from_node: false,
        antispoof: true,
    }
}

fn owner(id: &str) -> Owner {
    Owner {
        sandbox_id: id.into(),
        ifname: "eth0".into(),
    }
}

fn loaded(subnets: &[&str]) -> (Ipam, Network) {
    let ipam = Ipam::new();
    let net = network(subnets);
    ipam.load_network(&net, Vec::new(), &[]);
    (ipam, net)
}

#[test]
fn dual_stack_allocation_gives_one_address_per_family() {
    let (ipam, net) = loaded(&["10.0.0.0/24", "fd00::/64"]);
    let a = ipam.allocate(&net, &owner("a"), &[]).expect("alloc");
    let addrs: Vec<String> = a.leases.iter().map(|l| l.address.to_string()).collect();
    assert_eq!(addrs, ["10.0.0.2/24", "fd00::2/64"]);
    assert_eq!(a.leases[0].gateway.to_string(), "10.0.0.1");
    assert_eq!(a.marks.len(), 2);
}

#[test]
fn gateway_network_and_broadcast_are_never_handed_out() {
    let (ipam, net) = loaded(&["10.0.0.0/29"]);
    let mut got = Vec::new();
    for i in 0..5 {
        let a = ipam
            .allocate(&net, &owner(&i.to_string()), &[])
            .expect("alloc");
        got.push(a.leases[0].address.addr().to_string());
    }
    assert_eq!(
        got,
        ["10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6"]
    );
    let err = ipam
        .allocate(&net, &owner("x"), &[])
        .expect_err("exhausted");
    assert!(
        matches!(err, Error::Exhausted { family: "ipv4", .. }),
        "{err}"
    );
    assert_eq!(ipam.capacity("n")[0].free, 0);
    assert_eq!(ipam.capacity("n")[0].total, 5);
}

#[test]
fn a_routed_pool_hands_out_every_host_address() {
    // Routed networks' gateways are link-local, outside the subnet.
    let mut net = network(&["10.0.0.0/29"]);
    net.driver = crate::config::Driver::Routed;
    net.subnets[0].1 = crate::config::ROUTED_GATEWAY_V4;
    let ipam = Ipam::new();
    ipam.load_network(&net, Vec::new(), &[]);
    let got: Vec<String> = (0..6)
        .map(|i| {
            let a = ipam
                .allocate(&net, &owner(&i.to_string()), &[])
                .expect("alloc");
            a.leases[0].address.addr().to_string()
        })
        .collect();
    assert_eq!(got[0], "10.0.0.1");
    assert_eq!(got[5], "10.0.0.6");
    assert_eq!(ipam.capacity("n")[0].total, 6);
    assert_eq!(ipam.capacity("n")[0].free, 0);
}

#[test]
fn round_robin_does_not_reuse_a_just_released_address() {
    let (ipam, net) = loaded(&["10.0.0.0/24"]);
    let a = ipam.allocate(&net, &owner("a"), &[]).expect("alloc");
    let first = a.leases[0].address.addr();
    ipam.release("n", &[first]);
    let b = ipam.allocate(&net, &owner("a"), &[]).expect("alloc");
    assert_ne!(b.leases[0].address.addr(), first);
}

#[test]
fn cursor_wraps_to_the_start_of_the_subnet() {
    let ipam = Ipam::new();
    let net = network(&["10.0.0.0/29"]);
    let last: IpAddr = "10.0.0.6".parse().expect("ip");
    ipam.load_network(&net, Vec::new(), &[last]);
    let a = ipam.allocate(&net, &owner("a"), &[]).expect("alloc");
    assert_eq!(a.leases[0].address.addr().to_string(), "10.0.0.2");
}

#[test]
fn static_addresses_are_honoured_and_exclusive() {
    let (ipam, net) = loaded(&["10.0.0.0/24", "fd00::/64"]);
    let want: IpAddr = "10.0.0.50".parse().expect("ip");
    let a = ipam.allocate(&net, &owner("a"), &[want]).expect("alloc");
    assert_eq!(a.leases[0].address.addr(), want);
    assert_eq!(a.marks.len(), 1, "only the v6 allocation writes a mark");
    let err = ipam
        .allocate(&net, &owner("b"), &[want])
        .expect_err("taken");
    assert!(matches!(err, Error::AddressInUse { .. }), "{err}");
    // The failed allocation left nothing marked in the other family.
    assert_eq!(ipam.capacity("n")[1].used, 1);
    let gw: IpAddr = "10.0.0.1".parse().expect("ip");
    assert!(ipam.allocate(&net, &owner("c"), &[gw]).is_err());
}

#[test]
fn loaded_reservations_are_respected() {
    let ipam = Ipam::new();
    let net = network(&["10.0.0.0/29"]);
    let held: Vec<(IpAddr, Owner)> = (2..=5)
        .map(|i| {
            (
                format!("10.0.0.{i}").parse().expect("ip"),
                owner(&i.to_string()),
            )
        })
        .collect();
    ipam.load_network(&net, held, &[]);
    let a = ipam.allocate(&net, &owner("a"), &[]).expect("alloc");
    assert_eq!(a.leases[0].address.addr().to_string(), "10.0.0.6");
    assert!(ipam.allocate(&net, &owner("b"), &[]).is_err());
}

#[test]
fn a_reload_keeps_an_address_allocated_but_not_yet_reserved() {
    let (ipam, net) = loaded(&["10.0.0.0/29"]);
    let a = ipam.allocate(&net, &owner("a"), &[]).expect("alloc");
    // The network set up again before the attach wrote its reservation: the store has none.
    ipam.load_network(&net, Vec::new(), &[]);
    let b = ipam.allocate(&net, &owner("b"), &[]).expect("alloc");
    assert_ne!(a.leases[0].address, b.leases[0].address);
    ipam.release(&net.name, &[a.leases[0].address.addr()]);
    let c = ipam.allocate(&net, &owner("c"), &[a.leases[0].address.addr()]);
    assert!(c.is_ok(), "a released address is free again: {c:?}");
}

#[test]
fn ipv6_capacity_saturates() {
    let (ipam, _) = loaded(&["fd00::/64"]);
    let cap = &ipam.capacity("n")[0];
    assert_eq!(cap.family, Family::V6);
    assert_eq!(cap.total, u64::MAX - 1);
}

#[test]
fn assignability_excludes_network_and_broadcast() {
    let net: IpNet = "10.0.0.0/24".parse().expect("net");
    for (addr, ok) in [
        ("10.0.0.0", false),
        ("10.0.0.1", true),
        ("10.0.0.254", true),
        ("10.0.0.255", false),
        ("10.0.1.1", false),
    ] {
        assert_eq!(is_assignable(&net, addr.parse().expect("ip")), ok, "{addr}");
    }
}

/// Allocates for `owner` and hands the addresses straight back, as a crash-looping pod does:
/// the address of each family and the marks the allocation asks to write.
fn allocate_and_release(ipam: &Ipam, net: &Network, owner_id: &str) -> (Vec<IpAddr>, Vec<IpAddr>) {
    let a = ipam.allocate(net, &owner(owner_id), &[]).expect("alloc");
    let addrs: Vec<IpAddr> = a.leases.iter().map(|l| l.address.addr()).collect();
    ipam.release(&net.name, &addrs);
    (addrs, a.marks)
}

#[test]
fn a_mark_is_written_once_the_cursor_reaches_the_last_one() {
    let (ipam, net) = loaded(&["10.0.0.0/16", "fd00::/64"]);
    let mut written = Vec::new();
    for i in 0..200 {
        let (addrs, marks) = allocate_and_release(&ipam, &net, &format!("p{i}"));
        if !marks.is_empty() {
            written.push((i, addrs[0].to_string(), marks));
        }
    }
    // The first allocation after the load, then each one that reaches the mark: one write of
    // each family's mark per MARK_AHEAD allocations, not one per allocation.
    let at: Vec<(usize, String)> = written.iter().map(|(i, a, _)| (*i, a.clone())).collect();
    assert_eq!(
        at,
        [
            (0, "10.0.0.2".to_owned()),
            (64, "10.0.0.66".to_owned()),
            (128, "10.0.0.130".to_owned()),
            (192, "10.0.0.194".to_owned())
        ]
    );
    let marks: Vec<String> = written[1].2.iter().map(ToString::to_string).collect();
    assert_eq!(marks, ["10.0.0.130", "fd00::82"]);
}

#[test]
fn after_a_restart_no_address_handed_out_before_comes_back_first() {
    for subnet in ["10.0.0.0/24", "10.0.0.0/27"] {
        let (ipam, net) = loaded(&[subnet]);
        let mut handed = Vec::new();
        let mut on_disk = None;
        for i in 0..100 {
            let (addrs, marks) = allocate_and_release(&ipam, &net, &format!("p{i}"));
            handed.extend(addrs);
            on_disk = marks.last().copied().or(on_disk);
        }
        // The restart loads what was written: the last mark.
        let restarted = Ipam::new();
        let on_disk: Vec<IpAddr> = on_disk.into_iter().collect();
        restarted.load_network(&net, Vec::new(), &on_disk);
        let (next, _) = allocate_and_release(&restarted, &net, "again");
        // In the /27 every address was handed out: the next is the one handed out longest ago
        // of those the mark allows, never one of the last few.
        let recent = &handed[handed.len().saturating_sub(4)..];
        assert!(
            !recent.contains(&next[0]),
            "{subnet}: {} was handed out just before the restart",
            next[0]
        );
        if subnet.ends_with("/24") {
            assert!(
                !handed.contains(&next[0]),
                "{subnet}: {} was handed out before the restart",
                next[0]
            );
        }
    }
}

#[test]
fn a_forgotten_mark_is_written_again_with_the_next_allocation() {
    let (ipam, net) = loaded(&["10.0.0.0/24"]);
    let (_, first) = allocate_and_release(&ipam, &net, "a");
    let (_, second) = allocate_and_release(&ipam, &net, "b");
    assert_eq!((first.len(), second.len()), (1, 0));
    // An attach that failed may not have written its mark.
    ipam.forget_marks("n");
    let (addr, marks) = allocate_and_release(&ipam, &net, "c");
    assert_eq!(addr[0].to_string(), "10.0.0.4", "the cursor itself stays");
    assert_eq!(marks.len(), 1);
}

#[test]
fn a_reload_keeps_the_cursor_where_it_is() {
    let (ipam, net) = loaded(&["10.0.0.0/24"]);
    let (_, marks) = allocate_and_release(&ipam, &net, "a");
    // The configuration read again: the store's mark is ahead of the cursor, which stays.
    ipam.load_network(&net, Vec::new(), &marks);
    let (addr, marks) = allocate_and_release(&ipam, &net, "b");
    assert_eq!(addr[0].to_string(), "10.0.0.3");
    assert!(marks.is_empty(), "the mark on disk still holds: {marks:?}");
}

#[test]
fn a_mark_wraps_at_the_end_of_the_address_space() {
    let ipam = Ipam::new();
    let net = network(&["::/0"]);
    // The mark on disk: the scan resumes after it.
    let mark: IpAddr = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe"
        .parse()
        .expect("ip");
    ipam.load_network(&net, Vec::new(), &[mark]);
    let (addr, marks) = allocate_and_release(&ipam, &net, "a");
    assert_eq!(
        addr[0].to_string(),
        "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"
    );
    // 64 on from the last address: past the end, then 63 from the first host (::1).
    let marks: Vec<String> = marks.iter().map(ToString::to_string).collect();
    assert_eq!(marks, ["::40"]);
}
