//! Source-address guards end to end: a pod writes forged frames out of its interface with a
//! packet socket (what CAP_NET_RAW in a pod allows) — datagrams from another pod's IPv4 and
//! IPv6 address to a pod on its bridge and to the node, a frame from a forged MAC, a gratuitous
//! ARP and an unsolicited neighbour advertisement claiming another pod's address, a router
//! advertisement, a DHCP server's offer — and nobody receives them; its own address gets
//! through. The same run on a network with `antispoof = false` gets everything through, so the
//! guard is what stops it. In cluster mode, a datagram from another pod's address does not reach
//! a pod of another node either.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use testkit::cli::{knictl_exits, knictl_ok};
use testkit::cluster_node::{
    api_on_lan, knid_routes, node_spec, routes_to, start_cluster_node, Creds, POD_NETWORK,
};
use testkit::cni::tool_in;
use testkit::spoof::{self, link_local, SPOOF_WAIT};
use testkit::{parse_mac, TestNode, RPC};

const CONFIG: &str = r#"
[networks.default]
bridge = "knid0"
subnets = ["10.88.0.0/24", "fd00:88::/64"]

[networks.open]
bridge = "knid1"
subnets = ["10.89.0.0/24", "fd00:89::/64"]
antispoof = false
"#;

/// How long a change in the API may take to reach every node's kernel.
const CONVERGE: Duration = Duration::from_secs(30);

/// `knictl check`'s exit code when something differs.
const PROBLEMS: i32 = 5;

/// A pod on one network: its netns, host link, MAC and addresses.
struct Pod {
    netns: PathBuf,
    host_ifname: String,
    mac: [u8; 6],
    v4: Ipv4Addr,
    v6: Ipv6Addr,
}

impl Pod {
    fn ll(&self) -> Ipv6Addr {
        link_local(self.mac)
    }

    fn ip(&self, v6: bool) -> IpAddr {
        if v6 {
            self.v6.into()
        } else {
            self.v4.into()
        }
    }
}

fn attach(node: &TestNode, id: &str, network: &str) -> Pod {
    attach_in(node, id, network, node.netns(id))
}

/// [`attach`] in the netns at `netns`.
fn attach_in(node: &TestNode, id: &str, network: &str, netns: PathBuf) -> Pod {
    let mut req = node.attach_req(id, &netns, "eth0");
    req.interfaces[0].network = network.to_owned();
    let sandbox = node
        .client()
        .attach(&req, RPC)
        .unwrap_or_else(|e| panic!("Attach {id}: {e}"));
    let iface = &sandbox.interfaces[0];
    let addr = |v6: bool| {
        iface
            .ips
            .iter()
            .map(|c| c.address.parse::<ipnet::IpNet>().expect("CIDR").addr())
            .find(|a| a.is_ipv6() == v6)
            .expect("an address of each family")
    };
    let (IpAddr::V4(v4), IpAddr::V6(v6)) = (addr(false), addr(true)) else {
        unreachable!("families checked above")
    };
    Pod {
        netns,
        host_ifname: iface.host_ifname.clone(),
        mac: parse_mac(&iface.mac),
        v4,
        v6,
    }
}

/// What got through of each forgery (and whether the control with the pod's own identity did).
#[derive(Debug, Default, PartialEq, Eq)]
struct Through {
    own_to_pod: [bool; 2],
    own_to_node: [bool; 2],
    spoofed_to_pod: [bool; 2],
    spoofed_to_node: [bool; 2],
    own_mac: bool,
    forged_mac: bool,
    arp_on_pod: bool,
    arp_on_node: bool,
    na_on_pod: bool,
    na_on_node: bool,
    ra: bool,
    dhcp: bool,
}

/// Pods p1 (the forger), p2 (whose identity it borrows) and p3 (a bystander) on `network`
/// (bridge `bridge`, gateways `gw4` and `gw6` on the node); p1 tries every forgery.
fn forge_everything(node: &TestNode, network: &str, bridge: &str, gws: [IpAddr; 2]) -> Through {
    let p1 = attach(node, &format!("{network}-p1"), network);
    let p2 = attach(node, &format!("{network}-p2"), network);
    let p3 = attach(node, &format!("{network}-p3"), network);
    let host = node.host_path().to_path_buf();
    let bridge_mac = node.bridge(bridge).mac.expect("the bridge has a MAC");
    let out = spoof::wire(&p1.netns, "eth0");
    let mut through = Through::default();

    // Datagrams from p1's own and from p2's addresses, to p3 and to the node.
    for (i, v6) in [false, true].into_iter().enumerate() {
        let any: IpAddr = if v6 {
            Ipv6Addr::UNSPECIFIED.into()
        } else {
            Ipv4Addr::UNSPECIFIED.into()
        };
        let targets = [
            (&p3.netns, p3.ip(v6), p3.mac, 7001 + i as u16),
            (&host, gws[i], bridge_mac, 7101 + i as u16),
        ];
        for (t, (ns, dst, dst_mac, port)) in targets.into_iter().enumerate() {
            let listener = spoof::udp_listener(ns, SocketAddr::new(any, port));
            for (spoofed, src) in [(false, p1.ip(v6)), (true, p2.ip(v6))] {
                let marker = format!("{network}-{v6}-{t}-{spoofed}");
                let got = datagram_arrives(
                    &out,
                    [p1.mac, dst_mac],
                    src,
                    (&listener, SocketAddr::new(dst, port)),
                    &marker,
                );
                let slot = match (t, spoofed) {
                    (0, false) => &mut through.own_to_pod,
                    (0, true) => &mut through.spoofed_to_pod,
                    (_, false) => &mut through.own_to_node,
                    (_, true) => &mut through.spoofed_to_node,
                };
                slot[i] = got;
            }
        }
    }

    // A frame from a forged MAC, and from p1's own, to p3.
    let p3_wire = spoof::wire(&p3.netns, "eth0");
    for (forged, src) in [
        (false, p1.mac),
        (true, [0x02, 0xde, 0xad, 0xbe, 0xef, 0x01]),
    ] {
        let marker = format!("mac-{network}-{forged}");
        let frame = testkit::test_frame(p3.mac, src, marker.as_bytes());
        let got = spoof::delivered(&out, &frame, || {
            spoof::caught(&p3_wire, |f| {
                f.get(6..12) == Some(&src[..])
                    && f.windows(marker.len()).any(|w| w == marker.as_bytes())
            })
        });
        if forged {
            through.forged_mac = got;
        } else {
            through.own_mac = got;
        }
    }

    // Neighbour entries for p2 on p3 and on the node, then p1 claims p2's addresses.
    for ns in [&p3.netns, &host] {
        for v6 in [false, true] {
            learn_neighbour(ns, p2.ip(v6), &p2);
        }
    }
    // Past the kernel's locktime (1 s), an existing entry may be overridden.
    std::thread::sleep(Duration::from_millis(1200));
    spoof::send(&out, &spoof::gratuitous_arp(p1.mac, p2.v4));
    spoof::send(&out, &spoof::unsolicited_na(p1.mac, p1.ll(), p2.v6));
    std::thread::sleep(SPOOF_WAIT / 3);
    let p1_mac = spoof::mac_text(p1.mac);
    let claimed =
        |ns: &PathBuf, ip: IpAddr| spoof::neighbour_mac(ns, ip).as_deref() == Some(&p1_mac);
    through.arp_on_pod = claimed(&p3.netns, p2.v4.into());
    through.arp_on_node = claimed(&host, p2.v4.into());
    through.na_on_pod = claimed(&p3.netns, p2.v6.into());
    through.na_on_node = claimed(&host, p2.v6.into());

    // A router advertisement and a DHCP offer: does p3 or the node see either?
    let node_wire = spoof::wire(&host, bridge);
    let ra = spoof::router_advertisement(p1.mac, p1.ll());
    let is_ra = |f: &[u8]| f.get(6..12) == Some(&p1.mac[..]) && f.get(54) == Some(&134);
    through.ra = spoof::delivered(&out, &ra, || {
        spoof::caught(&p3_wire, is_ra) || spoof::caught(&node_wire, is_ra)
    });
    let marker = format!("dhcp-{network}");
    let on_pod = spoof::udp_listener(&p3.netns, "0.0.0.0:68".parse().expect("address"));
    let on_node = spoof::udp_listener(&host, "0.0.0.0:68".parse().expect("address"));
    let offer = spoof::dhcp_offer(p1.mac, p1.v4, p3.v4, marker.as_bytes());
    through.dhcp = spoof::delivered(&out, &offer, || {
        spoof::received_from(&on_pod, marker.as_bytes()).is_some()
            || spoof::received_from(&on_node, marker.as_bytes()).is_some()
    });
    println!("{network}: {through:?}");
    through
}

/// Whether a UDP datagram carrying `marker`, written on `out` from `macs[0]` to `macs[1]` with
/// source address `src`, reaches `listener` (bound to the destination `to`'s port).
fn datagram_arrives(
    out: &std::os::fd::OwnedFd,
    macs: [[u8; 6]; 2],
    src: IpAddr,
    (listener, to): (&std::net::UdpSocket, SocketAddr),
    marker: &str,
) -> bool {
    let frame = spoof::udp_frame(
        macs[0],
        macs[1],
        SocketAddr::new(src, 4000),
        to,
        marker.as_bytes(),
    );
    spoof::delivered(out, &frame, || {
        spoof::received_from(listener, marker.as_bytes()).is_some()
    })
}

/// Makes netns `ns` resolve `ip` (pod `owner`'s) with a datagram to it, and waits for the entry.
fn learn_neighbour(ns: &Path, ip: IpAddr, owner: &Pod) {
    let any: SocketAddr = if ip.is_ipv6() {
        "[::]:0".parse().expect("address")
    } else {
        "0.0.0.0:0".parse().expect("address")
    };
    let socket = spoof::udp_listener(ns, any);
    let want = spoof::mac_text(owner.mac);
    testkit::wait_for(
        &format!("a neighbour entry for {ip}"),
        SPOOF_WAIT * 3,
        || {
            let _ = socket.send_to(b"hello", SocketAddr::new(ip, 9));
            std::thread::sleep(Duration::from_millis(100));
            spoof::neighbour_mac(ns, ip).as_deref() == Some(&want)
        },
    );
}

/// Every forgery on the default network (`knid0`) of `node` from p1 is stopped; p1's own
/// addresses and MAC get through.
fn only_own_identity_gets_through(node: &TestNode) {
    let through = forge_everything(
        node,
        "default",
        "knid0",
        [
            "10.88.0.1".parse().expect("ip"),
            "fd00:88::1".parse().expect("ip"),
        ],
    );
    assert_eq!(
        through,
        Through {
            own_to_pod: [true, true],
            own_to_node: [true, true],
            own_mac: true,
            ..Through::default()
        },
        "only p1's own identity gets through"
    );
}

#[test]
fn a_pod_speaks_only_with_its_own_mac_and_addresses() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start(CONFIG);
    only_own_identity_gets_through(&node);
    // Every reason counted.
    for reason in ["mac", "ip", "arp", "nd", "router", "dhcp"] {
        assert!(
            spoof::dropped(&node, reason) > 0,
            "no {reason} drop counted"
        );
    }
}

#[test]
fn on_a_kernel_that_cannot_hook_a_missing_device_each_guard_follows_its_link_and_holds() {
    if !testkit::privileged() || !testkit::failpoints_built() {
        return;
    }
    // The probe fails as on a kernel before 6.16: each guard goes in right after its link.
    let node = TestNode::start_with(CONFIG, &[("KNID_FAILPOINTS", "antispoof.probe=error")], &[]);
    only_own_identity_gets_through(&node);
    assert!(
        node.log_text().contains("right after its link is created"),
        "{}",
        node.log_text()
    );
}

#[test]
fn with_antispoof_off_the_same_forgeries_get_through() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start(CONFIG);
    let through = forge_everything(
        &node,
        "open",
        "knid1",
        [
            "10.89.0.1".parse().expect("ip"),
            "fd00:89::1".parse().expect("ip"),
        ],
    );
    assert_eq!(
        through,
        Through {
            own_to_pod: [true, true],
            own_to_node: [true, true],
            spoofed_to_pod: [true, true],
            spoofed_to_node: [true, true],
            own_mac: true,
            forged_mac: true,
            arp_on_pod: true,
            arp_on_node: true,
            na_on_pod: true,
            na_on_node: true,
            ra: true,
            dhcp: true,
        },
        "without the guard every forgery gets through"
    );
}

#[test]
fn a_guard_deleted_behind_knids_back_is_reported_by_check_and_restored_by_setup() {
    if !testkit::privileged() {
        return;
    }
    // The reconciler looks every 200 ms.
    let node = TestNode::start(&format!("gc_interval = \"200ms\"\n{CONFIG}"));
    let guarded = attach(&node, "guarded", "default");
    let open = attach(&node, "open", "open");
    // Its table among knid's guard tables (`knid-NN`), fixed by the host link's name.
    let table = knid_netops::nft::guard_table("knid", &guarded.host_ifname);
    assert!(
        node.guard_chains("knid")
            .iter()
            .any(|c| c.name == guarded.host_ifname && c.table == table),
        "the guard of {} in {table}",
        guarded.host_ifname
    );
    let chains = || {
        tool_in(
            node.host_path(),
            "nft",
            &["list", "table", "netdev", &table],
        )
    };
    let listing = chains();
    assert!(
        listing.contains(&format!("chain {} {{", guarded.host_ifname))
            && listing.contains(&format!("device \"{}\"", guarded.host_ifname)),
        "{listing}"
    );
    assert!(!listing.contains(&open.host_ifname), "{listing}");
    assert_eq!(
        knictl_ok(&node, &["check", "guarded"]).trim(),
        "guarded: ok"
    );
    tool_in(
        node.host_path(),
        "nft",
        &["delete", "chain", "netdev", &table, &guarded.host_ifname],
    );
    let out = knictl_exits(&node, PROBLEMS, &["check", "guarded"]);
    assert!(
        out.contains("guarded: differs") && out.contains("has no source guard"),
        "check: {out}"
    );
    // The reconciler reports it too: the condition, the metric, doctor.
    testkit::wait_for("the reconciler to report the guard", CONVERGE, || {
        let c = node.condition("PodInterfacesReady");
        !c.status && c.message.contains("has no source guard")
    });
    let metrics = knictl_ok(&node, &["metrics", "knid_pod_interfaces_changed"]);
    assert!(
        metrics.contains("knid_pod_interfaces_changed{difference=\"antispoof\"} 1"),
        "{metrics}"
    );
    let doctor = testkit::cli::knictl(&node, &["doctor"]);
    let doctor = String::from_utf8_lossy(&doctor.stdout);
    assert!(doctor.contains("has no source guard"), "doctor: {doctor}");
    knictl_ok(&node, &["setup-node-network"]);
    assert_eq!(
        knictl_ok(&node, &["check", "guarded"]).trim(),
        "guarded: ok"
    );
    testkit::wait_for("the reconciler to clear it", CONVERGE, || {
        node.condition("PodInterfacesReady").status
    });
    // Detached: the guard goes once the reaper has deleted the link.
    node.client()
        .detach(&testkit::detach_req("guarded"), RPC)
        .expect("Detach");
    testkit::wait_for("the reaper to remove the guard", CONVERGE, || {
        !chains().contains(&guarded.host_ifname)
    });
}

/// What happens to the guards while knid is down is put right by its start before it serves:
/// the chains its start lists (on a thread of their own, while recovery runs) are the kernel's
/// as they are at that start, not as knid left them.
#[test]
fn guards_changed_while_knid_was_down_are_put_right_by_its_start() {
    if !testkit::privileged() {
        return;
    }
    let mut node = TestNode::start(CONFIG);
    let kept = attach(&node, "kept", "default");
    let lost = attach(&node, "lost", "default");
    let before = guard_summaries(&node);
    let names: Vec<&str> = before.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names.len(), 2, "{before:?}");
    assert!(
        names.contains(&kept.host_ifname.as_str()) && names.contains(&lost.host_ifname.as_str()),
        "{before:?}"
    );
    let status = node.stop();
    assert!(status.success(), "knid exit status {status}");
    // The guard of one pod deleted, and a chain of knid's name form that no pod has added.
    let nft = |args: &[&str]| tool_in(node.host_path(), "nft", args);
    let lost_table = knid_netops::nft::guard_table("knid", &lost.host_ifname);
    nft(&["delete", "chain", "netdev", &lost_table, &lost.host_ifname]);
    let stray = "kn0123456789";
    let stray_table = knid_netops::nft::guard_table("knid", stray);
    nft(&["add", "table", "netdev", &stray_table]);
    nft(&["add", "chain", "netdev", &stray_table, stray]);
    let changed: Vec<String> = node
        .guard_chains("knid")
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert!(
        changed.contains(&stray.to_owned()) && !changed.contains(&lost.host_ifname),
        "{changed:?}"
    );
    node.restart();
    assert_eq!(
        guard_summaries(&node),
        before,
        "the guards once knid serves"
    );
    for id in ["kept", "lost"] {
        assert_eq!(knictl_ok(&node, &["check", id]).trim(), format!("{id}: ok"));
    }
}

/// The guards' (device, summary) in the host netns, by chain name.
fn guard_summaries(node: &TestNode) -> Vec<(String, String)> {
    node.guard_chains("knid")
        .into_iter()
        .map(|c| (c.name, c.summary))
        .collect()
}

#[test]
fn a_reattach_keeps_its_guard_when_the_reaper_deletes_the_old_link() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start(CONFIG);
    let first = attach(&node, "again", "default");
    let first_guard = guard_summaries(&node);
    assert_eq!(first_guard.len(), 1, "{first_guard:?}");
    node.client()
        .detach(&testkit::detach_req("again"), RPC)
        .expect("Detach");
    // At once, before the reaper's round (it gathers for up to 250 ms): the same sandbox and
    // interface, so the same host link name and guard chain name; the attach takes the old
    // attachment over, and the reaper later finds its record forgotten.
    let second = attach_in(&node, "again", "default", first.netns.clone());
    assert_eq!(
        second.host_ifname, first.host_ifname,
        "a deterministic name"
    );
    assert_ne!(second.mac, first.mac, "a new MAC, so a new guard");
    // Past the reaper's round over the old link: its removal must not take the new guard.
    testkit::wait_for("the reaper's round", CONVERGE, || {
        let metrics = knictl_ok(&node, &["metrics", "knid_reaper_batch_size_count"]);
        metrics
            .lines()
            .filter_map(|l| l.strip_prefix("knid_reaper_batch_size_count "))
            .any(|n| n.trim().parse::<f64>().is_ok_and(|n| n >= 1.0))
    });
    let guards = guard_summaries(&node);
    assert_eq!(guards.len(), 1, "{guards:?}");
    assert_eq!(guards[0].0, second.host_ifname);
    assert_ne!(
        guards[0], first_guard[0],
        "the second attach's guard, not the first's"
    );
    assert_eq!(
        knictl_ok(&node, &["check", "again"]).trim(),
        "again: ok",
        "Check finds the guard the attach installed"
    );
    node.client()
        .detach(&testkit::detach_req("again"), RPC)
        .expect("Detach");
    testkit::wait_for("the reaper to remove the guard", CONVERGE, || {
        guard_summaries(&node).is_empty()
    });
    assert!(
        node.host_rtnl()
            .link_by_name(&second.host_ifname)
            .expect("look up the host link")
            .is_none(),
        "the host link outlived its guard"
    );
}

#[test]
fn pods_attached_at_once_each_get_their_own_guard() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start(CONFIG);
    // Attaches that wait for one guard's transaction share the next (one validation of the
    // table for all): each pod's guard must still be its own, and none missing.
    let pods: Vec<(String, Pod)> = std::thread::scope(|scope| {
        let attaches: Vec<_> = (0..12)
            .map(|i| {
                let node = &node;
                scope.spawn(move || {
                    let id = format!("burst-{i}");
                    let pod = attach(node, &id, "default");
                    (id, pod)
                })
            })
            .collect();
        attaches
            .into_iter()
            .map(|a| a.join().expect("attach thread"))
            .collect()
    });
    let guards = guard_summaries(&node);
    assert_eq!(guards.len(), pods.len(), "{guards:?}");
    for (_, pod) in &pods {
        let mac = pod
            .mac
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":");
        let (_, summary) = guards
            .iter()
            .find(|(name, _)| *name == pod.host_ifname)
            .unwrap_or_else(|| panic!("no guard for {}: {guards:?}", pod.host_ifname));
        let mut allows: Vec<&str> = summary.split(' ').collect();
        allows.sort_unstable();
        let mut own = vec![mac.clone(), pod.v4.to_string(), pod.v6.to_string()];
        own.sort_unstable();
        assert_eq!(allows, own, "the guard of {}", pod.host_ifname);
    }
    for (id, _) in &pods {
        assert_eq!(
            knictl_ok(&node, &["check", id]).trim(),
            format!("{id}: ok"),
            "Check finds the guard of {id}"
        );
    }
}

#[test]
fn a_pod_cannot_reach_a_pod_of_another_node_with_a_borrowed_address() {
    if !testkit::privileged() {
        return;
    }
    let (lan, _api_dir, api, _port) = api_on_lan();
    api.add_node(node_spec("node-a", 1));
    api.add_node(node_spec("node-b", 2));
    let a = start_cluster_node(&lan, &api, "node-a", 1, Creds::InCluster);
    let b = start_cluster_node(&lan, &api, "node-b", 2, Creds::InCluster);
    for (node, peer) in [(&a, 2), (&b, 1)] {
        testkit::wait_for(
            "the pod CIDR and the route to the other node",
            CONVERGE,
            || {
                node.condition("PodCIDR").status
                    && knid_routes(node.host_path()) == routes_to(&[peer])
            },
        );
    }
    let p1 = attach(&a, "p1", POD_NETWORK);
    let p2 = attach(&a, "p2", POD_NETWORK);
    let q = attach(&b, "q", POD_NETWORK);
    let gateway_mac = a.bridge("kpod0").mac.expect("the bridge has a MAC");
    let out = spoof::wire(&p1.netns, "eth0");
    for v6 in [false, true] {
        let any: IpAddr = if v6 {
            Ipv6Addr::UNSPECIFIED.into()
        } else {
            Ipv4Addr::UNSPECIFIED.into()
        };
        let listener = spoof::udp_listener(&q.netns, SocketAddr::new(any, 7201));
        let to = SocketAddr::new(q.ip(v6), 7201);
        let own = datagram_arrives(
            &out,
            [p1.mac, gateway_mac],
            p1.ip(v6),
            (&listener, to),
            &format!("own-{v6}"),
        );
        assert!(own, "p1's own datagram to q on node-b (IPv6 {v6})");
        let before = spoof::dropped(&a, "ip");
        let borrowed = datagram_arrives(
            &out,
            [p1.mac, gateway_mac],
            p2.ip(v6),
            (&listener, to),
            &format!("borrowed-{v6}"),
        );
        assert!(
            !borrowed,
            "a datagram from p2's address reached q on node-b (IPv6 {v6})"
        );
        assert!(
            spoof::dropped(&a, "ip") > before,
            "node-a's guard counted no drop (IPv6 {v6})"
        );
    }
}

#[test]
fn only_the_guards_of_pods_on_guarding_networks_are_removed_after_their_detach() {
    if !testkit::privileged() {
        return;
    }
    let node = TestNode::start(CONFIG);
    let guarded = attach(&node, "guarded", "default");
    let open = attach(&node, "unguarded", "open");
    for id in ["guarded", "unguarded"] {
        node.client()
            .detach(&testkit::detach_req(id), RPC)
            .unwrap_or_else(|e| panic!("Detach {id}: {e}"));
    }
    // Both reaped, in one round or two: a round's line comes after its guards step.
    testkit::wait_for(
        "the reaper's rounds over both links",
        testkit::SETTLE,
        || reaped_links(&node.log_text()) >= 2,
    );
    let guarded_now = node.guards();
    assert!(
        !guarded_now
            .iter()
            .any(|(_, device)| *device == guarded.host_ifname),
        "the guarded pod's guard outlived its link: {guarded_now:?}"
    );
    let removals: Vec<String> = node
        .log_text()
        .lines()
        .filter(|l| l.contains("antispoof: removing the guards of "))
        .map(str::to_owned)
        .collect();
    assert!(
        removals.iter().any(|l| l.contains(&guarded.host_ifname)),
        "the guarded pod's guard was not removed: {removals:?}"
    );
    // Its network never guarded it: the kernel is not asked to remove a guard it never had.
    assert!(
        removals.iter().all(|l| !l.contains(&open.host_ifname)),
        "a guard removal asked for the unguarded pod: {removals:?}"
    );
}

/// Links the reaper's rounds in `log` said were gone (its debug line `reaper: N link(s) gone`).
fn reaped_links(log: &str) -> usize {
    log.lines()
        .filter_map(|l| {
            l.split("reaper: ")
                .nth(1)?
                .split(" link(s) gone")
                .next()?
                .parse::<usize>()
                .ok()
        })
        .sum()
}
