//! Taps and tc redirects against the real kernel: flags, ownership, idempotency, namespaces,
//! and frames crossing veth <-> tap through the redirects (the Kata tcfilter model).

use std::fs;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::thread;
use std::time::{Duration, Instant};

use knid_netops::tap::{
    create_persistent_tap, open_tap_queue, parse_tun_flags, tun_flags_in, vhost_net_usable,
};
use knid_netops::{Qdisc, Redirect, Rtnl, TapSpec, VethEnd, VethSpec};
use nix::mount::{mount, MsFlags};
use nix::sched::{unshare, CloneFlags};
use nix::sys::socket::{
    bind, recv, setsockopt, socket, sockopt, AddressFamily, LinkAddr, MsgFlags, SockFlag,
    SockProtocol, SockType, SockaddrLike,
};
use nix::sys::time::TimeVal;

use crate::common::{in_private_netns, new_netns, rtnl};

const IFF_TAP: u32 = 0x0002;
const IFF_MULTI_QUEUE: u32 = 0x0100;
const IFF_PERSIST: u32 = 0x0800;
const IFF_NO_PI: u32 = 0x1000;
const IFF_VNET_HDR: u32 = 0x4000;
/// sizeof(struct virtio_net_hdr), the tap's default TUNSETVNETHDRSZ.
const VNET_HDR_LEN: usize = 10;
/// IEEE 802 local experimental ethertype: the stack ignores it, so only our frames carry it.
const ETHERTYPE_TEST: [u8; 2] = [0x88, 0xb5];

fn tap(name: &str, multi_queue: bool) -> TapSpec {
    TapSpec {
        name: name.into(),
        multi_queue,
        vnet_hdr: true,
        no_pi: true,
        owner: Some(1000),
        group: Some(1001),
    }
}

fn veth(rt: &mut Rtnl, a: &str, b: &str) -> (u32, u32) {
    let end = |name: &str| VethEnd {
        name: name.into(),
        mtu: None,
        mac: None,
    };
    rt.create_veth(&VethSpec {
        host: end(a),
        peer: end(b),
        peer_netns: None,
        host_controller: None,
    })
    .expect("create veth");
    let index = |rt: &mut Rtnl, n: &str| {
        rt.link_by_name(n)
            .expect("get veth")
            .expect("veth end")
            .index
    };
    (index(rt, a), index(rt, b))
}

/// `/sys/class/net/<name>/<attr>` as this thread's namespace sees it: /sys shows the namespace
/// of its mounter, so read it from a thread with a private mount namespace and a fresh sysfs
/// (both die with the thread).
fn sysfs_attrs(name: &str, attrs: &[&str]) -> Vec<String> {
    thread::scope(|s| {
        s.spawn(|| {
            unshare(CloneFlags::CLONE_NEWNS).expect("unshare mount ns");
            let none = None::<&str>;
            mount(none, "/", none, MsFlags::MS_REC | MsFlags::MS_PRIVATE, none)
                .expect("make mounts private");
            mount(Some("sysfs"), "/sys", Some("sysfs"), MsFlags::empty(), none)
                .expect("mount a sysfs of this netns");
            attrs
                .iter()
                .map(|a| {
                    let path = format!("/sys/class/net/{name}/{a}");
                    fs::read_to_string(&path).expect(&path).trim().to_owned()
                })
                .collect()
        })
        .join()
        .expect("sysfs thread")
    })
}

#[test]
fn persistent_taps_carry_the_requested_flags_owner_and_group() {
    in_private_netns("persistent_taps_carry_the_requested_flags", || {
        let mut rt = rtnl();
        let single = tap("ktap1", false);
        let multi = tap("ktap4", true);
        create_persistent_tap(None, &single).expect("create single-queue tap");
        create_persistent_tap(None, &multi).expect("create multi-queue tap");

        let want_single = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR | IFF_PERSIST;
        assert_eq!(want_single, 0x5802);
        assert_eq!(tun_flags_in(None, "ktap1").unwrap(), want_single);
        assert_eq!(
            tun_flags_in(None, "ktap4").unwrap(),
            want_single | IFF_MULTI_QUEUE
        );
        // The rtnetlink view agrees with what sysfs shows inside this namespace.
        let sys = sysfs_attrs("ktap1", &["tun_flags", "owner", "group"]);
        assert_eq!(parse_tun_flags(&sys[0]), Some(want_single), "{sys:?}");
        assert_eq!((sys[1].as_str(), sys[2].as_str()), ("1000", "1001"));
        let sys = sysfs_attrs("ktap4", &["tun_flags"]);
        assert_eq!(parse_tun_flags(&sys[0]), Some(0x5902));

        let state = rt.tap_by_name("ktap1").unwrap().expect("tap state");
        assert_eq!(
            (state.owner, state.group, state.queues),
            (Some(1000), Some(1001), None)
        );
        let link = rt.link_by_name("ktap1").unwrap().unwrap();
        assert_eq!(
            (state.index, link.kind.as_deref()),
            (link.index, Some("tun"))
        );

        // A VMM's queues: four on the multi-queue tap, exactly one on the single-queue tap.
        let queues: Vec<OwnedFd> = (0..4)
            .map(|_| open_tap_queue(None, &multi, false).expect("open queue"))
            .collect();
        assert_eq!(rt.tap_by_name("ktap4").unwrap().unwrap().queues, Some(4));
        drop(queues);
        assert_eq!(rt.tap_by_name("ktap4").unwrap().unwrap().queues, Some(0));
        let q = open_tap_queue(None, &single, true).expect("open the one queue");
        let err = open_tap_queue(None, &single, false).expect_err("second queue");
        assert_eq!(err.errno(), Some(libc::EBUSY), "{err:?}");
        drop(q);

        // Persistent: closing every queue leaves the taps in place.
        assert!(rt.tap_by_name("ktap1").unwrap().is_some());
        assert!(rt.delete_link_by_name("ktap1").unwrap());
        assert!(rt.delete_link_by_name("ktap4").unwrap());
        let err = tun_flags_in(None, "ktap1").expect_err("deleted");
        assert!(err.is_not_found(), "{err:?}");
    });
}

#[test]
fn tap_create_is_idempotent_and_refuses_other_flags_and_other_devices() {
    in_private_netns("tap_create_is_idempotent", || {
        let mut rt = rtnl();
        let spec = tap("ktap0", false);
        create_persistent_tap(None, &spec).expect("create");
        let index = rt.tap_by_name("ktap0").unwrap().unwrap().index;
        create_persistent_tap(None, &spec).expect("same spec again");

        let owner = TapSpec {
            owner: Some(2000),
            ..spec.clone()
        };
        create_persistent_tap(None, &owner).expect("new owner re-applied");
        let state = rt.tap_by_name("ktap0").unwrap().unwrap();
        assert_eq!(
            (state.index, state.owner, state.group),
            (index, Some(2000), Some(1001))
        );

        for other in [
            TapSpec {
                vnet_hdr: false,
                ..spec.clone()
            },
            TapSpec {
                no_pi: false,
                ..spec.clone()
            },
            TapSpec {
                multi_queue: true,
                ..spec.clone()
            },
        ] {
            let err = create_persistent_tap(None, &other).expect_err("other flags");
            assert!(err.is_exists(), "{err:?}");
            assert!(err.to_string().contains("ktap0"), "{err}");
            let err = open_tap_queue(None, &other, false).expect_err("queue with other flags");
            assert_eq!(err.errno(), Some(libc::EINVAL), "{err:?}");
        }
        assert_eq!(
            tun_flags_in(None, "ktap0").unwrap(),
            0x5802,
            "left untouched"
        );

        // While a VMM holds the only queue: a no-op re-create succeeds, re-owning cannot.
        let q = open_tap_queue(None, &owner, false).unwrap();
        create_persistent_tap(None, &owner).expect("nothing to change");
        let err = create_persistent_tap(None, &spec).expect_err("re-own a busy tap");
        assert_eq!(err.errno(), Some(libc::EBUSY), "{err:?}");
        drop(q);

        veth(&mut rt, "kveth0", "kveth1");
        let err = create_persistent_tap(None, &tap("kveth0", false)).expect_err("a veth");
        assert!(err.is_exists(), "{err:?}");
        assert!(err.to_string().contains("veth"), "{err}");

        let err = create_persistent_tap(None, &tap("sixteen-bytes-xx", false))
            .expect_err("name too long");
        assert!(err.to_string().contains("sixteen-bytes-xx"), "{err}");
        let err = open_tap_queue(None, &tap("knotap", false), false).expect_err("no tap");
        assert!(err.is_not_found(), "{err:?}");
        assert_eq!(
            rt.link_by_name("knotap").unwrap(),
            None,
            "opening creates nothing"
        );

        assert!(rt.delete_link_by_name("ktap0").unwrap());
        assert!(rt.delete_link_by_name("kveth0").unwrap());
    });
}

#[test]
fn tap_lands_in_the_namespace_it_is_created_for() {
    in_private_netns("tap_lands_in_the_namespace_it_is_created_for", || {
        let mut here = rtnl();
        let pod = new_netns();
        let spec = tap("ktapp", true);
        create_persistent_tap(Some(&pod), &spec).expect("create in pod");
        create_persistent_tap(Some(&pod), &spec).expect("again, idempotent");

        assert_eq!(
            here.tap_by_name("ktapp").unwrap(),
            None,
            "not in the caller's"
        );
        let mut inside = Rtnl::open_in(&pod).unwrap();
        assert!(inside.tap_by_name("ktapp").unwrap().is_some());
        assert_eq!(tun_flags_in(Some(&pod), "ktapp").unwrap(), 0x5902);

        let q = open_tap_queue(Some(&pod), &spec, false).expect("queue in pod");
        assert_eq!(
            inside.tap_by_name("ktapp").unwrap().unwrap().queues,
            Some(1)
        );
        drop(q);
        assert!(inside.delete_link_by_name("ktapp").unwrap());
    });
}

#[test]
fn redirects_are_installed_idempotently_in_both_directions() {
    in_private_netns("redirects_are_installed_idempotently", || {
        let mut rt = rtnl();
        let (v0, v1) = veth(&mut rt, "krv0", "krv1");
        create_persistent_tap(None, &tap("krt0", false)).unwrap();
        let t0 = rt.tap_by_name("krt0").unwrap().unwrap().index;

        assert!(rt.redirects(v0).unwrap().is_empty(), "no ingress qdisc yet");
        for index in [v0, t0] {
            rt.add_ingress_qdisc(index).expect("add ingress");
            rt.add_ingress_qdisc(index).expect("EEXIST is fine");
            let ingress: Vec<Qdisc> = rt
                .qdiscs(index)
                .unwrap()
                .into_iter()
                .filter(|q| q.kind == "ingress")
                .collect();
            let want = Qdisc {
                index,
                kind: "ingress".into(),
                handle: 0xffff_0000,
                parent: 0xffff_fff1,
            };
            assert_eq!(ingress, vec![want]);
        }

        let redirect = |from, to| Redirect {
            from,
            to,
            egress: true,
            redirect: true,
            filter_kind: "u32".into(),
        };
        rt.add_redirect(v0, t0).expect("veth -> tap");
        rt.add_redirect(t0, v0).expect("tap -> veth");
        rt.add_redirect(v0, t0).expect("again, a no-op");
        assert_eq!(rt.redirects(v0).unwrap(), vec![redirect(v0, t0)]);
        assert_eq!(rt.redirects(t0).unwrap(), vec![redirect(t0, v0)]);

        // Retargeted in place, still one filter; then back.
        rt.add_redirect(v0, v1).expect("retarget");
        assert_eq!(rt.redirects(v0).unwrap(), vec![redirect(v0, v1)]);
        rt.add_redirect(v0, t0).expect("retarget back");
        assert_eq!(rt.redirects(v0).unwrap(), vec![redirect(v0, t0)]);

        let err = rt.add_redirect(v1, t0).expect_err("no ingress qdisc on v1");
        assert_eq!(err.errno(), Some(libc::EINVAL), "{err:?}");

        assert!(rt.delete_link(t0).unwrap());
        assert!(rt.delete_link(v0).unwrap());
    });
}

/// An AF_PACKET socket on `ifindex` receiving every protocol, with a receive timeout.
fn packet_socket(ifindex: u32) -> OwnedFd {
    let fd = socket(
        AddressFamily::Packet,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::EthAll,
    )
    .expect("AF_PACKET socket");
    // SAFETY: all-zero is a valid sockaddr_ll (plain integers and a byte array).
    let mut ll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    ll.sll_family = libc::AF_PACKET as u16;
    ll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
    ll.sll_ifindex = ifindex as i32;
    let len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
    // SAFETY: `ll` is a live, initialised sockaddr_ll of exactly `len` bytes.
    let addr =
        unsafe { LinkAddr::from_raw((&raw const ll).cast(), Some(len)) }.expect("a sockaddr_ll");
    bind(fd.as_raw_fd(), &addr).expect("bind to the veth");
    setsockopt(&fd, sockopt::ReceiveTimeout, &TimeVal::new(0, 100_000)).expect("timeout");
    fd
}

fn frame(marker: &[u8]) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&[0x02, 0x6b, 0x6e, 0x00, 0x00, 0x01]);
    f.extend_from_slice(&ETHERTYPE_TEST);
    f.extend_from_slice(marker);
    f.resize(60, 0);
    f
}

/// Reads frames with `read` until one carries our ethertype and `marker` (link-up brings IPv6
/// chatter on the same wires), for at most two seconds.
fn await_frame(marker: &[u8], mut read: impl FnMut(&mut [u8]) -> Option<usize>) -> Vec<u8> {
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut buf = vec![0; 2048];
    while Instant::now() < deadline {
        match read(&mut buf) {
            Some(n) if n >= 14 + marker.len() && buf[12..14] == ETHERTYPE_TEST => {
                if &buf[14..14 + marker.len()] == marker {
                    return buf[..n].to_vec();
                }
            }
            Some(_) => {}
            None => thread::sleep(Duration::from_millis(10)),
        }
    }
    panic!(
        "no frame with marker {:?} within 2s",
        String::from_utf8_lossy(marker)
    );
}

#[test]
fn frames_cross_between_tap_and_veth_through_the_redirects() {
    in_private_netns("frames_cross_between_tap_and_veth", || {
        let mut rt = rtnl();
        let (v0, v1) = veth(&mut rt, "kfv0", "kfv1");
        let spec = TapSpec {
            owner: None,
            group: None,
            ..tap("kft0", false)
        };
        create_persistent_tap(None, &spec).unwrap();
        let t0 = rt.tap_by_name("kft0").unwrap().unwrap().index;
        for index in [v0, v1, t0] {
            rt.set_up(index).unwrap();
        }
        for (from, to) in [(v0, t0), (t0, v0)] {
            rt.add_ingress_qdisc(from).unwrap();
            rt.add_redirect(from, to).unwrap();
        }
        // The VMM side: with IFF_VNET_HDR every frame carries a virtio_net_hdr prefix.
        let vm = open_tap_queue(None, &spec, true).expect("open the tap queue");
        let wire = packet_socket(v1);

        // VM -> tap -> (redirect) -> v0 -> v1.
        let out = frame(b"knid vm->veth");
        let mut write_buf = vec![0u8; VNET_HDR_LEN];
        write_buf.extend_from_slice(&out);
        let n = nix::unistd::write(vm.as_fd(), &write_buf).expect("write to the tap");
        assert_eq!(n, write_buf.len());
        let got = await_frame(b"knid vm->veth", |buf| {
            recv(wire.as_raw_fd(), buf, MsgFlags::empty()).ok()
        });
        assert_eq!(got, out);

        // v1 -> v0 -> (redirect) -> tap -> VM.
        let back = frame(b"knid veth->vm");
        nix::unistd::write(wire.as_fd(), &back).expect("send on the veth");
        let got = await_frame(b"knid veth->vm", |buf| {
            let n = nix::unistd::read(vm.as_fd(), buf).ok()?;
            // Strip the virtio_net_hdr the tap prepends (all zero: no offloads on this path).
            assert!(n >= VNET_HDR_LEN && buf[..VNET_HDR_LEN].iter().all(|b| *b == 0));
            buf.copy_within(VNET_HDR_LEN..n, 0);
            Some(n - VNET_HDR_LEN)
        });
        assert_eq!(got, back);

        drop(vm);
        assert!(rt.delete_link(t0).unwrap());
        assert!(rt.delete_link(v0).unwrap());
    });
}

#[test]
fn vhost_net_probe_is_false_without_the_device() {
    // Absent on the CI machine: a plain `false`, not a panic or an error.
    if !std::path::Path::new("/dev/vhost-net").exists() {
        assert!(!vhost_net_usable());
    }
}
