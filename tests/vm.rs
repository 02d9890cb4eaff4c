//! VM sandboxes end to end (docs/architecture.md#networks-and-device-kinds): interfaces of kind
//! `tap` through the real daemon.
//!
//! A pod tap sits beside the veth end in the sandbox netns: its flags, owner and MTU are read
//! back from the kernel (rtnetlink and a sysfs mounted inside the netns), its tc redirects
//! dumped, and real frames cross tap <-> veth <-> bridge port both ways. A DAN tap is a port of
//! the bridge in knid's host netns, described by a Kata runtime-rs DAN file that is parsed into
//! a mirror of Kata's own `DanConfig` (testkit/src/dan.rs). Detach, GC and crashes at the tap
//! failpoints must leave nothing behind: no tap, no veth, no file, no record, no address.
//! tests/vm_guest.rs boots a real guest on each kind of tap.

use std::collections::BTreeSet;
use std::fs;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use knid_netops::tap::{attach_queue_fd, open_tap_queue, parse_tun_flags, vhost_net_usable};
use knid_netops::{run_in, NetnsHandle, Qdisc, Redirect, TapSpec};
use knid_transport::{pb, ClientError};
use nix::mount::{mount, MsFlags};
use nix::sched::{unshare, CloneFlags};
use protobuf::MessageField;
use tempfile::TempDir;
use testkit::dan::{read_dan, DanDeviceKind, DanNeighbor, DanRoute};
use testkit::{TestNode, BRIDGE, RPC, SETTLE};

// linux/if_tun.h, as /sys/class/net/<tap>/tun_flags shows them.
const IFF_TAP: u32 = 0x0002;
const IFF_MULTI_QUEUE: u32 = 0x0100;
const IFF_PERSIST: u32 = 0x0800;
const IFF_NO_PI: u32 = 0x1000;
const IFF_VNET_HDR: u32 = 0x4000;
/// sizeof(struct virtio_net_hdr): the prefix of every frame on an IFF_VNET_HDR tap.
const VNET_HDR_LEN: usize = 10;
const BROADCAST: [u8; 6] = [0xff; 6];
/// Source of the frames the "bridge side" sends.
const HOST_TEST_MAC: [u8; 6] = [0x02, 0x6b, 0x6e, 0x00, 0x00, 0x01];
/// MTU requested for every tap here: not the network's 1500, so "same as the veth" means
/// something.
const MTU: u32 = 1400;
/// The environment variable arming failpoints, and knid's fate at an aborting one.
const FAILPOINTS: &str = "KNID_FAILPOINTS";
const SIGABRT: i32 = 6;
const DEATH: Duration = Duration::from_secs(10);
/// Turns the periodic reconciler off, so only the GarbageCollect calls under test remove files.
const NO_RECONCILER: &str = r#"gc_interval = "0s""#;

/// A node whose DAN directory is a private tempdir. Fields drop in order: knid stops before the
/// directory it writes into is removed.
struct VmNode {
    node: TestNode,
    dans: TempDir,
}

impl VmNode {
    fn start(config_extra: &str, env: &[(&str, &str)]) -> VmNode {
        let dans = tempfile::Builder::new()
            .prefix("knid-e2e-dans-")
            .tempdir()
            .expect("create DAN tempdir");
        let config = format!("dan_dir = \"{}\"\n{config_extra}", dans.path().display());
        VmNode {
            node: TestNode::start_with(&config, env, &[]),
            dans,
        }
    }

    fn dan_file(&self, id: &str) -> PathBuf {
        self.dans.path().join(format!("{id}.json"))
    }

    /// Every entry of the DAN directory (temp files of interrupted writes included), sorted.
    fn dan_entries(&self) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(self.dans.path())
            .expect("read DAN dir")
            .map(|e| {
                e.expect("DAN dir entry")
                    .file_name()
                    .to_string_lossy()
                    .into()
            })
            .collect();
        names.sort();
        names
    }
}

// ---- Requests.

/// A request for one interface `eth0` of kind tap on the default network, MTU [`MTU`], with DNS.
fn tap_req(id: &str, netns: &Path, tap: pb::TapRequest) -> pb::AttachRequest {
    let mut req = testkit::attach_req(id, netns, "eth0");
    req.interfaces[0].kind = "tap".to_owned();
    req.interfaces[0].mtu = MTU;
    req.interfaces[0].tap = MessageField::some(tap);
    req.dns = MessageField::some(dns());
    req
}

/// Attaches [`tap_req`] and returns the sandbox.
fn attach_tap(node: &TestNode, id: &str, netns: &Path, tap: pb::TapRequest) -> pb::Sandbox {
    let req = tap_req(id, netns, tap);
    node.client()
        .attach(&req, RPC)
        .unwrap_or_else(|e| panic!("Attach {id}: {e}"))
}

/// Settings of a tap beside the veth in the sandbox netns.
fn pod_tap(queue_pairs: u32) -> pb::TapRequest {
    pb::TapRequest {
        queue_pairs,
        ..Default::default()
    }
}

/// Settings of a tap in the host netns described by a DAN file.
fn dan_tap(queue_pairs: u32) -> pb::TapRequest {
    pb::TapRequest {
        dan: true,
        ..pod_tap(queue_pairs)
    }
}

/// Settings of a pod tap or a DAN tap, one queue pair.
fn row_tap(row: &CrashRow) -> pb::TapRequest {
    if row.dan {
        dan_tap(1)
    } else {
        pod_tap(1)
    }
}

fn dns() -> pb::Dns {
    pb::Dns {
        servers: vec!["10.88.0.53".to_owned(), "fd00:88::53".to_owned()],
        searches: vec!["vm.svc.cluster.local".to_owned()],
        options: vec!["ndots:5".to_owned()],
        domain: "cluster.local".to_owned(),
        ..Default::default()
    }
}

fn tap_of(iface: &pb::InterfaceResult) -> &pb::TapResult {
    iface
        .tap
        .as_ref()
        .unwrap_or_else(|| panic!("no tap result in {iface:?}"))
}

/// The flags a tap of `queue_pairs` must have: tap, no PI, vnet_hdr, persistent, multi-queue
/// iff more than one pair.
fn want_flags(queue_pairs: u32) -> u32 {
    let flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR | IFF_PERSIST;
    if queue_pairs > 1 {
        flags | IFF_MULTI_QUEUE
    } else {
        flags
    }
}

/// What a VMM passes to TUNSETIFF to open a queue of the reported tap.
fn vmm_spec(tap: &pb::TapResult) -> TapSpec {
    TapSpec {
        name: tap.name.clone(),
        multi_queue: tap.multi_queue,
        vnet_hdr: tap.vnet_hdr,
        no_pi: tap.no_pi,
        owner: None,
        group: None,
    }
}

/// The parts of a tap result every kind of tap shares.
fn assert_tap_result(tap: &pb::TapResult, queue_pairs: u32, owner: Option<(u32, u32)>) {
    assert_eq!(tap.queue_pairs, queue_pairs, "{tap:?}");
    assert_eq!(tap.multi_queue, queue_pairs > 1, "{tap:?}");
    assert!(tap.vnet_hdr && tap.no_pi, "{tap:?}");
    // Without an owner asked for, root owns it (a tap with neither owner nor group is anyone's).
    assert_eq!(tap.owner_uid, Some(owner.map_or(0, |o| o.0)), "{tap:?}");
    assert_eq!(tap.owner_gid, owner.map(|o| o.1), "{tap:?}");
    assert_eq!(tap.vhost_net_ok, vhost_net_usable(), "{tap:?}");
    if !Path::new("/dev/vhost-net").exists() {
        assert!(!tap.vhost_net_ok, "vhost_net_ok without /dev/vhost-net");
    }
}

// ---- Kernel views.

/// `/sys/class/net/<name>/<attr>` as seen inside the netns at `netns`: sysfs shows the netns of
/// whoever mounted it, so a thread enters the netns, takes a private mount namespace and mounts
/// a fresh sysfs there (both die with the thread).
fn sysfs_in(netns: &Path, name: &str, attrs: &[&str]) -> Vec<String> {
    let ns = NetnsHandle::open(netns).expect("open netns");
    run_in(&ns, || {
        unshare(CloneFlags::CLONE_NEWNS).expect("unshare mount ns");
        let none = None::<&str>;
        mount(none, "/", none, MsFlags::MS_REC | MsFlags::MS_PRIVATE, none)
            .expect("make mounts private");
        mount(Some("sysfs"), "/sys", Some("sysfs"), MsFlags::empty(), none)
            .expect("mount a sysfs of the netns");
        attrs
            .iter()
            .map(|a| {
                let path = format!("/sys/class/net/{name}/{a}");
                fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("read {path}: {e}"))
                    .trim()
                    .to_owned()
            })
            .collect()
    })
    .expect("sysfs thread in the netns")
}

// ---- Frames.

/// Writes `frame` to a tap queue behind a zeroed virtio_net_hdr.
fn write_to_tap(queue: &OwnedFd, frame: &[u8]) {
    let mut buf = vec![0u8; VNET_HDR_LEN];
    buf.extend_from_slice(frame);
    let n = nix::unistd::write(queue.as_fd(), &buf).expect("write to the tap");
    assert_eq!(n, buf.len());
}

/// Reads one frame from a tap queue, without its virtio_net_hdr (all zero: no offloads here).
fn read_from_tap(queue: &OwnedFd, buf: &mut [u8]) -> Option<usize> {
    let n = testkit::read_ready(queue.as_fd(), buf)?;
    assert!(n >= VNET_HDR_LEN, "short read of {n} bytes from the tap");
    assert!(
        buf[..VNET_HDR_LEN].iter().all(|b| *b == 0),
        "virtio_net_hdr {:?}",
        &buf[..VNET_HDR_LEN]
    );
    buf.copy_within(VNET_HDR_LEN..n, 0);
    Some(n - VNET_HDR_LEN)
}

/// A frame from the "guest" (a queue of the tap) reaches `wire`, and one sent on `wire` reaches
/// the guest. `guest_dst` is where the wire side addresses its frame.
fn frames_cross(queue: &OwnedFd, wire: &OwnedFd, guest_mac: [u8; 6], guest_dst: [u8; 6]) {
    let out = testkit::test_frame(BROADCAST, guest_mac, b"knid guest->wire");
    let got = testkit::exchange_frames(
        b"knid guest->wire",
        || write_to_tap(queue, &out),
        |buf| testkit::read_ready(wire.as_fd(), buf),
    );
    assert_eq!(got, out, "frame from the tap, as seen on the wire");

    let back = testkit::test_frame(guest_dst, HOST_TEST_MAC, b"knid wire->guest");
    let got = testkit::exchange_frames(
        b"knid wire->guest",
        || {
            let n = nix::unistd::write(wire.as_fd(), &back).expect("send on the wire");
            assert_eq!(n, back.len());
        },
        |buf| read_from_tap(queue, buf),
    );
    assert_eq!(got, back, "frame from the wire, as read from the tap");
}

// ---- Pod taps.

/// Attaches a pod tap, checks the result, the kernel (rtnetlink, sysfs in the netns, tc) and
/// frames both ways, then detaches and checks nothing is left.
fn pod_tap_round_trip(queue_pairs: u32, owner: Option<(u32, u32)>) {
    let vm = VmNode::start("", &[]);
    let node = &vm.node;
    let id = format!("vm-pod-{queue_pairs}");
    let netns = node.netns("vm");
    let tap = pb::TapRequest {
        owner_uid: owner.map(|o| o.0),
        owner_gid: owner.map(|o| o.1),
        ..pod_tap(queue_pairs)
    };
    let sandbox = attach_tap(node, &id, &netns, tap);

    // What knid answers.
    assert_eq!(sandbox.state, "attached");
    assert_eq!(
        sandbox.dns.as_ref(),
        Some(&dns()),
        "DNS recorded and returned"
    );
    assert_eq!(sandbox.interfaces.len(), 1);
    let iface = &sandbox.interfaces[0];
    assert_eq!((iface.name.as_str(), iface.kind.as_str()), ("eth0", "tap"));
    assert_eq!(iface.mtu, MTU);
    assert!(iface.dan_path.is_empty(), "{iface:?}");
    let tap = tap_of(iface);
    assert_eq!(tap.name, knid_core::names::tap_ifname(&id, "eth0"));
    assert_eq!(Path::new(&tap.netns_path), netns.as_path());
    assert_eq!(tap.redirect_peer, "eth0");
    assert_tap_result(tap, queue_pairs, owner);
    let (v4, gw4) = testkit::ip_of(iface, "ipv4");
    let (v6, gw6) = testkit::ip_of(iface, "ipv6");
    assert_eq!((v4.prefix_len(), v6.prefix_len()), (24, 64));
    for gateway in [gw4, gw6] {
        assert!(
            iface.routes.iter().any(|r| r.gateway == gateway.to_string()
                && r.dst.ends_with("/0")
                && r.scope == "universe"),
            "no default route via {gateway} in {:?}",
            iface.routes
        );
    }
    // The veth end keeps MAC (the guest's), MTU, addresses and routes; the host end is a port.
    testkit::assert_pod_side(&netns, iface);
    node.assert_host_side(iface);
    let veth = testkit::link_in(&netns, "eth0").expect("eth0 in the sandbox");
    assert_eq!(veth.kind.as_deref(), Some("veth"));
    assert_eq!(veth.mac, Some(testkit::parse_mac(&iface.mac)), "guest MAC");
    assert_eq!(node.capacity_used("default"), 2);

    // The tap beside it: rtnetlink, then sysfs inside the netns.
    let mut pod = testkit::rtnl_in(&netns);
    let link = pod
        .link_by_name(&tap.name)
        .expect("look up tap")
        .unwrap_or_else(|| panic!("tap {} missing in the sandbox", tap.name));
    assert_eq!(link.kind.as_deref(), Some("tun"));
    assert!(link.up, "tap is down");
    assert_eq!(link.mtu, veth.mtu, "tap MTU follows the veth");
    assert_eq!(link.mtu, MTU);
    assert!(
        testkit::addresses_in(&netns, &tap.name)
            .iter()
            .all(|a| testkit::is_link_local(a.addr())),
        "the tap must carry no address (Kata's scan would trip on it)"
    );
    let state = pod
        .tap_by_name(&tap.name)
        .expect("tap state")
        .expect("a tap");
    assert_eq!(state.flags, want_flags(queue_pairs), "{state:?}");
    assert_eq!(
        (state.owner, state.group),
        (Some(owner.map_or(0, |o| o.0)), owner.map(|o| o.1))
    );
    let sys = sysfs_in(&netns, &tap.name, &["tun_flags", "owner", "group", "mtu"]);
    assert_eq!(
        parse_tun_flags(&sys[0]),
        Some(want_flags(queue_pairs)),
        "{sys:?}"
    );
    let (want_owner, want_group) = match owner {
        Some((uid, gid)) => (uid.to_string(), gid.to_string()),
        None => ("0".to_owned(), "-1".to_owned()),
    };
    assert_eq!((&sys[1], &sys[2]), (&want_owner, &want_group), "{sys:?}");
    assert_eq!(sys[3], MTU.to_string());

    // tc: an ingress qdisc on both, and a redirect each way.
    for index in [veth.index, link.index] {
        let ingress: Vec<Qdisc> = pod
            .qdiscs(index)
            .expect("dump qdiscs")
            .into_iter()
            .filter(|q| q.parent == 0xffff_fff1)
            .collect();
        let want = Qdisc {
            index,
            kind: "ingress".to_owned(),
            handle: 0xffff_0000,
            parent: 0xffff_fff1,
        };
        assert_eq!(ingress, [want]);
    }
    let redirect = |from, to| Redirect {
        from,
        to,
        egress: true,
        redirect: true,
        filter_kind: "u32".to_owned(),
    };
    assert_eq!(
        pod.redirects(veth.index).expect("dump eth0 filters"),
        [redirect(veth.index, link.index)],
        "eth0 -> tap"
    );
    assert_eq!(
        pod.redirects(link.index).expect("dump tap filters"),
        [redirect(link.index, veth.index)],
        "tap -> eth0"
    );

    // Frames: the guest's queue in the netns, the wire on the host end of the veth.
    let pod_ns = NetnsHandle::open(&netns).expect("open netns");
    let queue = open_tap_queue(Some(&pod_ns), &vmm_spec(tap), true).expect("open a tap queue");
    let host_end = node
        .host_rtnl()
        .link_by_name(&iface.host_ifname)
        .expect("look up host end")
        .expect("host end exists");
    let wire = testkit::packet_socket(&node.host(), host_end.index);
    let guest_mac = testkit::parse_mac(&iface.mac);
    frames_cross(&queue, &wire, guest_mac, guest_mac);
    drop((queue, wire));

    // Inspect agrees; detach removes the tap before replying, the veth via the reaper.
    assert_eq!(node.inspect(&id), sandbox);
    node.client()
        .detach(&testkit::detach_req(&id), RPC)
        .expect("Detach");
    assert!(
        testkit::link_in(&netns, &tap.name).is_none(),
        "tap left in the sandbox after Detach replied"
    );
    testkit::wait_only_lo(&netns);
    node.assert_host_clean();
    node.wait_capacity_used("default", 0);
    node.assert_not_found(&id);
    assert!(vm.dan_entries().is_empty(), "a pod tap writes no DAN file");
}

#[test]
fn pod_tap_with_one_queue_pair_and_an_owner_passes_frames_and_detaches_clean() {
    if testkit::privileged() {
        pod_tap_round_trip(1, Some((1000, 1001)));
    }
}

#[test]
fn pod_tap_with_four_queue_pairs_is_multi_queue_passes_frames_and_detaches_clean() {
    if testkit::privileged() {
        pod_tap_round_trip(4, None);
    }
}

/// Bridge `default` plus routed `routed`.
const ROUTED_CONFIG: &str = r#"
[networks.default]
bridge = "knid0"
subnets = ["10.88.0.0/24", "fd00:88::/64"]
mtu = 1500

[networks.routed]
kind = "routed"
subnets = ["10.99.0.0/24", "fd00:99::/64"]
mtu = 1500
"#;

#[test]
fn pod_tap_on_a_routed_network_is_redirected_and_detaches_clean() {
    if !testkit::privileged() {
        return;
    }
    let vm = VmNode::start(ROUTED_CONFIG, &[]);
    let node = &vm.node;
    let netns = node.netns("routed");
    let mut req = tap_req("vm-routed", &netns, pod_tap(2));
    req.interfaces[0].network = "routed".to_owned();
    let sandbox = node.client().attach(&req, RPC).expect("Attach");
    let iface = &sandbox.interfaces[0];
    assert_eq!(iface.kind, "tap");
    let tap = tap_of(iface);
    assert_tap_result(tap, 2, None);
    assert_eq!(testkit::ip_of(iface, "ipv4").0.prefix_len(), 32);
    assert!(!iface.neighbors.is_empty(), "routed gateways' neighbours");

    let mut pod = testkit::rtnl_in(&netns);
    let veth = pod.link_by_name("eth0").expect("look up").expect("eth0");
    let link = pod.link_by_name(&tap.name).expect("look up").expect("tap");
    assert_eq!((link.mtu, veth.mtu), (MTU, MTU));
    let state = pod.tap_by_name(&tap.name).expect("tap state").expect("tap");
    assert_eq!(state.flags, want_flags(2));
    assert_eq!(
        pod.redirects(veth.index).expect("filters")[0].to,
        link.index
    );
    assert_eq!(
        pod.redirects(link.index).expect("filters")[0].to,
        veth.index
    );
    assert!(
        node.host_rtnl()
            .link_by_name(&iface.host_ifname)
            .expect("look up")
            .is_some_and(|l| l.controller.is_none()),
        "a routed host end is on no bridge"
    );

    node.client()
        .detach(&testkit::detach_req("vm-routed"), RPC)
        .expect("Detach");
    testkit::wait_only_lo(&netns);
    node.wait_no_kn_links();
    node.wait_capacity_used("routed", 0);
}

// ---- DAN taps.

/// Checks a DAN interface against its result, the host netns, the sandbox netns and its file.
fn check_dan(vm: &VmNode, id: &str, netns: &Path, iface: &pb::InterfaceResult, queue_pairs: u32) {
    let node = &vm.node;
    let tap = tap_of(iface);
    assert_eq!(iface.kind, "tap");
    assert_eq!(iface.host_ifname, knid_core::names::host_ifname(id, "eth0"));
    assert_eq!(tap.name, iface.host_ifname, "the DAN tap is the host link");
    assert!(tap.netns_path.is_empty(), "a DAN tap is in the host netns");
    assert!(tap.redirect_peer.is_empty(), "a DAN tap has no redirect");
    assert_tap_result(tap, queue_pairs, None);
    assert_eq!(Path::new(&iface.dan_path), vm.dan_file(id));
    assert_eq!(iface.mtu, MTU);

    // The host netns: a tun device, port of the bridge, up, MTU as requested, the flags asked.
    let bridge = node.bridge(BRIDGE);
    let mut host = node.host_rtnl();
    let link = host
        .link_by_name(&tap.name)
        .expect("look up DAN tap")
        .unwrap_or_else(|| panic!("DAN tap {} missing in the host netns", tap.name));
    assert_eq!(link.kind.as_deref(), Some("tun"));
    assert_eq!(
        link.controller,
        Some(bridge.index),
        "not a port of {BRIDGE}"
    );
    assert!(link.up, "DAN tap is down");
    assert_eq!(link.mtu, MTU);
    let state = host
        .tap_by_name(&tap.name)
        .expect("tap state")
        .expect("tap");
    assert_eq!(state.flags, want_flags(queue_pairs));
    assert!(
        node.bridge_ports(BRIDGE).iter().any(|p| p.name == tap.name),
        "bridge ports lack {}",
        tap.name
    );
    // Nothing in the sandbox netns: Kata clears it and opens the tap in the host netns.
    assert_eq!(
        testkit::link_names(netns),
        ["lo"],
        "DAN puts nothing in the sandbox"
    );

    // The file, as Kata reads it.
    let dan = read_dan(&vm.dan_file(id));
    assert_eq!(dan.netns, None);
    assert_eq!(dan.devices.len(), 1, "{dan:?}");
    let dev = &dan.devices[0];
    assert_eq!(dev.name, "eth0");
    assert_eq!(dev.guest_mac, iface.mac);
    assert_eq!(
        dev.device,
        DanDeviceKind::HostTap {
            tap_name: tap.name.clone(),
            queue_num: queue_pairs as usize,
            queue_size: 0,
        }
    );
    let info = &dev.network_info;
    let mut file_ips = info.interface.ip_addresses.clone();
    let mut result_ips: Vec<String> = iface.ips.iter().map(|ip| ip.address.clone()).collect();
    file_ips.sort();
    result_ips.sort();
    assert_eq!(file_ips, result_ips);
    assert_eq!(file_ips.len(), 2, "one address per family");
    assert_eq!(info.interface.mtu, u64::from(MTU));
    assert_eq!(
        (info.interface.ntype.as_str(), info.interface.flags),
        ("tuntap", 0)
    );
    let want_routes: Vec<DanRoute> = iface
        .routes
        .iter()
        .map(|r| DanRoute {
            dest: r.dst.clone(),
            gateway: r.gateway.clone(),
            source: String::new(),
            scope: 0,
            flags: 0,
            mtu: r.mtu,
        })
        .collect();
    assert_eq!(info.routes, want_routes);
    assert_eq!(info.routes.len(), 2, "a default route per family");
    let want_neighbors: Vec<DanNeighbor> = iface
        .neighbors
        .iter()
        .map(|n| DanNeighbor {
            ip_address: Some(
                ipnet::IpNet::from(n.ip.parse::<std::net::IpAddr>().expect("neighbour IP"))
                    .to_string(),
            ),
            hardware_addr: n.mac.clone(),
            // NUD_PERMANENT.
            state: 0x80,
            flags: 0,
        })
        .collect();
    assert_eq!(info.neighbors, want_neighbors);
    assert!(
        info.neighbors.is_empty(),
        "a bridge network has no static neighbours"
    );
}

#[test]
fn dan_taps_are_bridge_ports_in_the_host_netns_described_by_independent_files() {
    if !testkit::privileged() {
        return;
    }
    let vm = VmNode::start("", &[]);
    let node = &vm.node;
    let (ns_a, ns_b) = (node.netns("dan-a"), node.netns("dan-b"));
    let a = attach_tap(node, "vm-dan-a", &ns_a, dan_tap(1));
    assert_eq!(a.dns.as_ref(), Some(&dns()));
    check_dan(&vm, "vm-dan-a", &ns_a, &a.interfaces[0], 1);
    let file_a = fs::read(vm.dan_file("vm-dan-a")).expect("read a's file");

    let b = attach_tap(node, "vm-dan-b", &ns_b, dan_tap(2));
    check_dan(&vm, "vm-dan-b", &ns_b, &b.interfaces[0], 2);
    assert_eq!(
        fs::read(vm.dan_file("vm-dan-a")).expect("read a's file"),
        file_a,
        "b's attach rewrote a's file"
    );
    assert_eq!(vm.dan_entries(), ["vm-dan-a.json", "vm-dan-b.json"]);
    assert_eq!(node.capacity_used("default"), 4);

    // Frames through a's tap and the bridge: the guest's queue in the host netns, the wire on
    // the bridge device itself.
    let tap_a = tap_of(&a.interfaces[0]);
    let host_ns = node.host();
    let queue = open_tap_queue(Some(&host_ns), &vmm_spec(tap_a), true).expect("open queue");
    let wire = testkit::packet_socket(&host_ns, node.bridge(BRIDGE).index);
    frames_cross(
        &queue,
        &wire,
        testkit::parse_mac(&a.interfaces[0].mac),
        BROADCAST,
    );
    drop((queue, wire));

    // Detaching a removes its file before replying and its tap via the reaper; b is untouched.
    let file_b = fs::read(vm.dan_file("vm-dan-b")).expect("read b's file");
    node.client()
        .detach(&testkit::detach_req("vm-dan-a"), RPC)
        .expect("Detach a");
    assert!(
        !vm.dan_file("vm-dan-a").exists(),
        "a's file outlived Detach"
    );
    testkit::wait_for("a's tap reaped", SETTLE, || {
        node.host_rtnl()
            .link_by_name(&tap_a.name)
            .expect("look up")
            .is_none()
    });
    assert_eq!(fs::read(vm.dan_file("vm-dan-b")).expect("b's file"), file_b);
    check_dan(&vm, "vm-dan-b", &ns_b, &b.interfaces[0], 2);
    node.wait_capacity_used("default", 2);
    node.assert_not_found("vm-dan-a");

    node.client()
        .detach(&testkit::detach_req("vm-dan-b"), RPC)
        .expect("Detach b");
    assert!(vm.dan_entries().is_empty(), "{:?}", vm.dan_entries());
    node.assert_host_clean();
    node.wait_capacity_used("default", 0);
    assert!(node.list_ids().is_empty());
    assert_eq!(testkit::link_names(&ns_a), ["lo"]);
    assert_eq!(testkit::link_names(&ns_b), ["lo"]);
}

#[test]
fn gc_sweep_removes_stray_dan_files_and_keeps_live_and_foreign_ones() {
    if !testkit::privileged() {
        return;
    }
    let vm = VmNode::start(NO_RECONCILER, &[]);
    let node = &vm.node;
    let netns = node.netns("dan-gc");
    attach_tap(node, "vm-live", &netns, dan_tap(1));
    let live = fs::read(vm.dan_file("vm-live")).expect("live file");
    let ghost = vm.dan_file("ghost");
    // A stray file of a sandbox knid does not know, a temp file of an interrupted write of a
    // live one, and a file that is no DAN file at all (not knid's to remove).
    fs::write(&ghost, b"{\"netns\":null,\"devices\":[]}").expect("write ghost");
    let temp = vm.dans.path().join(".vm-live.json.tmp");
    fs::write(&temp, b"{").expect("write temp");
    let foreign = vm.dans.path().join("notes.txt");
    fs::write(&foreign, b"not a DAN file").expect("write foreign");
    let dan_findings = |resp: &pb::GarbageCollectResponse| -> BTreeSet<(String, String, String)> {
        assert!(resp.errors.is_empty(), "GC errors: {:?}", resp.errors);
        resp.removed
            .iter()
            .filter(|f| f.what == "dan-file")
            .map(|f| (f.sandbox_id.clone(), f.reason.clone(), f.detail.clone()))
            .collect()
    };
    let want: BTreeSet<(String, String, String)> = [("ghost", &ghost), ("vm-live", &temp)]
        .into_iter()
        .map(|(id, path)| {
            (
                id.to_owned(),
                "no-record".to_owned(),
                path.display().to_string(),
            )
        })
        .collect();

    let sweep = |dry_run: bool| {
        let req = pb::GarbageCollectRequest {
            dry_run,
            sweep_only: true,
            ..Default::default()
        };
        node.client()
            .garbage_collect(&req, RPC)
            .expect("GarbageCollect")
    };
    assert_eq!(dan_findings(&sweep(true)), want);
    assert!(ghost.exists() && temp.exists(), "a dry run removed a file");

    // The real sweep through the CLI.
    let out = Command::new(env!("CARGO_BIN_EXE_knictl"))
        .arg("--socket")
        .arg(node.socket())
        .args(["-o", "json", "gc"])
        .env_remove("KNID_SOCKET")
        .output()
        .expect("run knictl gc");
    assert!(
        out.status.success(),
        "knictl gc: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("knictl gc JSON");
    let reported: BTreeSet<(String, String, String)> = json["removed"]
        .as_array()
        .expect("removed[]")
        .iter()
        .filter(|f| f["what"] == "dan-file")
        .map(|f| {
            let s = |k: &str| f[k].as_str().unwrap_or_default().to_owned();
            (s("sandbox_id"), s("reason"), s("detail"))
        })
        .collect();
    assert_eq!(reported, want);
    assert!(!ghost.exists() && !temp.exists(), "stray files left");
    assert_eq!(fs::read(vm.dan_file("vm-live")).expect("live file"), live);
    assert!(foreign.exists(), "GC removed a file that is not a DAN file");
    assert!(
        dan_findings(&sweep(false)).is_empty(),
        "a second sweep found DAN files"
    );

    node.client()
        .detach(&testkit::detach_req("vm-live"), RPC)
        .expect("Detach");
    assert_eq!(vm.dan_entries(), ["notes.txt"]);
    node.assert_host_clean();
}

// ---- Bad input.

/// Opens a queue of `tap` in `netns` the way an unprivileged VMM could on a node where
/// /dev/net/tun is world-writable: /dev/net/tun is opened as root (standing in for the open
/// permission), then the thread becomes `uid` (losing every capability) before TUNSETIFF, where
/// the kernel checks the tap's owner and group. The errno, or `None` when it opened.
fn open_as(uid: u32, netns: &Path, tap: &pb::TapResult) -> Option<i32> {
    let spec = vmm_spec(tap);
    let netns = netns.to_owned();
    std::thread::spawn(move || {
        let ns = NetnsHandle::open(&netns).expect("open the sandbox netns");
        nix::sched::setns(ns.as_fd(), CloneFlags::CLONE_NEWNET).expect("setns");
        let tun = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/net/tun")
            .expect("open /dev/net/tun as root");
        // SAFETY: a raw syscall changes this thread's credentials only (glibc's wrapper would
        // change every thread's); the thread ends right after.
        let dropped = unsafe { libc::syscall(libc::SYS_setresuid, uid, uid, uid) };
        assert_eq!(dropped, 0, "setresuid({uid})");
        match attach_queue_fd(tun, &spec) {
            Ok(_queue) => None,
            Err(e) => Some(e.errno().unwrap_or(-1)),
        }
    })
    .join()
    .expect("the unprivileged thread panicked")
}

#[test]
fn a_tap_without_an_owner_is_roots_and_only_a_named_owner_may_open_it() {
    if !testkit::privileged() {
        return;
    }
    const NOBODY: u32 = 65534;
    let node = TestNode::start("");
    let netns = node.netns("unowned");
    let unowned = attach_tap(&node, "unowned", &netns, pod_tap(1));
    let tap = tap_of(&unowned.interfaces[0]);
    assert_eq!(tap.owner_uid, Some(0), "a tap without an owner: {tap:?}");
    assert_eq!(
        open_as(NOBODY, &netns, tap),
        Some(libc::EPERM),
        "uid {NOBODY} without capabilities opened a tap nobody was named to own"
    );

    let owned_ns = node.netns("owned");
    let owned = attach_tap(
        &node,
        "owned",
        &owned_ns,
        pb::TapRequest {
            owner_uid: Some(NOBODY),
            ..pod_tap(1)
        },
    );
    let tap = tap_of(&owned.interfaces[0]);
    assert_eq!(tap.owner_uid, Some(NOBODY));
    assert_eq!(
        open_as(NOBODY, &owned_ns, tap),
        None,
        "the named owner cannot open its tap"
    );
    // Root (CAP_NET_ADMIN) still opens either.
    assert_eq!(open_as(0, &netns, tap_of(&unowned.interfaces[0])), None);
    for id in ["unowned", "owned"] {
        node.client()
            .detach(&testkit::detach_req(id), RPC)
            .unwrap_or_else(|e| panic!("Detach {id}: {e}"));
    }
}

#[test]
fn knictl_check_names_a_deleted_tap_dan_tap_or_redirect() {
    if !testkit::privileged() {
        return;
    }
    /// knictl's exit code for a difference.
    const DIFFERS: i32 = 5;
    let vm = VmNode::start("", &[]);
    let node = &vm.node;
    let host = node.host_path().to_owned();
    let mut taps = Vec::new();
    for id in ["tap-gone", "to-tap", "from-tap", "tap-ok"] {
        let netns = node.netns(id);
        let sandbox = attach_tap(node, id, &netns, pod_tap(1));
        taps.push((id, netns, tap_of(&sandbox.interfaces[0]).name.clone()));
    }
    let dan_ns = node.netns("dan-gone");
    let dan = attach_tap(node, "dan-gone", &dan_ns, dan_tap(1));
    let dan_name = tap_of(&dan.interfaces[0]).name.clone();
    for (id, _, _) in &taps {
        assert_eq!(
            testkit::cli::knictl_ok(node, &["check", id]).trim(),
            format!("{id}: ok")
        );
    }

    // Behind knid's back, as anyone with CAP_NET_ADMIN in the pod's netns could.
    let in_ns = |netns: &Path, args: &[&str]| {
        let net = format!("--net={}", netns.display());
        let mut all = vec![net.as_str()];
        all.extend_from_slice(args);
        testkit::cni::tool_in(&host, "nsenter", &all);
    };
    let (_, gone_ns, gone_tap) = &taps[0];
    in_ns(gone_ns, &["ip", "link", "del", gone_tap]);
    let (_, to_ns, _) = &taps[1];
    in_ns(to_ns, &["tc", "filter", "del", "dev", "eth0", "ingress"]);
    let (_, from_ns, from_tap) = &taps[2];
    in_ns(from_ns, &["tc", "qdisc", "del", "dev", from_tap, "ingress"]);
    testkit::cni::tool_in(&host, "ip", &["link", "del", &dan_name]);

    for (id, want) in [
        ("tap-gone", format!("interface {gone_tap} does not exist")),
        (
            "to-tap",
            format!("redirect of every frame from eth0 to {}", taps[1].2),
        ),
        (
            "from-tap",
            format!("redirect of every frame from {from_tap} to eth0"),
        ),
        (
            "dan-gone",
            format!("interface {dan_name} does not exist in the host netns"),
        ),
    ] {
        let out = testkit::cli::knictl_exits(node, DIFFERS, &["check", id]);
        assert!(
            out.contains(&want),
            "check {id} does not say {want:?}: {out}"
        );
    }
    assert_eq!(
        testkit::cli::knictl_ok(node, &["check", "tap-ok"]).trim(),
        "tap-ok: ok"
    );
    for id in ["tap-gone", "to-tap", "from-tap", "tap-ok", "dan-gone"] {
        node.client()
            .detach(&testkit::detach_req(id), RPC)
            .unwrap_or_else(|e| panic!("Detach {id}: {e}"));
    }
}

#[test]
fn a_dan_tap_never_shares_a_sandbox_with_a_netns_interface() {
    if !testkit::privileged() {
        return;
    }
    let vm = VmNode::start("", &[]);
    let node = &vm.node;
    let refused = |req: &pb::AttachRequest, what: &str| {
        let err = node.client().attach(req, RPC).expect_err(what);
        let text = err.to_string();
        assert!(
            text.contains("FAILED_PRECONDITION") || text.contains("FailedPrecondition"),
            "{what}: {text}"
        );
        assert!(
            text.contains("DAN tap") && text.contains("never reach the guest"),
            "{what}: the refusal does not say why: {text}"
        );
    };

    // In one request: nothing is recorded, nothing is created.
    let mixed_ns = node.netns("mixed");
    let mut mixed = tap_req("vm-mixed", &mixed_ns, dan_tap(1));
    mixed
        .interfaces
        .push(testkit::attach_req("vm-mixed", &mixed_ns, "eth1").interfaces[0].clone());
    refused(&mixed, "a DAN tap and a veth in one request");
    node.assert_not_found("vm-mixed");
    assert_eq!(testkit::link_names(&mixed_ns), ["lo"]);
    assert!(vm.dan_entries().is_empty(), "{:?}", vm.dan_entries());
    node.assert_host_clean();

    // Attach after attach, both ways round: the first interface stays as it was.
    let dan_ns = node.netns("dan-first");
    attach_tap(node, "vm-dan-first", &dan_ns, dan_tap(1));
    let veth = testkit::attach_req("vm-dan-first", &dan_ns, "eth1");
    refused(&veth, "a veth beside a DAN tap");
    let netns_ns = node.netns("veth-first");
    node.client()
        .attach(
            &testkit::attach_req("vm-veth-first", &netns_ns, "eth0"),
            RPC,
        )
        .expect("Attach a veth");
    let mut dan = tap_req("vm-veth-first", &netns_ns, dan_tap(1));
    dan.interfaces[0].name = "eth1".to_owned();
    refused(&dan, "a DAN tap beside a veth");
    for (id, ifname) in [("vm-dan-first", "eth0"), ("vm-veth-first", "eth0")] {
        let sandbox = node.inspect(id);
        let names: Vec<&str> = sandbox.interfaces.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(names, [ifname], "{id}");
    }
    assert_eq!(testkit::link_names(&netns_ns), ["eth0", "lo"]);
    for id in ["vm-dan-first", "vm-veth-first"] {
        node.client()
            .detach(&testkit::detach_req(id), RPC)
            .unwrap_or_else(|e| panic!("Detach {id}: {e}"));
    }
    node.assert_host_clean();
}

#[test]
fn two_dan_interfaces_get_one_default_route_per_family_the_first_ones() {
    if !testkit::privileged() {
        return;
    }
    let vm = VmNode::start("", &[]);
    let node = &vm.node;
    let netns = node.netns("two-dans");
    let mut req = tap_req("vm-two", &netns, dan_tap(1));
    let mut second = req.interfaces[0].clone();
    second.name = "eth1".to_owned();
    req.interfaces.push(second);
    let sandbox = node
        .client()
        .attach(&req, RPC)
        .expect("Attach two DAN taps");
    assert_eq!(sandbox.interfaces.len(), 2);
    let file = read_dan(&vm.dan_file("vm-two"));
    let defaults: Vec<(String, String)> = file
        .devices
        .iter()
        .flat_map(|d| {
            d.network_info
                .routes
                .iter()
                .filter(|r| r.dest.ends_with("/0"))
                .map(move |r| (d.name.clone(), r.dest.clone()))
        })
        .collect();
    assert_eq!(
        defaults,
        [
            ("eth0".to_owned(), "0.0.0.0/0".to_owned()),
            ("eth0".to_owned(), "::/0".to_owned())
        ],
        "default routes in the DAN file"
    );
    node.client()
        .detach(&testkit::detach_req("vm-two"), RPC)
        .expect("Detach");
    node.assert_host_clean();
}

#[test]
fn knictl_attaches_pod_and_dan_taps_and_inspect_shows_them_as_they_are() {
    if !testkit::privileged() {
        return;
    }
    let vm = VmNode::start("", &[]);
    let node = &vm.node;
    let pod_ns = node.netns("cli-tap");
    let pod_path = pod_ns.display().to_string();
    let json = testkit::cli::knictl_json(
        node,
        &[
            "-o",
            "json",
            "attach",
            "cli-tap",
            "--netns",
            &pod_path,
            "--queue-pairs",
            "2",
            "--tap-owner",
            "65534",
            "--tap-group",
            "65534",
        ],
    );
    let iface = &json["interfaces"][0];
    assert_eq!(iface["kind"], "tap", "{json}");
    let tap = &iface["tap"];
    assert_eq!(
        (
            &tap["queue_pairs"],
            &tap["multi_queue"],
            &tap["owner_uid"],
            &tap["owner_gid"]
        ),
        (
            &serde_json::json!(2),
            &serde_json::json!(true),
            &serde_json::json!(65534),
            &serde_json::json!(65534)
        ),
        "{json}"
    );
    let tap_name = tap["name"].as_str().expect("tap name").to_owned();
    assert!(testkit::link_names(&pod_ns).contains(&tap_name));

    let dan_ns = node.netns("cli-dan");
    let dan_path = dan_ns.display().to_string();
    let text = testkit::cli::knictl_ok(node, &["attach", "cli-dan", "--netns", &dan_path, "--dan"]);
    assert!(vm.dan_file("cli-dan").exists(), "no DAN file: {text}");
    let inspect = testkit::cli::knictl_ok(node, &["inspect", "cli-dan"]);
    assert!(
        inspect.contains("guest interface eth0 (in the VM, from the DAN file)")
            && !inspect.contains("pod link")
            && !inspect.contains("MISSING"),
        "inspect of a DAN sandbox: {inspect}"
    );
    assert_eq!(testkit::link_names(&dan_ns), ["lo"]);

    // A tap setting on another kind is refused, naming the field.
    let other_ns = node.netns("cli-bad");
    let other_path = other_ns.display().to_string();
    let out = testkit::cli::knictl(
        node,
        &[
            "attach",
            "cli-bad",
            "--netns",
            &other_path,
            "--kind",
            "veth",
            "--queue-pairs",
            "2",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("tap"),
        "a veth with a queue pair setting: {stderr}"
    );
    node.assert_not_found("cli-bad");
    for id in ["cli-tap", "cli-dan"] {
        testkit::cli::knictl_ok(node, &["detach", id]);
    }
    node.assert_host_clean();
}

#[test]
fn tap_settings_are_refused_where_they_cannot_apply() {
    if !testkit::privileged() {
        return;
    }
    let vm = VmNode::start(ROUTED_CONFIG, &[]);
    let node = &vm.node;
    let netns = node.netns("bad");
    let cases: [(&str, &str, pb::AttachRequest); 3] = [
        ("tap settings on a veth", "interfaces[0].tap", {
            let mut req = tap_req("vm-bad", &netns, pod_tap(2));
            req.interfaces[0].kind = "veth".to_owned();
            req
        }),
        (
            "300 queue pairs",
            "interfaces[0].tap.queue_pairs",
            tap_req("vm-bad", &netns, pod_tap(300)),
        ),
        ("DAN on a routed network", "interfaces[0].kind", {
            let mut req = tap_req("vm-bad", &netns, dan_tap(1));
            req.interfaces[0].network = "routed".to_owned();
            req
        }),
    ];
    for (what, field, req) in cases {
        let message = testkit::expect_code(
            node.client().attach(&req, RPC),
            ttrpc::Code::INVALID_ARGUMENT,
            what,
        );
        assert!(
            testkit::names_field(&message, field),
            "{what}: {message:?} does not name {field}"
        );
    }
    assert!(node.list_ids().is_empty());
    assert_eq!(
        node.capacity_used("default") + node.capacity_used("routed"),
        0
    );
    assert_eq!(testkit::link_names(&netns), ["lo"]);
    assert!(node.host_kn_links().is_empty());
    assert!(vm.dan_entries().is_empty());
}

// ---- Crashes at the tap failpoints.

/// One crash case: a pod or DAN tap attach (or detach) with `failpoints` armed.
#[derive(Debug)]
struct CrashRow {
    dan: bool,
    failpoints: &'static str,
}

impl CrashRow {
    fn name(&self) -> &'static str {
        self.failpoints.split_once('=').expect("name=action").0
    }

    fn aborts(&self) -> bool {
        self.failpoints.ends_with("=abort")
    }

    fn kind(&self) -> &'static str {
        if self.dan {
            "DAN tap"
        } else {
            "pod tap"
        }
    }
}

const fn row(dan: bool, failpoints: &'static str) -> CrashRow {
    CrashRow { dan, failpoints }
}

const ATTACH_CRASHES: &[CrashRow] = &[
    row(false, "attach.tap_created=abort"),
    row(true, "attach.tap_created=abort"),
    row(true, "attach.dan_written=abort"),
    row(false, "attach.tap_created=error"),
    row(true, "attach.tap_created=error"),
    row(true, "attach.dan_written=error"),
];

/// An interrupted detach of a DAN tap: its file and its host tap are left for recovery.
const DAN_DETACH_CRASH: CrashRow = row(true, "detach.detaching=abort");
/// The same for a pod tap: the tap in the sandbox netns is left for recovery.
const POD_DETACH_CRASH: CrashRow = row(false, "detach.detaching=abort");

/// Root and a knid with failpoints; core files are kept out of the working directory.
fn crash_tests_enabled() -> bool {
    if !testkit::privileged() || !testkit::failpoints_built() {
        return false;
    }
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (_, hard) = getrlimit(Resource::RLIMIT_CORE).expect("getrlimit(RLIMIT_CORE)");
    setrlimit(Resource::RLIMIT_CORE, 0, hard).expect("setrlimit(RLIMIT_CORE)");
    true
}

#[test]
fn the_vm_crash_rows_cover_the_tap_failpoints() {
    let covered: BTreeSet<&str> = ATTACH_CRASHES.iter().map(CrashRow::name).collect();
    let tap_failpoints: BTreeSet<&str> = testkit::KIND_FAILPOINTS
        .iter()
        .copied()
        // Covered by tests/devices.rs, tests/cni_driver.rs, tests/netns.rs, tests/nat.rs,
        // tests/upgrade.rs and tests/antispoof.rs.
        .filter(|name| {
            !matches!(
                *name,
                "antispoof.probe"
                    | "attach.device_moved"
                    | "attach.cni_added"
                    | "attach.host_ports_added"
                    | "netns.recorded"
                    | "netns.deleting"
                    | "store.migrating"
                    | "store.migrated"
            )
        })
        .collect();
    assert_eq!(
        tap_failpoints,
        BTreeSet::from(["attach.dan_written", "attach.tap_created"])
    );
    assert_eq!(covered, tap_failpoints);
    for name in ATTACH_CRASHES
        .iter()
        .chain([&DAN_DETACH_CRASH, &POD_DETACH_CRASH])
        .map(CrashRow::name)
    {
        assert!(
            knid_core::failpoint::NAMES.contains(&name),
            "{name} is not a knid failpoint"
        );
    }
    // Each of them fires on both an abort and an error, and tap_created on both kinds of tap.
    for name in &covered {
        for action in ["abort", "error"] {
            assert!(
                ATTACH_CRASHES
                    .iter()
                    .any(|r| r.name() == *name && r.failpoints.ends_with(action)),
                "{name}={action} has no row"
            );
        }
    }
    assert!(ATTACH_CRASHES
        .iter()
        .any(|r| r.name() == "attach.tap_created" && !r.dan));
}

/// Nothing of `id` is left: no record, no tap or veth in the netns, no `kn*` link or bridge port
/// on the host, no DAN file, no address reserved.
fn assert_gone(vm: &VmNode, id: &str, netns: &Path) {
    let node = &vm.node;
    node.assert_not_found(id);
    assert!(node.list_ids().is_empty(), "List: {:?}", node.list_ids());
    testkit::wait_only_lo(netns);
    node.assert_host_clean();
    assert!(
        vm.dan_entries().is_empty(),
        "DAN dir: {:?}",
        vm.dan_entries()
    );
    node.wait_capacity_used("default", 0);
}

/// The tap a row's attach creates exists (the failpoint fired after it).
fn tap_exists(vm: &VmNode, row: &CrashRow, id: &str, netns: &Path) -> bool {
    if row.dan {
        let name = knid_core::names::host_ifname(id, "eth0");
        vm.node
            .host_rtnl()
            .tap_by_name(&name)
            .expect("look up DAN tap")
            .is_some()
    } else {
        let name = knid_core::names::tap_ifname(id, "eth0");
        testkit::rtnl_in(netns)
            .tap_by_name(&name)
            .expect("look up pod tap")
            .is_some()
    }
}

fn stop_gracefully(node: &mut TestNode) {
    let status = node.stop();
    assert_eq!(status.code(), Some(0), "knid exit status {status}");
}

/// The faulted knid's end: SIGABRT after logging the aborting failpoint, or still running after
/// failing the operation.
fn check_fault(node: &mut TestNode, row: &CrashRow) {
    let line = if row.aborts() {
        let status = node.wait_exit(DEATH);
        assert_eq!(status.signal(), Some(SIGABRT), "knid exit status {status}");
        format!("failpoint {}: aborting", row.name())
    } else {
        // A failing failpoint must not take knid down, not even a moment after its reply.
        std::thread::sleep(Duration::from_millis(300));
        assert!(node.is_running(), "knid died at a failing failpoint");
        format!("failpoint {}: failing the operation", row.name())
    };
    assert!(node.log_text().contains(&line), "knid's log lacks {line:?}");
}

/// Checks the reply of the faulted RPC: lost for an abort, Internal naming the failpoint for an
/// error.
fn check_reply<T: std::fmt::Debug>(row: &CrashRow, result: Result<T, ClientError>) {
    match result {
        Err(ClientError::Transport(_)) if row.aborts() => {}
        Err(ClientError::Rpc { code, message })
            if !row.aborts()
                && code == ttrpc::Code::INTERNAL
                && message.contains(&format!("failpoint {}", row.name())) => {}
        other => panic!("expected the fault's reply, got {other:?}"),
    }
}

/// After convergence, the same sandbox attaches (with the tap and, for DAN, the file) and
/// detaches cleanly on an unarmed knid.
fn retry_attach_and_detach(vm: &VmNode, row: &CrashRow, id: &str, netns: &Path) {
    let sandbox = attach_tap(&vm.node, id, netns, row_tap(row));
    assert_eq!(sandbox.state, "attached");
    assert!(tap_exists(vm, row, id, netns), "retried attach made no tap");
    assert_eq!(
        vm.dan_file(id).exists(),
        row.dan,
        "DAN file after the retry"
    );
    assert_eq!(vm.node.capacity_used("default"), 2);
    vm.node
        .client()
        .detach(&testkit::detach_req(id), RPC)
        .expect("Detach after the retry");
    assert_gone(vm, id, netns);
}

fn run_attach_crash(row: &CrashRow, id: &str) {
    let mut vm = VmNode::start("", &[(FAILPOINTS, row.failpoints)]);
    let netns = vm.node.netns(id);
    let req = tap_req(id, &netns, row_tap(row));
    check_reply(row, vm.node.client().attach(&req, RPC));
    check_fault(&mut vm.node, row);
    vm.node.set_env(FAILPOINTS, None);
    if row.aborts() {
        // The kernel outlives knid: the crash left what recovery has to undo.
        assert!(tap_exists(&vm, row, id, &netns), "no tap at the crash");
        if row.name() == "attach.dan_written" {
            assert!(vm.dan_file(id).exists(), "no DAN file at the crash");
        }
        vm.node.restart();
    }
    // A failed attach is rolled back before its reply; an aborted one by the restart.
    assert_gone(&vm, id, &netns);
    stop_gracefully(&mut vm.node);
    let store = vm.node.open_store();
    assert!(store.all_attachments().expect("attachments").is_empty());
    assert!(store.sandboxes().expect("sandboxes").is_empty());
    drop(store);
    vm.node.restart();
    retry_attach_and_detach(&vm, row, id, &netns);
}

fn run_detach_crash(row: &CrashRow, id: &str) {
    let mut vm = VmNode::start("", &[]);
    let netns = vm.node.netns(id);
    attach_tap(&vm.node, id, &netns, row_tap(row));
    stop_gracefully(&mut vm.node);
    vm.node.set_env(FAILPOINTS, Some(row.failpoints));
    vm.node.restart();
    check_reply(row, vm.node.client().detach(&testkit::detach_req(id), RPC));
    check_fault(&mut vm.node, row);
    // Interrupted before the tap and the file were touched: recovery must finish the job.
    assert!(tap_exists(&vm, row, id, &netns), "tap gone at the crash");
    assert_eq!(vm.dan_file(id).exists(), row.dan, "DAN file at the crash");
    vm.node.set_env(FAILPOINTS, None);
    vm.node.restart();
    if !row.dan && vm.node.list_ids() == [id] {
        // A pod tap's detach flushes its Detaching marks while its kernel work runs: aborted
        // before that work, the marks may not have reached the disk, and the interface stays
        // attached, whole (docs/architecture.md#detach-ahead-of-its-mark); the caller's
        // retried Detach finishes it.
        assert!(
            tap_exists(&vm, row, id, &netns),
            "attached, without its tap"
        );
        let sandbox = vm.node.inspect(id);
        assert_eq!(sandbox.state, "attached", "{sandbox:?}");
        vm.node
            .client()
            .detach(&testkit::detach_req(id), RPC)
            .expect("Detach retried");
    }
    assert_gone(&vm, id, &netns);
    retry_attach_and_detach(&vm, row, id, &netns);
}

/// Runs every row, each on its own node, and reports all failures at once.
fn run_rows(rows: &[CrashRow], run: fn(&CrashRow, &str)) {
    let mut failures = Vec::new();
    for (n, row) in rows.iter().enumerate() {
        let id = format!("vm-crash-{n}");
        let outcome = std::panic::catch_unwind(|| run(row, &id));
        match outcome {
            Ok(()) => println!("{} {}: converged, retry clean", row.kind(), row.failpoints),
            Err(payload) => {
                let message = testkit::panic_message(payload.as_ref());
                failures.push(format!(
                    "{} {} ({id}): {message}",
                    row.kind(),
                    row.failpoints
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} row(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn tap_attach_interrupted_after_the_tap_or_the_dan_file_is_rolled_back() {
    if crash_tests_enabled() {
        run_rows(ATTACH_CRASHES, run_attach_crash);
    }
}

#[test]
fn dan_tap_detach_aborted_before_retiring_is_finished_by_recovery() {
    if crash_tests_enabled() {
        run_rows(&[DAN_DETACH_CRASH], run_detach_crash);
    }
}

// Guards against a bug fixed in da521bb: the Detaching commit deletes the sandbox record, so the
// detach that recovery re-runs found no netns to open, skipped the pod tap, and the tap leaked.
// An attachment now records the netns of its pod side.
#[test]
fn pod_tap_detach_aborted_before_retiring_is_finished_by_recovery() {
    if crash_tests_enabled() {
        run_rows(&[POD_DETACH_CRASH], run_detach_crash);
    }
}
