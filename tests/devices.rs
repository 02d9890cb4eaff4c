//! macvlan, ipvlan and host-device interfaces end to end, checked against the kernel: children
//! of a parent the test creates (every macvlan and ipvlan mode), host devices moved into a
//! sandbox by name or PCI address and given back with their name, MTU and state — after a
//! detach, a refusal, a crash at any step, or the death of their netns.

use std::net::IpAddr;
use std::os::unix::process::ExitStatusExt;
use std::panic::{self, AssertUnwindSafe};
use std::path::Path;
use std::time::Duration;

use ipnet::IpNet;
use knid_netops::{ChildKind, ChildSpec, IpvlanMode, Link, MacvlanMode};
use knid_transport::{pb, ClientError};
use protobuf::MessageField;
use testkit::{expect_code, names_field, TestNode, RPC, SETTLE};

/// The environment variable arming failpoints.
const FAILPOINTS: &str = "KNID_FAILPOINTS";
/// `std::process::abort` raises SIGABRT.
const SIGABRT: i32 = 6;
/// How long knid may take to die once an aborting failpoint is due.
const DEATH: Duration = Duration::from_secs(10);

/// A host-device network; the device's own MTU is kept unless a request sets one.
const HOST_DEVICE_NETWORK: &str = r#"
[networks.hd]
kind = "host-device"
subnets = ["10.82.0.0/24", "fd00:82::/64"]
"#;
/// The stand-in host NIC of the host-device tests, and its MTU on the host.
const NIC: &str = "hostnic0";
const NIC_MTU: u32 = 1280;

/// A macvlan or ipvlan network of the test config and what its children must look like.
struct ChildNet {
    name: &'static str,
    kind: &'static str,
    /// The test device the test creates as the parent, in knid's host netns.
    parent: &'static str,
    mode: &'static str,
    /// Whether the config spells the mode out (else knid's default must be this one).
    explicit_mode: bool,
    /// Picks the subnets 10.81.<n>.0/24 and fd00:81:<n>::/64.
    n: u8,
}

const MACVLANS: &[ChildNet] = &[
    ChildNet {
        name: "mv-bridge",
        kind: "macvlan",
        parent: "pbridge0",
        mode: "bridge",
        explicit_mode: false,
        n: 1,
    },
    ChildNet {
        name: "mv-private",
        kind: "macvlan",
        parent: "pprivate0",
        mode: "private",
        explicit_mode: true,
        n: 2,
    },
    ChildNet {
        name: "mv-vepa",
        kind: "macvlan",
        parent: "pvepa0",
        mode: "vepa",
        explicit_mode: true,
        n: 3,
    },
    ChildNet {
        name: "mv-passthru",
        kind: "macvlan",
        parent: "ppassthru0",
        mode: "passthru",
        explicit_mode: true,
        n: 4,
    },
];

const IPVLANS: &[ChildNet] = &[
    ChildNet {
        name: "ipv-l2",
        kind: "ipvlan",
        parent: "pl2",
        mode: "l2",
        explicit_mode: false,
        n: 5,
    },
    ChildNet {
        name: "ipv-l3",
        kind: "ipvlan",
        parent: "pl3",
        mode: "l3",
        explicit_mode: true,
        n: 6,
    },
];

impl ChildNet {
    fn subnets(&self) -> [IpNet; 2] {
        [
            format!("10.81.{}.0/24", self.n).parse().expect("cidr"),
            format!("fd00:81:{}::/64", self.n).parse().expect("cidr"),
        ]
    }

    fn config(&self) -> String {
        let [v4, v6] = self.subnets();
        let mode = if self.explicit_mode {
            format!("mode = \"{}\"\n", self.mode)
        } else {
            String::new()
        };
        format!(
            "[networks.{}]\nkind = \"{}\"\nparent = \"{}\"\n{mode}subnets = [\"{v4}\", \"{v6}\"]\n",
            self.name, self.kind, self.parent
        )
    }

    /// A passthru macvlan and an ipvlan carry their parent's MAC.
    fn shares_parent_mac(&self) -> bool {
        self.kind == "ipvlan" || self.mode == "passthru"
    }

    /// Whether the kernel link is this network's kind in this network's mode.
    fn check_link(&self, link: &Link) {
        assert_eq!(
            link.kind.as_deref(),
            Some(self.kind),
            "kind of {}",
            link.name
        );
        match self.kind {
            "macvlan" => assert_eq!(
                link.macvlan_mode,
                MacvlanMode::parse(self.mode),
                "macvlan mode of {}",
                link.name
            ),
            _ => assert_eq!(
                link.ipvlan_mode,
                IpvlanMode::parse(self.mode),
                "ipvlan mode of {}",
                link.name
            ),
        }
    }
}

/// One interface on `network`, of `kind` ("" = the network's default).
fn iface_req(name: &str, network: &str, kind: &str) -> pb::InterfaceRequest {
    pb::InterfaceRequest {
        name: name.to_owned(),
        network: network.to_owned(),
        kind: kind.to_owned(),
        ..Default::default()
    }
}

/// An Attach of sandbox `id` in `netns` with the single interface `iface`.
fn attach_one(id: &str, netns: &Path, iface: pb::InterfaceRequest) -> pb::AttachRequest {
    pb::AttachRequest {
        sandbox_id: id.to_owned(),
        netns_path: netns.display().to_string(),
        interfaces: vec![iface],
        ..Default::default()
    }
}

/// An Attach of sandbox `id` moving `device` into `netns` as `ifname` (network `hd`).
fn device_req(
    id: &str,
    netns: &Path,
    ifname: &str,
    device: pb::DeviceRequest,
) -> pb::AttachRequest {
    let mut iface = iface_req(ifname, "hd", "host-device");
    iface.device = MessageField::some(device);
    attach_one(id, netns, iface)
}

fn by_name(name: &str) -> pb::DeviceRequest {
    pb::DeviceRequest {
        name: name.to_owned(),
        ..Default::default()
    }
}

fn by_pci(pci: &str) -> pb::DeviceRequest {
    pb::DeviceRequest {
        pci_address: pci.to_owned(),
        ..Default::default()
    }
}

/// The NetworkReady condition of Status.
fn network_ready(node: &TestNode) -> pb::Condition {
    node.client()
        .status(RPC)
        .expect("Status")
        .conditions
        .into_iter()
        .find(|c| c.type_ == "NetworkReady")
        .expect("Status has NetworkReady")
}

/// Names of the links in the netns at `path`, sorted.
fn link_names(path: &Path) -> Vec<String> {
    let mut names: Vec<String> = testkit::links_in(path)
        .into_iter()
        .map(|l| l.name)
        .collect();
    names.sort();
    names
}

/// Waits until the netns at `path` holds nothing but `lo`.
fn wait_only_lo(path: &Path) {
    testkit::wait_for(&format!("only lo in {}", path.display()), SETTLE, || {
        link_names(path) == ["lo"]
    });
}

/// Addresses of link `name` in the netns at `path` that are not IPv6 link-local.
fn global_addresses(path: &Path, name: &str) -> Vec<IpNet> {
    testkit::addresses_in(path, name)
        .into_iter()
        .filter(|a| !testkit::is_link_local(a.addr()))
        .collect()
}

/// The address after the network address: the gateway knid picks when none is configured.
fn first_address(subnet: &IpNet) -> IpAddr {
    match subnet {
        IpNet::V4(net) => IpAddr::V4((u32::from(net.network()) + 1).into()),
        IpNet::V6(net) => IpAddr::V6((u128::from(net.network()) + 1).into()),
    }
}

/// Checks the addresses of an interface result: one per family, inside the network's subnets
/// with their prefix length, the gateway the first host address.
fn check_ips(iface: &pb::InterfaceResult, subnets: &[IpNet; 2]) {
    for (family, subnet) in ["ipv4", "ipv6"].into_iter().zip(subnets) {
        let (addr, gateway) = testkit::ip_of(iface, family);
        assert!(subnet.contains(&addr.addr()), "{addr} outside {subnet}");
        assert_eq!(addr.prefix_len(), subnet.prefix_len(), "prefix of {addr}");
        assert_eq!(gateway, first_address(subnet), "gateway of {subnet}");
    }
}

/// Attaches `nets`' children and checks them in the kernel, the replies and the API; then
/// detaches them and checks nothing is left. Parents are created after knid started, as an
/// operator may do: knid must report them missing until then.
fn check_children(nets: &[ChildNet]) {
    let config: String = nets.iter().map(ChildNet::config).collect();
    let mut node = TestNode::start(&config);

    let cond = network_ready(&node);
    assert!(!cond.status, "ready without parents: {cond:?}");
    for net in nets {
        let why = format!(
            "network {}: parent device {} is missing",
            net.name, net.parent
        );
        assert!(cond.message.contains(&why), "{why:?} not in {cond:?}");
    }
    let parents: Vec<Link> = nets
        .iter()
        .map(|n| node.host_test_device(n.parent, None, true))
        .collect();
    testkit::wait_for("NetworkReady once the parents exist", SETTLE, || {
        network_ready(&node).status
    });
    let supported = nets
        .iter()
        .zip(&parents)
        .all(|(net, parent)| kernel_supports(&node, net, parent));

    for net in nets {
        let info = node.network(net.name);
        assert_eq!(info.kind, net.kind, "Networks kind of {}", net.name);
        assert_eq!(info.parent, net.parent, "Networks parent of {}", net.name);
        assert_eq!(info.mode, net.mode, "Networks mode of {}", net.name);
        assert_eq!(info.bridge, "", "Networks bridge of {}", net.name);
        let subnets: Vec<String> = net.subnets().iter().map(ToString::to_string).collect();
        assert_eq!(info.subnets, subnets, "Networks subnets of {}", net.name);
    }

    if !supported {
        refuse_unsupported_children(&mut node, nets);
        return;
    }

    let client = node.client();
    let mut attached = Vec::new();
    for (net, parent) in nets.iter().zip(&parents) {
        // A passthru macvlan is its parent's only child; the other modes take several.
        let pods = if net.mode == "passthru" { 1 } else { 2 };
        for k in 0..pods {
            let id = format!("{}-{k}", net.name);
            let netns = node.netns(&id);
            // The kind is left to the network for macvlans and spelled out for ipvlans.
            let kind = if net.kind == "ipvlan" { net.kind } else { "" };
            let req = attach_one(&id, &netns, iface_req("data0", net.name, kind));
            let sandbox = client
                .attach(&req, RPC)
                .unwrap_or_else(|e| panic!("Attach {id}: {e}"));
            assert_eq!(sandbox.state, "attached");
            let iface = &sandbox.interfaces[0];
            assert_eq!(
                (
                    iface.name.as_str(),
                    iface.kind.as_str(),
                    iface.mode.as_str()
                ),
                ("data0", net.kind, net.mode),
                "{id}: result"
            );
            assert_eq!(
                iface.host_ifname, net.parent,
                "{id}: host_ifname is the parent"
            );
            assert_eq!(iface.network, net.name);
            assert_eq!(iface.state, "attached");
            assert_eq!(iface.mtu, 1500);
            assert!(iface.device.is_none() && iface.tap.is_none(), "{iface:?}");
            check_ips(iface, &net.subnets());
            testkit::assert_pod_side(&netns, iface);
            let link = testkit::link_in(&netns, "data0").expect("data0 in the sandbox");
            net.check_link(&link);
            let parent_mac = parent.mac.expect("the parent has a MAC");
            if net.shares_parent_mac() {
                assert_eq!(link.mac, Some(parent_mac), "{id}: MAC is the parent's");
            } else {
                assert_ne!(link.mac, Some(parent_mac), "{id}: MAC is its own");
            }
            // Created under a temporary kn* name on the host, nothing of it stays there.
            let left = node.host_kn_links();
            assert!(
                left.is_empty(),
                "{id}: kn* links in the host netns: {left:?}"
            );
            attached.push((id, netns, sandbox));
        }
        if net.mode == "passthru" {
            refuse_second_passthru_child(&node, net);
        }
    }
    for (net, parent) in nets.iter().zip(&parents) {
        let now = testkit::link_in(node.host_path(), net.parent).expect("parent still there");
        assert_eq!((now.index, now.up), (parent.index, true), "{}", net.name);
        let pods = attached
            .iter()
            .filter(|(_, _, s)| s.interfaces[0].network == net.name)
            .count();
        assert_eq!(
            node.capacity_used(net.name),
            2 * pods as u64,
            "{}",
            net.name
        );
    }

    for (id, netns, sandbox) in &attached {
        // Still as attached, siblings and all.
        testkit::assert_pod_side(netns, &sandbox.interfaces[0]);
        client
            .detach(&testkit::detach_req(id), RPC)
            .unwrap_or_else(|e| panic!("Detach {id}: {e}"));
        node.assert_not_found(id);
        wait_only_lo(netns);
    }
    for (net, parent) in nets.iter().zip(&parents) {
        node.wait_capacity_used(net.name, 0);
        let now = testkit::link_in(node.host_path(), net.parent).expect("parent still there");
        assert_eq!((now.index, now.up), (parent.index, true), "{}", net.name);
    }
    node.wait_no_kn_links();
    assert!(node.list_ids().is_empty(), "List: {:?}", node.list_ids());
    drop(client);

    let store = node.stop_with_empty_store(nets[0].name);
    for net in nets {
        let left = store.reservations(net.name).expect("reservations");
        assert!(left.is_empty(), "{}: reservations left: {left:?}", net.name);
    }
}

/// Whether this kernel can make `net`'s children (some are built without CONFIG_IPVLAN): a probe
/// child of `parent`, made and deleted by the test itself.
fn kernel_supports(node: &TestNode, net: &ChildNet, parent: &Link) -> bool {
    let kind = match net.kind {
        "macvlan" => ChildKind::Macvlan(MacvlanMode::parse(net.mode).expect("macvlan mode")),
        _ => ChildKind::Ipvlan(IpvlanMode::parse(net.mode).expect("ipvlan mode")),
    };
    let probe = ChildSpec {
        name: "probe0".to_owned(),
        parent: parent.index,
        kind,
        mtu: None,
        mac: None,
    };
    let mut rtnl = node.host_rtnl();
    match rtnl.create_child(&probe) {
        Ok(()) => {
            assert!(rtnl.delete_link_by_name("probe0").expect("delete probe0"));
            true
        }
        // "Unknown device type": the driver is not in this kernel.
        Err(e) if e.errno() == Some(libc::EOPNOTSUPP) => false,
        Err(e) => panic!("probe a {} child of {}: {e}", net.kind, net.parent),
    }
}

/// On a kernel without `nets`' driver: every attach fails (FailedPrecondition) naming the kind
/// and the network, and rolls back whole. Says loudly that the children themselves could not be checked.
fn refuse_unsupported_children(node: &mut TestNode, nets: &[ChildNet]) {
    let test = std::thread::current()
        .name()
        .unwrap_or("this test")
        .to_owned();
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!(
            "\n!!!!!!!! {test}: this kernel has no {} driver: only knid's clean refusal is \
             checked, not the children themselves. !!!!!!!!\n",
            nets[0].kind
        )
        .as_bytes(),
    );
    for net in nets {
        let id = format!("{}-0", net.name);
        let netns = node.netns(&id);
        let req = attach_one(&id, &netns, iface_req("data0", net.name, net.kind));
        let message = expect_code(
            node.client().attach(&req, RPC),
            ttrpc::Code::FAILED_PRECONDITION,
            "a child the kernel cannot make",
        );
        assert!(
            message.contains(net.kind) && message.contains(net.name),
            "{id}: the error does not name the kind and the network: {message}"
        );
        node.assert_not_found(&id);
        assert_eq!(link_names(&netns), ["lo"], "{id}: links left in its netns");
        node.wait_no_kn_links();
        node.wait_capacity_used(net.name, 0);
    }
    let store = node.stop_with_empty_store(nets[0].name);
    for net in nets {
        let left = store.reservations(net.name).expect("reservations");
        assert!(left.is_empty(), "{}: reservations left: {left:?}", net.name);
    }
}

/// A second child of a passthru parent is refused by the kernel: FailedPrecondition naming the
/// parent, and the attach rolls back whole.
fn refuse_second_passthru_child(node: &TestNode, net: &ChildNet) {
    let id = format!("{}-extra", net.name);
    let netns = node.netns(&id);
    let req = attach_one(&id, &netns, iface_req("data0", net.name, ""));
    let message = expect_code(
        node.client().attach(&req, RPC),
        ttrpc::Code::FAILED_PRECONDITION,
        "a second passthru child",
    );
    assert!(
        message.contains(net.parent) && message.contains("passthru"),
        "the error does not name the parent {} and passthru: {message}",
        net.parent
    );
    node.assert_not_found(&id);
    assert_eq!(link_names(&netns), ["lo"], "{id}: links left in its netns");
    assert!(node.host_kn_links().is_empty(), "{id}: kn* link left");
    assert_eq!(node.capacity_used(net.name), 2, "{id}: addresses kept");
}

#[test]
fn macvlan_children_in_every_mode_carry_parent_and_mode_and_detach_leaves_nothing() {
    if !testkit::privileged() {
        return;
    }
    check_children(MACVLANS);
}

#[test]
fn ipvlan_children_in_l2_and_l3_carry_parent_and_mode_and_detach_leaves_nothing() {
    if !testkit::privileged() {
        return;
    }
    check_children(IPVLANS);
}

/// Checks the device `dev` (as it was on the host before the attach) is back in the host netns
/// with its name, MAC, MTU and state, no longer carrying any pod address.
fn assert_device_home(node: &TestNode, dev: &Link) {
    let name = &dev.name;
    let link = testkit::link_in(node.host_path(), name)
        .unwrap_or_else(|| panic!("device {name} is not back in the host netns"));
    assert_eq!(link.mac, dev.mac, "MAC of {name}");
    assert_eq!(link.mtu, dev.mtu, "MTU of {name} on the host");
    assert_eq!(link.up, dev.up, "state of {name} on the host");
    assert_eq!(link.kind, dev.kind, "kind of {name}");
    let addrs = global_addresses(node.host_path(), name);
    assert!(addrs.is_empty(), "{name} kept addresses: {addrs:?}");
}

/// Detaches sandbox `id` and checks its device `dev` is home when Detach returns.
fn detach_device(node: &TestNode, id: &str, dev: &Link) {
    node.client()
        .detach(&testkit::detach_req(id), RPC)
        .unwrap_or_else(|e| panic!("Detach {id}: {e}"));
    // Given back before Detach returns.
    assert_device_home(node, dev);
}

/// After the last detach: nothing in the sandbox, on the host, in the pool or in the store.
fn assert_all_gone(node: &mut TestNode, netns: &Path) {
    assert_eq!(link_names(netns), ["lo"], "left in the sandbox");
    node.wait_no_kn_links();
    node.wait_capacity_used("hd", 0);
    node.stop_with_empty_store("hd");
}

/// Checks a host device moved into `netns` as `iface` describes, and away from the host.
fn assert_device_inside(node: &TestNode, netns: &Path, iface: &pb::InterfaceResult, dev: &Link) {
    assert_eq!(iface.kind, "host-device");
    assert_eq!(iface.host_ifname, "", "a host device has no host side");
    assert_eq!(iface.mode, "");
    assert_eq!(iface.state, "attached");
    assert_eq!(
        Some(testkit::parse_mac(&iface.mac)),
        dev.mac,
        "reported MAC"
    );
    let device = iface.device.as_ref().expect("device in the result");
    assert_eq!(device.original_name, dev.name);
    assert_eq!(device.original_mtu, dev.mtu);
    let [v4, v6]: [IpNet; 2] = ["10.82.0.0/24", "fd00:82::/64"].map(|s| s.parse().expect("cidr"));
    check_ips(iface, &[v4, v6]);
    testkit::assert_pod_side(netns, iface);
    let inside = testkit::link_in(netns, &iface.name).expect("device in the sandbox");
    assert_eq!(inside.kind, dev.kind, "the device itself moved in");
    assert!(
        testkit::link_in(node.host_path(), &dev.name).is_none(),
        "{} is still in the host netns",
        dev.name
    );
    let same_mac: Vec<String> = testkit::links_in(node.host_path())
        .into_iter()
        .filter(|l| l.mac == dev.mac)
        .map(|l| l.name)
        .collect();
    assert!(same_mac.is_empty(), "host links with its MAC: {same_mac:?}");
    assert!(node.host_kn_links().is_empty(), "kn* link on the host");
}

#[test]
fn host_device_by_name_moves_in_renamed_and_comes_back_with_its_name_mtu_and_state() {
    if !testkit::privileged() {
        return;
    }
    let mut node = TestNode::start(HOST_DEVICE_NETWORK);
    let dev = node.host_test_device(NIC, Some(NIC_MTU), true);
    let netns = node.netns("hd");
    let info = node.network("hd");
    assert_eq!(
        (info.kind.as_str(), info.parent.as_str(), info.mode.as_str()),
        ("host-device", "", "")
    );

    let req = device_req("pod-hd", &netns, "net1", by_name(NIC));
    let sandbox = node.client().attach(&req, RPC).expect("Attach");
    let iface = &sandbox.interfaces[0];
    assert_eq!(
        (iface.name.as_str(), iface.network.as_str()),
        ("net1", "hd")
    );
    assert_eq!(iface.mtu, NIC_MTU, "the device keeps its MTU by default");
    assert_eq!(iface.device.pci_address, "");
    assert_device_inside(&node, &netns, iface, &dev);
    assert_eq!(node.capacity_used("hd"), 2);

    detach_device(&node, "pod-hd", &dev);
    assert_eq!(link_names(&netns), ["lo"], "left in the sandbox");
    node.wait_capacity_used("hd", 0);
    node.assert_not_found("pod-hd");

    // Again, with an MTU of the pod's own: the host gets its MTU back all the same.
    let mut req = device_req("pod-hd", &netns, "net1", by_name(NIC));
    req.interfaces[0].mtu = 1400;
    let sandbox = node.client().attach(&req, RPC).expect("Attach again");
    let iface = &sandbox.interfaces[0];
    assert_eq!(iface.mtu, 1400);
    assert_eq!(iface.device.original_mtu, NIC_MTU);
    assert_device_inside(&node, &netns, iface, &dev);
    detach_device(&node, "pod-hd", &dev);
    assert_all_gone(&mut node, &netns);
}

#[test]
fn host_device_by_pci_address_is_found_through_sysfs_and_bad_addresses_are_refused() {
    if !testkit::privileged() {
        return;
    }
    // A fake sysfs: one function carrying the test's device, one carrying no netdev.
    let sys = tempfile::Builder::new()
        .prefix("knid-e2e-sys-")
        .tempdir()
        .expect("create sysfs tempdir");
    let devices = sys.path().join("bus/pci/devices");
    std::fs::create_dir_all(devices.join("0000:00:1f.6/net/pcinic0")).expect("fake PCI netdev");
    std::fs::create_dir_all(devices.join("0000:00:1f.5")).expect("fake PCI function");
    let config = format!(
        "sysfs = \"{}\"\n{HOST_DEVICE_NETWORK}",
        sys.path().display()
    );
    let mut node = TestNode::start(&config);
    // Down on the host, with an MTU of its own: both come back.
    let dev = node.host_test_device("pcinic0", Some(1300), false);
    let netns = node.netns("pci");

    let req = device_req("pod-pci", &netns, "net0", by_pci("0000:00:1f.6"));
    let sandbox = node
        .client()
        .attach(&req, RPC)
        .expect("Attach by PCI address");
    let iface = &sandbox.interfaces[0];
    assert_eq!(iface.name, "net0");
    assert_eq!(iface.device.pci_address, "0000:00:1f.6");
    assert_eq!(iface.mtu, 1300);
    assert_device_inside(&node, &netns, iface, &dev);

    let other = node.netns("other");
    let refusals = [
        (
            by_pci("0000:00:1f.7"),
            ttrpc::Code::FAILED_PRECONDITION,
            "0000:00:1f.7",
        ),
        (
            by_pci("0000:00:1f.5"),
            ttrpc::Code::FAILED_PRECONDITION,
            "0000:00:1f.5",
        ),
        (
            by_pci("0000:00:1F.6"),
            ttrpc::Code::INVALID_ARGUMENT,
            "interfaces[0].device.pci_address",
        ),
        (
            by_pci("00:1f.6"),
            ttrpc::Code::INVALID_ARGUMENT,
            "interfaces[0].device.pci_address",
        ),
    ];
    for (device, code, named) in refusals {
        let what = format!("pci_address {:?}", device.pci_address);
        let req = device_req("pod-other", &other, "net0", device);
        let message = expect_code(node.client().attach(&req, RPC), code, &what);
        let names = if code == ttrpc::Code::INVALID_ARGUMENT {
            names_field(&message, named)
        } else {
            message.contains(named)
        };
        assert!(names, "{what}: {message:?} does not name {named}");
        node.assert_not_found("pod-other");
        assert_eq!(link_names(&other), ["lo"], "{what}: left in its netns");
    }
    assert_eq!(node.capacity_used("hd"), 2, "only pod-pci holds addresses");

    detach_device(&node, "pod-pci", &dev);
    assert_all_gone(&mut node, &netns);
}

/// Devices a pod must not take. Loopback once failed late, its all-zero MAC left a record no
/// reader could parse, and List failed for every caller; another network's parent, taken by a
/// pod, left that network and the node NotReady for as long as the pod lived.
#[test]
fn devices_of_the_node_or_of_another_network_are_refused_and_nothing_is_recorded() {
    if !testkit::privileged() {
        return;
    }
    const PARENT: &str = "takenparent0";
    let mut node = TestNode::start(&format!(
        "{HOST_DEVICE_NETWORK}\n[networks.mv]\nkind = \"macvlan\"\nparent = \"{PARENT}\"\n\
         subnets = [\"10.83.0.0/24\"]\n"
    ));
    let parent = node.host_test_device(PARENT, None, true);
    let netns = node.netns("a");
    for (device, owner) in [
        ("lo", "the loopback device"),
        (PARENT, "the parent of network mv"),
    ] {
        let message = expect_code(
            node.client()
                .attach(&device_req("pod-a", &netns, "net1", by_name(device)), RPC),
            ttrpc::Code::FAILED_PRECONDITION,
            device,
        );
        assert!(
            message.contains(device) && message.contains(owner),
            "{message:?} does not name {device} and its owner ({owner})"
        );
    }
    // Nothing recorded, so every read still works; nothing moved, so the network stays ready.
    assert!(
        node.list_ids().is_empty(),
        "recorded: {:?}",
        node.list_ids()
    );
    node.assert_not_found("pod-a");
    assert_eq!(link_names(&netns), ["lo"], "left in pod-a's netns");
    let still = testkit::link_in(node.host_path(), PARENT).expect("the parent left the host");
    assert_eq!((still.index, still.up), (parent.index, true));
    assert!(network_ready(&node).status, "{:?}", network_ready(&node));
    node.stop_with_empty_store("hd");
}

/// Adds 10.84.0.2/24 on `dev` and a default route through it, in `node`'s host netns.
fn make_uplink(node: &TestNode, dev: &Link) {
    let mut rtnl = node.host_rtnl();
    rtnl.add_address(dev.index, "10.84.0.2/24".parse().expect("address"))
        .expect("address on the uplink");
    rtnl.add_route(&knid_netops::Route::default_via(
        "10.84.0.1".parse().expect("gateway"),
        dev.index,
    ))
    .expect("default route through the uplink");
}

/// Taking the node's uplink cuts the node off: refused unless the network says it may.
#[test]
fn the_nodes_uplink_is_refused_unless_the_network_allows_it() {
    if !testkit::privileged() {
        return;
    }
    const UPLINK: &str = "uplink0";
    let mut node = TestNode::start(HOST_DEVICE_NETWORK);
    let dev = node.host_test_device(UPLINK, None, true);
    make_uplink(&node, &dev);
    let netns = node.netns("a");
    let message = expect_code(
        node.client()
            .attach(&device_req("pod-a", &netns, "net1", by_name(UPLINK)), RPC),
        ttrpc::Code::FAILED_PRECONDITION,
        "the uplink",
    );
    assert!(
        message.contains(UPLINK) && message.contains("uplink") && message.contains("allow_uplink"),
        "{message:?} does not say the device is the uplink and how to allow it"
    );
    node.assert_not_found("pod-a");
    assert!(
        testkit::link_in(node.host_path(), UPLINK).is_some(),
        "the uplink left"
    );
    node.stop_with_empty_store("hd");

    // With allow_uplink, the same request is served and the device comes back on detach.
    let mut node = TestNode::start(&format!("{HOST_DEVICE_NETWORK}allow_uplink = true\n"));
    let dev = node.host_test_device(UPLINK, None, true);
    make_uplink(&node, &dev);
    let netns = node.netns("a");
    let a = node
        .client()
        .attach(&device_req("pod-a", &netns, "net1", by_name(UPLINK)), RPC)
        .expect("Attach the uplink where allowed");
    assert_device_inside(&node, &netns, &a.interfaces[0], &dev);
    detach_device(&node, "pod-a", &dev);
    node.wait_capacity_used("hd", 0);
    node.stop_with_empty_store("hd");
}

#[test]
fn host_device_requests_that_cannot_be_served_are_refused_naming_why() {
    if !testkit::privileged() {
        return;
    }
    let mut node = TestNode::start(HOST_DEVICE_NETWORK);
    let dev = node.host_test_device(NIC, Some(NIC_MTU), true);
    let a_ns = node.netns("a");
    let b_ns = node.netns("b");
    let req_a = device_req("pod-a", &a_ns, "net1", by_name(NIC));
    let a = node.client().attach(&req_a, RPC).expect("Attach pod-a");
    // Repeated by its holder, the attach is idempotent, not a conflict.
    let again = node
        .client()
        .attach(&req_a, RPC)
        .expect("Attach pod-a again");
    assert_eq!(again, a, "repeated Attach differs");

    let held = expect_code(
        node.client()
            .attach(&device_req("pod-b", &b_ns, "net1", by_name(NIC)), RPC),
        ttrpc::Code::FAILED_PRECONDITION,
        "a device held by pod-a",
    );
    assert!(
        held.contains("pod-a") && held.contains(NIC),
        "{held:?} does not name the holder and the device"
    );

    let missing = expect_code(
        node.client().attach(
            &device_req("pod-b", &b_ns, "net1", by_name("nosuchnic0")),
            RPC,
        ),
        ttrpc::Code::FAILED_PRECONDITION,
        "a missing device",
    );
    assert!(
        missing.contains("nosuchnic0") && missing.contains("not in the host netns"),
        "{missing:?} does not say the device is missing"
    );

    let mut with_mac = device_req("pod-b", &b_ns, "net1", by_name(NIC));
    with_mac.interfaces[0].mac = "02:42:ac:11:00:2a".to_owned();
    let message = expect_code(
        node.client().attach(&with_mac, RPC),
        ttrpc::Code::INVALID_ARGUMENT,
        "a MAC for a host device",
    );
    assert!(names_field(&message, "interfaces[0].mac"), "{message:?}");

    let mut both = device_req("pod-b", &b_ns, "net1", by_name(NIC));
    both.interfaces[0]
        .device
        .mut_or_insert_default()
        .pci_address = "0000:00:1f.6".to_owned();
    let message = expect_code(
        node.client().attach(&both, RPC),
        ttrpc::Code::INVALID_ARGUMENT,
        "name and pci_address",
    );
    assert!(names_field(&message, "interfaces[0].device"), "{message:?}");

    let mut no_device = device_req("pod-b", &b_ns, "net1", by_name(NIC));
    no_device.interfaces[0].device = MessageField::none();
    let message = expect_code(
        node.client().attach(&no_device, RPC),
        ttrpc::Code::INVALID_ARGUMENT,
        "no device",
    );
    assert!(names_field(&message, "interfaces[0].device"), "{message:?}");

    // Nothing of pod-b anywhere; pod-a untouched.
    node.assert_not_found("pod-b");
    assert_eq!(link_names(&b_ns), ["lo"], "left in pod-b's netns");
    assert_eq!(node.list_ids(), ["pod-a"]);
    assert_eq!(node.capacity_used("hd"), 2);
    assert_device_inside(&node, &a_ns, &a.interfaces[0], &dev);

    detach_device(&node, "pod-a", &dev);
    // Free again: pod-b gets it.
    let b = node
        .client()
        .attach(&device_req("pod-b", &b_ns, "net1", by_name(NIC)), RPC)
        .expect("Attach pod-b once pod-a let go");
    assert_device_inside(&node, &b_ns, &b.interfaces[0], &dev);
    detach_device(&node, "pod-b", &dev);
    node.wait_capacity_used("hd", 0);
    node.stop_with_empty_store("hd");
}

#[test]
fn host_device_dies_with_its_deleted_netns_and_gc_detaches_the_record_cleanly() {
    if !testkit::privileged() {
        return;
    }
    let config = format!("gc_interval = \"0s\"\n{HOST_DEVICE_NETWORK}");
    let mut node = TestNode::start(&config);
    let dev = node.host_test_device(NIC, Some(NIC_MTU), true);
    let netns = node.netns("doomed");
    let sandbox = node
        .client()
        .attach(&device_req("pod-doomed", &netns, "net1", by_name(NIC)), RPC)
        .expect("Attach");
    assert_device_inside(&node, &netns, &sandbox.interfaces[0], &dev);

    // A virtual device, unlike a physical one, is destroyed by the kernel with its namespace.
    node.remove_netns(&netns);
    let sweep = pb::GarbageCollectRequest {
        sweep_only: true,
        ..Default::default()
    };
    let resp = node.client().garbage_collect(&sweep, RPC).expect("GC");
    assert!(resp.errors.is_empty(), "GC errors: {:?}", resp.errors);
    let found: Vec<(String, String, String, String)> = resp
        .removed
        .into_iter()
        .map(|f| (f.sandbox_id, f.ifname, f.what, f.reason))
        .collect();
    assert_eq!(
        found,
        [(
            "pod-doomed".to_owned(),
            "net1".to_owned(),
            "attachment".to_owned(),
            "netns-gone".to_owned()
        )]
    );
    node.assert_not_found("pod-doomed");
    node.wait_capacity_used("hd", 0);
    node.wait_no_kn_links();
    assert!(
        testkit::link_in(node.host_path(), NIC).is_none(),
        "{NIC} came back though it died with its netns"
    );
    let again = node.client().garbage_collect(&sweep, RPC).expect("GC");
    assert!(
        again.removed.is_empty() && again.errors.is_empty(),
        "second GC: {again:?}"
    );
    node.stop_with_empty_store("hd");
}

/// The operation a crash row interrupts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// Attach of a new sandbox, with the failpoint armed from the start.
    Attach,
    /// Detach of a sandbox attached before the failpoint was armed.
    Detach,
}

/// Where each host-device crash row aborts knid: after the move and after the routes (the
/// device inside, the attachment Provisioning), after Detaching is durable (the device still
/// inside) and after the pod side was released (the device already back).
const CRASH_ROWS: &[(&str, Op)] = &[
    ("attach.device_moved", Op::Attach),
    ("attach.routed", Op::Attach),
    ("detach.detaching", Op::Detach),
    ("detach.retired", Op::Detach),
];

/// The failpoints of the host-device kind ([`testkit::KIND_FAILPOINTS`] lists every kind's).
const DEVICE_FAILPOINTS: &[&str] = &["attach.device_moved"];

#[test]
fn crash_rows_cover_the_host_device_failpoints() {
    for (name, _) in CRASH_ROWS {
        assert!(
            knid_core::failpoint::NAMES.contains(name),
            "{name} is not a knid failpoint"
        );
    }
    for name in DEVICE_FAILPOINTS {
        assert!(
            testkit::KIND_FAILPOINTS.contains(name),
            "{name} missing from KIND_FAILPOINTS"
        );
        assert!(
            CRASH_ROWS
                .iter()
                .any(|(n, op)| n == name && *op == Op::Attach),
            "no crash row aborts at {name}"
        );
    }
}

#[test]
fn host_device_goes_back_to_the_host_after_a_crash_at_each_step() {
    if !testkit::privileged() || !testkit::failpoints_built() {
        return;
    }
    let mut failures = Vec::new();
    for (n, (failpoint, op)) in CRASH_ROWS.iter().enumerate() {
        let id = format!("crash-{n}");
        if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| {
            crash_row(failpoint, *op, &id);
        })) {
            failures.push(format!(
                "{failpoint} ({op:?}): {}",
                testkit::panic_message(payload.as_ref())
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} row(s) failed:\n{}",
        failures.len(),
        CRASH_ROWS.len(),
        failures.join("\n")
    );
}

/// One row on a fresh node: abort knid at `failpoint` during `op`, restart, and check the device
/// is home, nothing of the sandbox is left, and the device can be attached and detached again.
fn crash_row(failpoint: &str, op: Op, id: &str) {
    let armed = format!("{failpoint}=abort");
    let (mut node, dev, netns, result) = match op {
        Op::Attach => {
            let node = TestNode::start_with(HOST_DEVICE_NETWORK, &[(FAILPOINTS, &armed)], &[]);
            let dev = node.host_test_device(NIC, Some(NIC_MTU), true);
            let netns = node.netns(id);
            let result = node
                .client()
                .attach(&device_req(id, &netns, "net1", by_name(NIC)), RPC)
                .map(drop);
            (node, dev, netns, result)
        }
        Op::Detach => {
            let mut node = TestNode::start(HOST_DEVICE_NETWORK);
            let dev = node.host_test_device(NIC, Some(NIC_MTU), true);
            let netns = node.netns(id);
            node.client()
                .attach(&device_req(id, &netns, "net1", by_name(NIC)), RPC)
                .expect("Attach before the failpoint is armed");
            let status = node.stop();
            assert_eq!(status.code(), Some(0), "knid exit status {status}");
            node.set_env(FAILPOINTS, Some(&armed));
            node.restart();
            let result = node.client().detach(&testkit::detach_req(id), RPC);
            (node, dev, netns, result)
        }
    };
    match result {
        Err(ClientError::Transport(_)) => {}
        other => panic!("expected no reply (knid aborted), got {other:?}"),
    }
    let status = node.wait_exit(DEATH);
    assert_eq!(status.signal(), Some(SIGABRT), "knid exit status {status}");
    let line = format!("failpoint {failpoint}: aborting");
    assert!(node.log_text().contains(&line), "knid's log lacks {line:?}");
    // Where the crash left the device: inside, except once the detach had given it back.
    let inside = testkit::link_in(&netns, "net1").is_some();
    assert_eq!(inside, failpoint != "detach.retired", "net1 in the sandbox");
    assert_eq!(
        testkit::link_in(node.host_path(), NIC).is_some(),
        !inside,
        "{NIC} on the host"
    );

    node.set_env(FAILPOINTS, None);
    node.restart();
    assert_device_home(&node, &dev);
    assert_eq!(link_names(&netns), ["lo"], "left in the sandbox");
    node.assert_not_found(id);
    assert!(node.list_ids().is_empty(), "List: {:?}", node.list_ids());
    node.wait_capacity_used("hd", 0);
    node.wait_no_kn_links();
    node.stop_with_empty_store("hd");

    node.restart();
    let retried = node
        .client()
        .attach(&device_req(id, &netns, "net1", by_name(NIC)), RPC)
        .expect("Attach retried");
    assert_device_inside(&node, &netns, &retried.interfaces[0], &dev);
    detach_device(&node, id, &dev);
    node.wait_capacity_used("hd", 0);
    node.stop_with_empty_store("hd");
}
