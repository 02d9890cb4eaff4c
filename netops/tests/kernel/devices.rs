//! Dummies, macvlan / ipvlan children, moves between namespaces, renames, static neighbours.

use std::io::{self, Write};
use std::net::IpAddr;
use std::sync::Once;

use ipnet::IpNet;
use knid_netops::{
    ChildKind, ChildSpec, IpvlanMode, Link, MacvlanMode, NetnsHandle, Rtnl, VethEnd, VethSpec,
};

use crate::common::{in_private_netns, new_netns, rtnl};

fn skip(why: &str) {
    // Straight to stderr: eprintln! would be swallowed by the harness for a passing test.
    let _ = writeln!(io::stderr(), "!!! SKIPPED {why}");
}

fn veth(rt: &mut Rtnl, a: &str, b: &str, mtu: Option<u32>) {
    let end = |name: &str| VethEnd {
        name: name.into(),
        mtu,
        mac: None,
    };
    let spec = VethSpec {
        host: end(a),
        peer: end(b),
        peer_netns: None,
        host_controller: None,
    };
    rt.create_veth(&spec).expect("create veth");
}

/// A stand-in for a host NIC: a dummy, or a veth end on kernels built without CONFIG_DUMMY
/// (the kernel answers EOPNOTSUPP, "Unknown device type").
fn host_device(rt: &mut Rtnl, name: &str, mtu: Option<u32>) -> Link {
    match rt.create_dummy(name, mtu) {
        Ok(()) => {
            let link = rt
                .link_by_name(name)
                .expect("get dummy")
                .expect("dummy exists");
            assert_eq!(link.kind.as_deref(), Some("dummy"));
            link
        }
        Err(e) if e.errno() == Some(libc::EOPNOTSUPP) => {
            static ONCE: Once = Once::new();
            ONCE.call_once(|| {
                skip("create_dummy against the kernel: no CONFIG_DUMMY; veth ends stand in")
            });
            veth(rt, name, &format!("{name}p"), mtu);
            rt.link_by_name(name)
                .expect("get veth")
                .expect("veth exists")
        }
        Err(e) => panic!("create dummy {name}: {e:?}"),
    }
}

fn child(name: &str, parent: u32, kind: ChildKind) -> ChildSpec {
    ChildSpec {
        name: name.into(),
        parent,
        kind,
        mtu: None,
        mac: None,
    }
}

fn extack_of(e: &knid_netops::Error) -> Option<&str> {
    match e {
        knid_netops::Error::Netlink { extack, .. } => extack.as_deref(),
        _ => None,
    }
}

#[test]
fn macvlan_children_in_every_mode_report_kind_mode_and_parent() {
    in_private_netns("macvlan_children_in_every_mode", || {
        let mut rt = rtnl();
        let parent = host_device(&mut rt, "kpar0", Some(1500));
        let modes = [
            ("kmvpr", MacvlanMode::Private),
            ("kmvve", MacvlanMode::Vepa),
            ("kmvbr", MacvlanMode::Bridge),
        ];
        for (i, (name, mode)) in modes.into_iter().enumerate() {
            let mac = [0x02, 0x6b, 0, 0, 0, i as u8 + 1];
            let spec = ChildSpec {
                mtu: Some(1400),
                mac: Some(mac),
                ..child(name, parent.index, ChildKind::Macvlan(mode))
            };
            rt.create_child(&spec).expect("create macvlan");
            let got = rt.link_by_name(name).unwrap().expect("child exists");
            assert_eq!(got.kind.as_deref(), Some("macvlan"));
            assert_eq!(got.macvlan_mode, Some(mode));
            assert_eq!(got.ipvlan_mode, None);
            assert_eq!(got.parent, Some(parent.index));
            assert_eq!((got.mtu, got.mac, got.up), (1400, Some(mac), false));
            let again = rt.create_child(&spec).expect_err("second create");
            assert!(again.is_exists(), "{again:?}");
        }
        // A parent with other macvlans cannot take a passthru one.
        let err = rt
            .create_child(&child(
                "kmvpt",
                parent.index,
                ChildKind::Macvlan(MacvlanMode::Passthru),
            ))
            .expect_err("passthru beside others");
        assert_eq!(err.errno(), Some(libc::EINVAL), "{err:?}");

        // Passthru: the only child of its parent, with the parent's MAC.
        let lone = host_device(&mut rt, "kpar1", None);
        let passthru = child(
            "kmvpt",
            lone.index,
            ChildKind::Macvlan(MacvlanMode::Passthru),
        );
        rt.create_child(&passthru)
            .expect("passthru on a fresh parent");
        let got = rt.link_by_name("kmvpt").unwrap().expect("passthru child");
        assert_eq!(got.macvlan_mode, Some(MacvlanMode::Passthru));
        assert_eq!(got.parent, Some(lone.index));
        assert_eq!(got.mac, lone.mac, "passthru takes the parent's mac");
        for (name, mode) in [
            ("kmvp2", MacvlanMode::Passthru),
            ("kmvb2", MacvlanMode::Bridge),
        ] {
            let err = rt
                .create_child(&child(name, lone.index, ChildKind::Macvlan(mode)))
                .expect_err("a second child of a passthru parent");
            assert_eq!(err.errno(), Some(libc::EINVAL), "{mode:?}: {err:?}");
        }
        // A MAC the kernel would silently drop is refused before anything is sent.
        let with_mac = ChildSpec {
            mac: Some([0x02, 0, 0, 0, 0, 9]),
            ..child(
                "kmvpx",
                lone.index,
                ChildKind::Macvlan(MacvlanMode::Passthru),
            )
        };
        let err = rt.create_child(&with_mac).expect_err("passthru with a mac");
        assert!(
            matches!(&err, knid_netops::Error::Io { source, .. } if source.kind() == io::ErrorKind::InvalidInput),
            "{err:?}"
        );
        assert_eq!(rt.link_by_name("kmvpx").unwrap(), None);

        // A bridge port's rx handler is taken: it cannot be a parent.
        rt.create_bridge("kbrp", None).unwrap();
        let br = rt.link_by_name("kbrp").unwrap().unwrap();
        veth(&mut rt, "kport0", "kport1", None);
        let port = rt.link_by_name("kport0").unwrap().unwrap();
        rt.set_controller(port.index, Some(br.index)).unwrap();
        let err = rt
            .create_child(&child(
                "kmvport",
                port.index,
                ChildKind::Macvlan(MacvlanMode::Bridge),
            ))
            .expect_err("macvlan on a bridge port");
        assert_eq!(err.errno(), Some(libc::EBUSY), "{err:?}");
        assert!(rt.delete_link(port.index).unwrap());
        assert!(rt.delete_link(br.index).unwrap());

        // Children go with their parent.
        assert!(rt.delete_link(parent.index).unwrap());
        assert!(rt.delete_link(lone.index).unwrap());
        let left: Vec<String> = rt.links().unwrap().into_iter().map(|l| l.name).collect();
        assert!(
            left.iter().all(|n| !n.starts_with("kmv")),
            "children left: {left:?}"
        );
    });
}

#[test]
fn ipvlan_children_in_l2_and_l3_share_the_parent_mac() {
    in_private_netns("ipvlan_children_in_l2_and_l3", || {
        let mut rt = rtnl();
        // The mode belongs to the parent (the ipvlan port): one parent per mode.
        for (i, mode) in [IpvlanMode::L2, IpvlanMode::L3].into_iter().enumerate() {
            let parent = host_device(&mut rt, &format!("kipp{i}"), Some(1500));
            let name = format!("kipv{i}");
            let spec = ChildSpec {
                mtu: Some(1400),
                ..child(&name, parent.index, ChildKind::Ipvlan(mode))
            };
            match rt.create_child(&spec) {
                Ok(()) => {}
                Err(e) if e.errno() == Some(libc::EOPNOTSUPP) => {
                    assert!(
                        extack_of(&e).is_some_and(|m| m.contains("Unknown device type")),
                        "{e:?}"
                    );
                    skip("ipvlan_children_in_l2_and_l3: no ipvlan in this kernel (CONFIG_IPVLAN)");
                    return;
                }
                Err(e) => panic!("create ipvlan {mode:?}: {e:?}"),
            }
            let got = rt.link_by_name(&name).unwrap().expect("ipvlan exists");
            assert_eq!(got.kind.as_deref(), Some("ipvlan"));
            assert_eq!(got.ipvlan_mode, Some(mode));
            assert_eq!(got.macvlan_mode, None);
            assert_eq!(got.parent, Some(parent.index));
            assert_eq!((got.mtu, got.mac), (1400, parent.mac));
            assert!(rt.delete_link(parent.index).unwrap());
            assert_eq!(
                rt.link_by_name(&name).unwrap(),
                None,
                "goes with its parent"
            );
        }
    });
}

#[test]
fn child_moved_and_renamed_in_one_request_keeps_kind_and_mode() {
    in_private_netns("child_moved_and_renamed_in_one_request", || {
        let mut host = rtnl();
        let parent = host_device(&mut host, "kpar2", None);
        let spec = child("kmv2", parent.index, ChildKind::Macvlan(MacvlanMode::Vepa));
        host.create_child(&spec).unwrap();
        let mv = host.link_by_name("kmv2").unwrap().unwrap();
        host.set_up(mv.index).unwrap();

        let pod_ns = new_netns();
        host.move_to_netns(mv.index, &pod_ns, Some("eth1"))
            .expect("move and rename");
        assert_eq!(host.link_by_name("kmv2").unwrap(), None, "left the host");
        assert_eq!(host.link_by_index(mv.index).unwrap(), None);

        let mut pod = Rtnl::open_in(&pod_ns).unwrap();
        let got = pod
            .link_by_name("eth1")
            .unwrap()
            .expect("renamed in the pod");
        assert_eq!(got.kind.as_deref(), Some("macvlan"));
        assert_eq!(got.macvlan_mode, Some(MacvlanMode::Vepa));
        assert_eq!(got.mac, mv.mac);
        assert!(!got.up, "a move takes the link down");
        assert_eq!(got.parent, None, "the parent is in another netns");
        assert_eq!(pod.link_by_name("kpar2").unwrap(), None);
        assert_eq!(pod.link_by_name("kmv2").unwrap(), None);
        pod.set_up(got.index).expect("usable in the pod");

        // Current name taken in the target: the kernel takes the new name instead, atomically.
        veth(&mut pod, "kmv3", "kmv3p", None);
        host.create_child(&child(
            "kmv3",
            parent.index,
            ChildKind::Macvlan(MacvlanMode::Bridge),
        ))
        .unwrap();
        let mv3 = host.link_by_name("kmv3").unwrap().unwrap();
        host.move_to_netns(mv3.index, &pod_ns, Some("eth3"))
            .unwrap();
        let got = pod.link_by_name("eth3").unwrap().expect("eth3 in the pod");
        assert_eq!(got.macvlan_mode, Some(MacvlanMode::Bridge));

        // New name taken, current one free: moved, but not renamed; the error says so.
        host.create_child(&child(
            "kmv4",
            parent.index,
            ChildKind::Macvlan(MacvlanMode::Bridge),
        ))
        .unwrap();
        let mv4 = host.link_by_name("kmv4").unwrap().unwrap();
        let err = host
            .move_to_netns(mv4.index, &pod_ns, Some("eth1"))
            .expect_err("eth1 is taken in the pod");
        assert!(err.is_exists(), "{err:?}");
        assert!(
            extack_of(&err).is_some_and(|m| m.contains("old name")),
            "{err:?}"
        );
        let stray = pod.link_by_name("kmv4").unwrap().expect("kmv4 in the pod");
        assert_eq!(stray.kind.as_deref(), Some("macvlan"));
        assert!(pod.delete_link(stray.index).unwrap());

        // Both names taken: refused before anything moves.
        host.create_child(&child(
            "kmv3",
            parent.index,
            ChildKind::Macvlan(MacvlanMode::Bridge),
        ))
        .unwrap();
        let mv5 = host.link_by_name("kmv3").unwrap().unwrap();
        let err = host
            .move_to_netns(mv5.index, &pod_ns, Some("eth1"))
            .expect_err("both names taken");
        assert!(err.is_exists(), "{err:?}");
        assert!(
            extack_of(&err).is_some_and(|m| !m.contains("old name")),
            "the kernel's own text, not ours: {err:?}"
        );
        assert!(
            host.link_by_index(mv5.index).unwrap().is_some(),
            "still here"
        );

        // Without a new name the link keeps its own.
        host.move_to_netns(mv5.index, &NetnsHandle::current_thread().unwrap(), None)
            .expect("a move into its own netns is a no-op");
        pod.delete_link_by_name("kmv3").unwrap();
        host.move_to_netns(mv5.index, &pod_ns, None).unwrap();
        assert!(pod.link_by_name("kmv3").unwrap().is_some());

        assert!(host.delete_link(parent.index).unwrap());
        for name in ["eth1", "eth3", "kmv3"] {
            assert_eq!(
                pod.link_by_name(name).unwrap(),
                None,
                "{name} went with its parent"
            );
        }
    });
}

fn net(s: &str) -> IpNet {
    s.parse().expect("cidr")
}

#[test]
fn device_moved_out_and_back_keeps_name_mtu_and_mac_but_not_addresses() {
    in_private_netns("device_moved_out_and_back", || {
        let mut host = rtnl();
        let host_ns = NetnsHandle::current_thread().unwrap();
        let dev = host_device(&mut host, "kdev0", Some(9000));
        host.add_address(dev.index, net("10.77.0.2/24")).unwrap();
        host.add_address(dev.index, net("fd00:77::2/64")).unwrap();
        host.set_up(dev.index).unwrap();

        let pod_ns = new_netns();
        host.move_to_netns(dev.index, &pod_ns, Some("eth0"))
            .unwrap();
        let mut pod = Rtnl::open_in(&pod_ns).unwrap();
        let inside = pod.link_by_name("eth0").unwrap().expect("in the pod");
        assert_eq!((inside.mtu, inside.mac, inside.up), (9000, dev.mac, false));
        assert_eq!(inside.kind, dev.kind);
        assert!(
            pod.addresses(Some(inside.index)).unwrap().is_empty(),
            "a move drops every address"
        );

        pod.move_to_netns(inside.index, &host_ns, Some("kdev0"))
            .expect("move back under the original name");
        assert_eq!(pod.link_by_name("eth0").unwrap(), None);
        let back = host
            .link_by_name("kdev0")
            .unwrap()
            .expect("back on the host");
        assert_eq!((back.mtu, back.mac, back.up), (9000, dev.mac, false));
        assert!(host.addresses(Some(back.index)).unwrap().is_empty());
        assert!(host.delete_link(back.index).unwrap());
    });
}

#[test]
fn rename_changes_the_name_and_keeps_the_index() {
    in_private_netns("rename_changes_the_name", || {
        let mut rt = rtnl();
        veth(&mut rt, "krn0", "krn1", None);
        let a = rt.link_by_name("krn0").unwrap().unwrap();
        rt.rename(a.index, "krn2").expect("rename a down link");
        assert_eq!(rt.link_by_name("krn0").unwrap(), None);
        let got = rt.link_by_name("krn2").unwrap().expect("new name");
        assert_eq!(got.index, a.index);

        let err = rt.rename(a.index, "krn1").expect_err("name taken");
        assert!(err.is_exists(), "{err:?}");
        let err = rt.rename(9_999, "krn9").expect_err("no such link");
        assert!(err.is_not_found(), "{err:?}");

        // Linux 6.2 renames links that are up; older kernels refuse with EBUSY, explained.
        rt.set_up(a.index).unwrap();
        match rt.rename(a.index, "krn3") {
            Ok(()) => assert!(rt.link_by_name("krn3").unwrap().is_some_and(|l| l.up)),
            Err(e) => {
                assert_eq!(e.errno(), Some(libc::EBUSY), "{e:?}");
                assert!(extack_of(&e).is_some_and(|m| m.contains("down")), "{e:?}");
            }
        }
        assert!(rt.delete_link(a.index).unwrap());
    });
}

#[test]
fn static_neighbours_v4_and_v6_are_added_listed_replaced_and_deleted() {
    in_private_netns("static_neighbours", || {
        let mut rt = rtnl();
        veth(&mut rt, "kne0", "kne1", None);
        let a = rt.link_by_name("kne0").unwrap().unwrap();
        let b = rt.link_by_name("kne1").unwrap().unwrap();
        rt.set_up(a.index).unwrap();
        rt.set_up(b.index).unwrap();
        let v4: IpAddr = "10.66.0.9".parse().unwrap();
        let v6: IpAddr = "fd00:66::9".parse().unwrap();
        let mac = [0x02, 0x6e, 0, 0, 0, 9];
        let other = [0x02, 0x6e, 0, 0, 0, 10];

        for ip in [v4, v6] {
            rt.add_neighbour(a.index, ip, mac).expect("add");
            // On the peer too, which a's listing must not show.
            rt.add_neighbour(b.index, ip, other)
                .expect("add on the peer");
        }
        let entries = |rt: &mut Rtnl, ip: IpAddr| {
            let listed = rt.neighbours(a.index, ip.is_ipv6()).expect("dump");
            assert!(listed.iter().all(|n| n.index == a.index), "{listed:?}");
            assert!(
                listed.iter().all(|n| n.ip.is_ipv6() == ip.is_ipv6()),
                "one family: {listed:?}"
            );
            listed
                .into_iter()
                .filter(|n| n.ip == ip)
                .collect::<Vec<_>>()
        };
        for ip in [v4, v6] {
            let got = entries(&mut rt, ip);
            assert_eq!(got.len(), 1, "{ip}: {got:?}");
            assert_eq!((got[0].mac, got[0].permanent), (Some(mac), true), "{ip}");

            rt.add_neighbour(a.index, ip, other).expect("replace");
            let got = entries(&mut rt, ip);
            assert_eq!(got.len(), 1, "{ip} replaced, not added: {got:?}");
            assert_eq!((got[0].mac, got[0].permanent), (Some(other), true));

            assert!(rt.delete_neighbour(a.index, ip).expect("delete"));
            assert!(!rt.delete_neighbour(a.index, ip).expect("delete again"));
            assert!(entries(&mut rt, ip).is_empty(), "{ip} gone");
            let peer = rt.neighbours(b.index, ip.is_ipv6()).unwrap();
            assert!(peer.iter().any(|n| n.ip == ip), "the peer's entry stays");
        }

        let err = rt.add_neighbour(9_999, v4, mac).expect_err("no such link");
        assert!(err.is_not_found(), "{err:?}");
        assert!(rt.delete_link(a.index).unwrap());
        assert!(rt.neighbours(a.index, false).unwrap().is_empty());
    });
}

/// A bridge's own `nf_call_iptables` / `nf_call_ip6tables`, as `ip -d link` reads them back.
#[test]
fn a_bridge_hands_its_forwarded_frames_to_nftables_when_told() {
    in_private_netns("bridge netfilter", || {
        let mut rt = rtnl();
        rt.create_bridge("kbrnf", None).unwrap();
        let br = rt.link_by_name("kbrnf").unwrap().unwrap();
        let read = || {
            let out = std::process::Command::new("ip")
                .args(["-d", "-j", "link", "show", "kbrnf"])
                .output()
                .expect("run ip");
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            (
                text.contains("\"nf_call_iptables\":1"),
                text.contains("\"nf_call_ip6tables\":1"),
                text,
            )
        };
        let (v4, v6, text) = read();
        assert!(!v4 && !v6, "off on a new bridge: {text}");
        rt.set_bridge_netfilter(br.index, true).unwrap();
        let (v4, v6, text) = read();
        assert!(v4 && v6, "on: {text}");
        // Already as asked: no change made, which the kernel would announce (and pay for by
        // walking the namespace's IPv6 routes) on a bridge that is up.
        rt.set_up(br.index).unwrap();
        let mut events = netlink_sys::Socket::new(netlink_sys::protocols::NETLINK_ROUTE).unwrap();
        events.bind_auto().unwrap();
        events.add_membership(libc::RTNLGRP_LINK).unwrap();
        events.set_non_blocking(true).unwrap();
        let announced = || match events.recv_from_full() {
            Ok(_) => true,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
            Err(e) => panic!("read link events: {e}"),
        };
        rt.set_bridge_netfilter(br.index, true).unwrap();
        assert!(!announced(), "a bridge already on was changed");
        rt.set_bridge_netfilter(br.index, false).unwrap();
        let (v4, v6, text) = read();
        assert!(!v4 && !v6, "off again: {text}");
        assert!(announced(), "a change is announced");
        // Half on is not as asked.
        let ip = std::process::Command::new("ip")
            .args([
                "link",
                "set",
                "kbrnf",
                "type",
                "bridge",
                "nf_call_iptables",
                "1",
            ])
            .status()
            .expect("run ip");
        assert!(ip.success());
        let (v4, v6, text) = read();
        assert!(v4 && !v6, "half on: {text}");
        rt.set_bridge_netfilter(br.index, true).unwrap();
        let (v4, v6, text) = read();
        assert!(v4 && v6, "on from half on: {text}");
        assert!(rt.delete_link(br.index).unwrap());
    });
}
