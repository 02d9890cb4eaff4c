//! A real guest on each kind of knid tap (docs/architecture.md#a-real-guest-on-each-tap): QEMU
//! boots Debian's kernel with a busybox initramfs (testkit/src/guest.rs) on a pod tap of a
//! bridge network, on a pod tap of a routed network, and on a DAN tap configured from knid's
//! DAN file alone. An ordinary veth pod on the same network is the other end: the guest pings
//! it until it answers, the pod connects to the guest's echo server, and the guest powers off
//! on the pod's request. Boot-to-first-reply is printed per model; detach leaves no tap. The
//! guest's datagrams from its own address reach the pod, those from an address it forges do
//! not: its tap's host link is guarded (docs/architecture.md#source-address-guards).
//!
//! KVM when /dev/kvm runs a probe guest, else TCG (`KNID_GUEST_ACCEL=kvm|tcg` decides).

use std::net::IpAddr;
use std::path::Path;

use knid_transport::pb;
use protobuf::MessageField;
use tempfile::TempDir;
use testkit::dan::{read_dan, DanDeviceKind};
use testkit::guest::{self, Guest, GuestNic, GuestSpec};
use testkit::spoof;
use testkit::{TestNode, RPC, SETTLE};

/// The default bridge network, a routed one beside it, and a private DAN directory.
const NETWORKS: &str = r#"
[networks.default]
bridge = "knid0"
subnets = ["10.88.0.0/24", "fd00:88::/64"]
mtu = 1500

[networks.routed]
kind = "routed"
subnets = ["10.99.0.0/24", "fd00:99::/64"]
mtu = 1500
"#;

/// How the guest's tap is attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Model {
    /// A tap beside the veth end in the sandbox netns, tc redirects between them (`tcfilter`).
    PodTap,
    /// The same on a routed network: /32 addresses, link-local gateways, static neighbours.
    RoutedPodTap,
    /// A tap on the bridge in the host netns, described by a Kata DAN file.
    Dan,
}

impl Model {
    fn network(self) -> &'static str {
        match self {
            Model::RoutedPodTap => "routed",
            Model::PodTap | Model::Dan => "default",
        }
    }

    /// Queue pairs asked of knid: one on the plain pod tap, two (a multi-queue tap, mq
    /// virtio-net) on the others.
    fn queue_pairs(self) -> u32 {
        match self {
            Model::PodTap => 1,
            Model::RoutedPodTap | Model::Dan => 2,
        }
    }

    /// IP families the guest and the pod exchange traffic on. Routed pods reach their IPv6
    /// gateway through a static neighbour, which busybox cannot add (its `ip` has no `neigh
    /// add`), so the routed guest is tested on IPv4 only.
    fn families(self) -> &'static [bool] {
        match self {
            Model::RoutedPodTap => &[false],
            Model::PodTap | Model::Dan => &[false, true],
        }
    }
}

fn family(ipv6: bool) -> &'static str {
    if ipv6 {
        "ipv6"
    } else {
        "ipv4"
    }
}

/// Attaches `id` with one `eth0` on `model`'s network, a tap of `model` or (`tap: None`) a
/// veth.
fn attach(
    node: &TestNode,
    id: &str,
    netns: &Path,
    model: Model,
    tap: Option<pb::TapRequest>,
) -> pb::Sandbox {
    let mut req = testkit::attach_req(id, netns, "eth0");
    req.interfaces[0].network = model.network().to_owned();
    if let Some(tap) = tap {
        req.interfaces[0].kind = "tap".to_owned();
        req.interfaces[0].tap = MessageField::some(tap);
    }
    node.client()
        .attach(&req, RPC)
        .unwrap_or_else(|e| panic!("Attach {id}: {e}"))
}

fn guest_and_veth_pod_exchange_traffic(model: Model) {
    let Some(kernel) = guest::kernel_for_test() else {
        return;
    };
    let dans = tempfile::Builder::new()
        .prefix("knid-e2e-dans-")
        .tempdir()
        .expect("create DAN tempdir");
    let config = format!("dan_dir = \"{}\"\n{NETWORKS}", dans.path().display());
    let node = TestNode::start(&config);

    let pod_ns = node.netns("pod");
    let pod = attach(&node, "pod", &pod_ns, model, None);
    let peers: Vec<IpAddr> = model
        .families()
        .iter()
        .map(|v6| testkit::ip_of(&pod.interfaces[0], family(*v6)).0.addr())
        .collect();

    let vm_ns = node.netns("vm");
    let tap_req = pb::TapRequest {
        queue_pairs: model.queue_pairs(),
        dan: model == Model::Dan,
        ..Default::default()
    };
    let vm = attach(&node, "vm", &vm_ns, model, Some(tap_req));
    let iface = &vm.interfaces[0];
    let tap = iface
        .tap
        .as_ref()
        .unwrap_or_else(|| panic!("no tap result in {iface:?}"));

    // What QEMU is told: for a DAN tap only what the file says, as Kata reads it.
    let (nic, qemu_ns, tap_name, queue_pairs, vhost) = if model == Model::Dan {
        let dan = read_dan(Path::new(&iface.dan_path));
        assert_eq!(dan.devices.len(), 1, "{dan:?}");
        let dev = &dan.devices[0];
        let DanDeviceKind::HostTap {
            tap_name,
            queue_num,
            ..
        } = &dev.device;
        let pairs = u32::try_from(*queue_num).expect("queue_num fits u32");
        // The file leaves vhost-net to the VMM, which checks the device itself.
        let vhost = knid_netops::tap::vhost_net_usable();
        (
            GuestNic::from_dan(dev),
            node.host_path(),
            tap_name.clone(),
            pairs,
            vhost,
        )
    } else {
        let nic = GuestNic::from_result(iface);
        (
            nic,
            vm_ns.as_path(),
            tap.name.clone(),
            tap.queue_pairs,
            tap.vhost_net_ok,
        )
    };
    assert_eq!(nic.mac, iface.mac, "the guest's MAC");

    let mut guest = Guest::boot(
        &kernel,
        &GuestSpec {
            netns: qemu_ns,
            tap: &tap_name,
            queue_pairs,
            vhost,
            nic: &nic,
            ping: &peers,
        },
    );
    let first = guest.first_reply(&peers);
    let (up, _) = guest.expect_line("UP");
    // What the guest's driver made of the tap: knid's MAC and MTU, a queue pair per queue (the
    // guest has a CPU per queue pair, up to two).
    let (_, eth0) = guest.expect_line("eth0 ");
    assert_eq!(
        eth0,
        format!(
            "{} mtu {} rx-queues {}",
            nic.mac,
            nic.mtu,
            queue_pairs.min(2)
        ),
        "eth0 in the guest\n{}",
        guest.console()
    );
    println!(
        "{model:?}: boot-to-first-reply {:.3}s (eth0 configured at {:.3}s) under {:?} ({} queue \
         pair(s), vhost {vhost}, kernel {})",
        first.as_secs_f64(),
        up.as_secs_f64(),
        guest.accel(),
        queue_pairs,
        kernel.package
    );

    // The pod reaches the guest's echo server on each family, then has it power off.
    for v6 in model.families() {
        let addr = nic
            .address(*v6)
            .unwrap_or_else(|| panic!("the guest has no {} address", family(*v6)));
        assert_eq!(
            guest.echo(&pod_ns, addr, "hello from the pod"),
            "guest hello from the pod",
            "echo from {addr}"
        );
    }
    guest_forges_in_vain(&node, &guest, &nic, model, &pod_ns, &peers);
    let v4 = nic.address(false).expect("the guest has an IPv4 address");
    guest.power_off(&pod_ns, v4);
    drop(guest);

    // Detach: no tap left (a pod tap goes before the reply, a DAN tap via the reaper).
    node.client()
        .detach(&testkit::detach_req("vm"), RPC)
        .expect("Detach vm");
    if model == Model::Dan {
        assert!(
            !Path::new(&iface.dan_path).exists(),
            "DAN file outlived Detach"
        );
        testkit::wait_for("the DAN tap reaped", SETTLE, || {
            node.host_rtnl()
                .link_by_name(&tap_name)
                .expect("look up")
                .is_none()
        });
    } else {
        assert!(
            testkit::link_in(&vm_ns, &tap_name).is_none(),
            "tap left in the sandbox after Detach replied"
        );
    }
    node.client()
        .detach(&testkit::detach_req("pod"), RPC)
        .expect("Detach pod");
    testkit::wait_only_lo(&vm_ns);
    testkit::wait_only_lo(&pod_ns);
    node.wait_no_kn_links();
    node.wait_capacity_used(model.network(), 0);
    drop(node);
    drop::<TempDir>(dans);
}

/// An address of `model`'s network nobody holds, for the guest to forge.
fn forged(model: Model, ipv6: bool) -> IpAddr {
    let text = match (model.network(), ipv6) {
        ("routed", false) => "10.99.0.200",
        ("routed", true) => "fd00:99::200",
        (_, false) => "10.88.0.200",
        (_, true) => "fd00:88::200",
    };
    text.parse().expect("an address")
}

/// The guest (its root is the tenant's) pings the pod at `peers` from its own address, which
/// arrives, then from an address it forges, which the source guard of its tap's host link drops:
/// nothing arrives and the guard counts it.
fn guest_forges_in_vain(
    node: &TestNode,
    guest: &Guest,
    nic: &GuestNic,
    model: Model,
    pod_ns: &Path,
    peers: &[IpAddr],
) {
    let wire = spoof::wire(pod_ns, "eth0");
    for (v6, peer) in model.families().iter().zip(peers) {
        let own = nic
            .address(*v6)
            .unwrap_or_else(|| panic!("the guest has no {} address", family(*v6)));
        guest.send_from(pod_ns, own, own, *peer);
        assert!(
            spoof::caught(&wire, |f| echo_request_from(f, own)),
            "{model:?}: the guest's pings from its own {own} did not arrive"
        );
        // The pings, or the ARP or NDP the guest's kernel sends from the forged address first.
        let drops = || -> u64 {
            ["ip", "arp", "nd"]
                .iter()
                .map(|r| spoof::dropped(node, r))
                .sum()
        };
        let before = drops();
        let source = forged(model, *v6);
        guest.send_from(pod_ns, own, source, *peer);
        assert!(
            !spoof::caught(&wire, |f| echo_request_from(f, source)),
            "{model:?}: a ping the guest sent from {source} arrived"
        );
        assert!(
            drops() > before,
            "{model:?}: the guard dropped nothing of the guest's forgery"
        );
    }
}

/// Whether Ethernet frame `f` is an ICMP or ICMPv6 echo request from `src`.
fn echo_request_from(f: &[u8], src: IpAddr) -> bool {
    match src {
        IpAddr::V4(s) => {
            f.get(12..14) == Some(&[0x08, 0x00][..])
                && f.get(23) == Some(&1)
                && f.get(26..30) == Some(&s.octets()[..])
                && f.get(34) == Some(&8)
        }
        IpAddr::V6(s) => {
            f.get(12..14) == Some(&[0x86, 0xdd][..])
                && f.get(20) == Some(&58)
                && f.get(22..38) == Some(&s.octets()[..])
                && f.get(54) == Some(&128)
        }
    }
}

#[test]
fn guest_on_a_pod_tap_exchanges_traffic_with_a_veth_pod() {
    guest_and_veth_pod_exchange_traffic(Model::PodTap);
}

#[test]
fn guest_on_a_routed_pod_tap_exchanges_traffic_with_a_veth_pod() {
    guest_and_veth_pod_exchange_traffic(Model::RoutedPodTap);
}

#[test]
fn guest_on_a_dan_tap_configured_from_the_dan_file_exchanges_traffic_with_a_veth_pod() {
    guest_and_veth_pod_exchange_traffic(Model::Dan);
}
