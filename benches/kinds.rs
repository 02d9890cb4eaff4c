//! Attach/detach latency of every interface kind side by side, through the real knid over its
//! socket, in a private network namespace: one knid with a network per driver.
//!
//! Per kind, 5 warm-up cycles, then `KNID_BENCH_N` (default 200) sequential cycles of: create a
//! sandbox netns (not timed), Attach (timed), Detach (timed). Prints p50/p90/p99/max of each in
//! ms and the cycles per second of the timed part, then one table of all kinds with each attach
//! p50 relative to the baseline, a veth on a bridge network (the kind benches/perf.rs
//! measures). Between kinds the reaper is waited for (every address released, no knid link
//! left) and the kind's netns are removed, so one kind's clean-up never slows the next.
//!
//! A kind the kernel cannot make (ipvlan without CONFIG_IPVLAN), or one knid fails, is reported
//! with its reason and skipped. Numbers are reported, never asserted.

use std::fmt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use knid_netops::{Rtnl, VethEnd, VethSpec};
use knid_transport::{pb, ClientError, RuntimeClient};
use protobuf::MessageField;
use testkit::measure::{env_count, ms, percentile, report};
use testkit::wait::wait_until;
use testkit::{TestNode, RPC};

/// Cycles run before measuring each kind, so first-use costs are excluded.
const WARM_UP: usize = 5;
/// How long the reaper may take to release a kind's addresses and links.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the kernel is given to tear down a kind's removed netns: per netns, plus a floor.
const NETNS_TEARDOWN_PER_NETNS: Duration = Duration::from_millis(10);
const NETNS_TEARDOWN_MIN: Duration = Duration::from_millis(500);

/// veth pairs the bench creates in knid's host netns, as (the end knid uses, its peer): this
/// kernel has no dummy driver (CONFIG_DUMMY off), so a veth end stands in for a host NIC.
const MACVLAN_PARENT: (&str, &str) = ("benchmv0", "benchmv1");
const IPVLAN_PARENT: (&str, &str) = ("benchipv0", "benchipv1");
const HOST_DEVICE: (&str, &str) = ("benchdev0", "benchdev1");

/// One network per driver; every subnet leaves room for thousands of sandboxes.
fn networks_config() -> String {
    format!(
        r#"
[networks.default]
bridge = "knid0"
subnets = ["10.88.0.0/16", "fd00:88::/64"]

[networks.routed]
kind = "routed"
subnets = ["10.77.0.0/16", "fd00:77::/64"]

[networks.macvlan]
kind = "macvlan"
parent = "{}"
mode = "bridge"
subnets = ["10.76.0.0/16", "fd00:76::/64"]

[networks.ipvlan]
kind = "ipvlan"
parent = "{}"
subnets = ["10.75.0.0/16", "fd00:75::/64"]

[networks.hostdev]
kind = "host-device"
subnets = ["10.74.0.0/16", "fd00:74::/64"]
"#,
        MACVLAN_PARENT.0, IPVLAN_PARENT.0
    )
}

/// An interface kind as the bench requests it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// veth on a bridge network: the baseline.
    BridgeVeth,
    /// veth on a routed network.
    RoutedVeth,
    /// A tap beside a veth in the sandbox netns (Kata tcfilter model).
    Tap { queue_pairs: u32 },
    /// A host-netns tap on the bridge plus a Kata DAN file.
    DanTap,
    /// A macvlan child (mode bridge) of [`MACVLAN_PARENT`].
    Macvlan,
    /// An ipvlan child of [`IPVLAN_PARENT`].
    Ipvlan,
    /// [`HOST_DEVICE`] moved in, and back out on detach.
    HostDevice,
}

const KINDS: [Kind; 8] = [
    Kind::BridgeVeth,
    Kind::RoutedVeth,
    Kind::Tap { queue_pairs: 1 },
    Kind::Tap { queue_pairs: 4 },
    Kind::DanTap,
    Kind::Macvlan,
    Kind::Ipvlan,
    Kind::HostDevice,
];

impl Kind {
    fn label(self) -> String {
        match self {
            Kind::BridgeVeth => "veth (bridge)".to_owned(),
            Kind::RoutedVeth => "veth (routed)".to_owned(),
            Kind::Tap { queue_pairs } => format!("tap ({queue_pairs} qp)"),
            Kind::DanTap => "DAN tap".to_owned(),
            Kind::Macvlan => "macvlan".to_owned(),
            Kind::Ipvlan => "ipvlan".to_owned(),
            Kind::HostDevice => "host-device".to_owned(),
        }
    }

    /// Prefix of the kind's sandbox ids (and netns file names).
    fn slug(self) -> String {
        match self {
            Kind::BridgeVeth => "veth-bridge".to_owned(),
            Kind::RoutedVeth => "veth-routed".to_owned(),
            Kind::Tap { queue_pairs } => format!("tap{queue_pairs}"),
            Kind::DanTap => "dan".to_owned(),
            Kind::Macvlan => "macvlan".to_owned(),
            Kind::Ipvlan => "ipvlan".to_owned(),
            Kind::HostDevice => "hostdev".to_owned(),
        }
    }

    fn network(self) -> &'static str {
        match self {
            Kind::BridgeVeth | Kind::Tap { .. } | Kind::DanTap => "default",
            Kind::RoutedVeth => "routed",
            Kind::Macvlan => "macvlan",
            Kind::Ipvlan => "ipvlan",
            Kind::HostDevice => "hostdev",
        }
    }

    fn interface(self) -> pb::InterfaceRequest {
        let mut iface = pb::InterfaceRequest {
            name: "eth0".to_owned(),
            network: self.network().to_owned(),
            ..Default::default()
        };
        match self {
            Kind::BridgeVeth | Kind::RoutedVeth => {}
            Kind::Tap { queue_pairs } => {
                iface.kind = "tap".to_owned();
                iface.tap = MessageField::some(pb::TapRequest {
                    queue_pairs,
                    ..Default::default()
                });
            }
            Kind::DanTap => {
                iface.kind = "tap".to_owned();
                iface.tap = MessageField::some(pb::TapRequest {
                    queue_pairs: 1,
                    dan: true,
                    ..Default::default()
                });
            }
            Kind::Macvlan => iface.kind = "macvlan".to_owned(),
            Kind::Ipvlan => iface.kind = "ipvlan".to_owned(),
            Kind::HostDevice => {
                iface.kind = "host-device".to_owned();
                iface.device = MessageField::some(pb::DeviceRequest {
                    name: HOST_DEVICE.0.to_owned(),
                    ..Default::default()
                });
            }
        }
        iface
    }
}

/// The timed cycles of one kind.
struct Measured {
    label: String,
    /// Sorted by [`report`], before the table reads percentiles.
    attach: Vec<Duration>,
    detach: Vec<Duration>,
    /// knid's `vhost_net_ok` of the kind's taps.
    vhost_net_ok: Option<bool>,
}

impl Measured {
    fn cycles_per_sec(&self) -> f64 {
        let busy: Duration = self.attach.iter().chain(&self.detach).sum();
        self.attach.len() as f64 / busy.as_secs_f64()
    }
}

/// Why a kind was not measured.
enum NotMeasured {
    /// knid answered FailedPrecondition naming the kernel option the driver needs.
    NoKernelSupport { option: String },
    /// An RPC failed.
    Rpc { what: String, error: ClientError },
    /// knid answered, but the kernel does not show what it promised.
    Broken(String),
}

impl fmt::Display for NotMeasured {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoKernelSupport { option } => {
                write!(f, "not supported by this kernel ({option} off)")
            }
            Self::Rpc { what, error } => write!(f, "{what} failed: {error}"),
            Self::Broken(what) => f.write_str(what),
        }
    }
}

fn main() {
    if !testkit::privileged() {
        return;
    }
    let cycles = env_count("KNID_BENCH_N", 200);
    let mut node = TestNode::start(&networks_config());
    set_dan_dir(&mut node);
    let devices = StandInDevices::create(&node);
    let client = node.client();
    println!(
        "knid kinds: {cycles} sequential attach+detach cycles per kind after {WARM_UP} warm-up \
         cycles (dual stack, netns creation excluded)"
    );
    let mut measured = Vec::new();
    for kind in KINDS {
        let mut netns = Vec::new();
        let label = kind.label();
        match run_kind(&node, &client, kind, cycles, &mut netns) {
            Ok(mut m) => {
                println!("\n{label}");
                report("attach", &mut m.attach);
                report("detach", &mut m.detach);
                println!("churn   {:.0} cycles/s", m.cycles_per_sec());
                if let Some(ok) = m.vhost_net_ok {
                    println!(
                        "vhost   /dev/vhost-net usable: {} (knid's vhost_net_ok)",
                        if ok { "yes" } else { "no" }
                    );
                }
                if kind == Kind::HostDevice {
                    println!(
                        "        detach includes moving {} back to the host (synchronous: it \
                         was back when Detach returned, every cycle)",
                        HOST_DEVICE.0
                    );
                }
                measured.push(m);
            }
            Err(why) => println!("\n{label}: {why} — not measured"),
        }
        clean_up_kind(&node, kind, netns);
    }
    print_table(&measured);
    devices.remove(&node);
    assert!(node.list_ids().is_empty(), "sandboxes left after the bench");
}

/// Points knid's `dan_dir` into the node's tempdir (unknown before the node starts), so DAN
/// files go with it: rewrites the config and restarts knid.
fn set_dan_dir(node: &mut TestNode) {
    let dans = node.dir().join("dans");
    let config = std::fs::read_to_string(node.config_path()).expect("read knid config");
    // Top-level keys must precede the network tables.
    let config = format!("dan_dir = \"{}\"\n{config}", dans.display());
    std::fs::write(node.config_path(), config).expect("write knid config");
    let status = node.stop();
    assert!(status.success(), "knid exit status {status}");
    node.restart();
}

/// The veth pairs standing in for host NICs in knid's host netns (this kernel has no dummy
/// driver): macvlan and ipvlan parents, and the host device.
struct StandInDevices;

impl StandInDevices {
    fn create(node: &TestNode) -> StandInDevices {
        let mut rtnl = node.host_rtnl();
        for (name, peer) in [MACVLAN_PARENT, IPVLAN_PARENT, HOST_DEVICE] {
            let end = |name: &str| VethEnd {
                name: name.to_owned(),
                mtu: None,
                mac: None,
            };
            rtnl.create_veth(&VethSpec {
                host: end(name),
                peer: end(peer),
                peer_netns: None,
                host_controller: None,
            })
            .unwrap_or_else(|e| panic!("create veth {name}/{peer}: {e}"));
            for link in [name, peer] {
                set_up(&mut rtnl, link);
            }
        }
        StandInDevices
    }

    /// Deletes the pairs (each end takes its peer along).
    fn remove(self, node: &TestNode) {
        let mut rtnl = node.host_rtnl();
        for (name, _) in [MACVLAN_PARENT, IPVLAN_PARENT, HOST_DEVICE] {
            match rtnl.delete_link_by_name(name) {
                Ok(true) => {}
                Ok(false) => println!("warning: {name} was gone from knid's host netns"),
                Err(e) => println!("warning: delete {name}: {e}"),
            }
        }
    }
}

fn set_up(rtnl: &mut Rtnl, name: &str) {
    let link = rtnl
        .link_by_name(name)
        .unwrap_or_else(|e| panic!("look up {name}: {e}"))
        .unwrap_or_else(|| panic!("{name} missing"));
    rtnl.set_up(link.index)
        .unwrap_or_else(|e| panic!("set {name} up: {e}"));
}

/// Warm-up and timed cycles of `kind`; the netns it creates are pushed to `netns`.
fn run_kind(
    node: &TestNode,
    client: &RuntimeClient,
    kind: Kind,
    cycles: usize,
    netns: &mut Vec<PathBuf>,
) -> Result<Measured, NotMeasured> {
    let mut host = node.host_rtnl();
    let mut m = Measured {
        label: kind.label(),
        attach: Vec::with_capacity(cycles),
        detach: Vec::with_capacity(cycles),
        vhost_net_ok: None,
    };
    for i in 0..WARM_UP + cycles {
        let id = format!("{}-{i}", kind.slug());
        let path = node.netns(&id);
        netns.push(path.clone());
        let req = pb::AttachRequest {
            sandbox_id: id.clone(),
            netns_path: path.display().to_string(),
            interfaces: vec![kind.interface()],
            ..Default::default()
        };
        let started = Instant::now();
        let sandbox = client
            .attach(&req, RPC)
            .map_err(|error| attach_failed(&id, error))?;
        let attached = Instant::now();
        client
            .detach(&testkit::detach_req(&id), RPC)
            .map_err(|error| NotMeasured::Rpc {
                what: format!("Detach of {id}"),
                error,
            })?;
        let detached = Instant::now();
        if kind == Kind::HostDevice && !in_host(&mut host, HOST_DEVICE.0) {
            return Err(NotMeasured::Broken(format!(
                "{} was not back in the host netns when Detach of {id} returned",
                HOST_DEVICE.0
            )));
        }
        if i >= WARM_UP {
            m.attach.push(attached - started);
            m.detach.push(detached - attached);
        }
        if let Some(tap) = sandbox.interfaces.first().and_then(|i| i.tap.as_ref()) {
            m.vhost_net_ok = Some(tap.vhost_net_ok);
        }
    }
    Ok(m)
}

/// A failed Attach: the kernel's missing driver when knid says so (FailedPrecondition naming
/// the CONFIG_ option), else the error.
fn attach_failed(id: &str, error: ClientError) -> NotMeasured {
    if let ClientError::Rpc { code, message } = &error {
        let option = message
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .find(|word| word.starts_with("CONFIG_"));
        if let (ttrpc::Code::FAILED_PRECONDITION, Some(option)) = (*code, option) {
            return NotMeasured::NoKernelSupport {
                option: option.to_owned(),
            };
        }
    }
    NotMeasured::Rpc {
        what: format!("Attach of {id}"),
        error,
    }
}

fn in_host(host: &mut Rtnl, name: &str) -> bool {
    host.link_by_name(name)
        .unwrap_or_else(|e| panic!("look up {name}: {e}"))
        .is_some()
}

/// Detaches whatever `kind` left attached (after a failure), waits for the reaper to finish
/// (its network's addresses all released, no knid link left on the host), then removes the
/// kind's netns and gives the kernel time to tear them down: both would otherwise run during
/// the next kind's cycles.
fn clean_up_kind(node: &TestNode, kind: Kind, netns: Vec<PathBuf>) {
    let client = node.client();
    for id in node.list_ids() {
        if let Err(e) = client.detach(&testkit::detach_req(&id), RPC) {
            println!("warning: clean-up Detach of {id}: {e}");
        }
    }
    let network = kind.network();
    let drained = wait_until(DRAIN_TIMEOUT, Duration::from_millis(10), || {
        node.capacity_used(network) == 0 && node.host_kn_links().is_empty()
    });
    if !drained {
        println!(
            "warning: {}: the reaper had not released network {network} ({} addresses used) \
             and the knid links {:?} after {DRAIN_TIMEOUT:?}",
            kind.label(),
            node.capacity_used(network),
            node.host_kn_links()
                .iter()
                .map(|l| &l.name)
                .collect::<Vec<_>>(),
        );
    }
    for path in &netns {
        node.remove_netns(path);
    }
    // The kernel tears removed netns down in a workqueue after the umount returns (200 took
    // ~1.3 s here). Nothing counts live netns exactly (slabinfo counts whole slabs), so wait a
    // time proportional to their number.
    std::thread::sleep(NETNS_TEARDOWN_PER_NETNS * netns.len() as u32 + NETNS_TEARDOWN_MIN);
}

fn print_table(measured: &[Measured]) {
    let p50 = |samples: &[Duration]| ms(percentile(samples, 50.0));
    let baseline = measured
        .iter()
        .find(|m| m.label == Kind::BridgeVeth.label())
        .map(|m| p50(&m.attach));
    println!(
        "\n{:<15} | {:>13} | {:>13} | {:>13} | {:>9} | {:>13}",
        "kind", "attach p50 ms", "attach p90 ms", "detach p50 ms", "cycles/s", "attach p50 ×"
    );
    println!("{}", "-".repeat(90));
    for m in measured {
        let ratio = baseline.map_or("-".to_owned(), |b| format!("{:.2}", p50(&m.attach) / b));
        println!(
            "{:<15} | {:>13.3} | {:>13.3} | {:>13.3} | {:>9.0} | {:>13}",
            m.label,
            p50(&m.attach),
            ms(percentile(&m.attach, 90.0)),
            p50(&m.detach),
            m.cycles_per_sec(),
            ratio
        );
    }
    println!("(attach p50 × = the kind's attach p50 over the bridge veth's)");
}
