//! Domain types: what callers ask for and what knid answers. Protobuf types stop at `transport`;
//! these are the types the engine, IPAM and drivers speak.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;

use ipnet::IpNet;

use crate::validate::{self, Invalid};

/// A sandbox id: 1–128 chars of `[A-Za-z0-9_.-]`, starting alphanumeric (the CNI container-id rule).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SandboxId(String);

impl SandboxId {
    /// Validates `value` as a sandbox id.
    pub fn parse(value: &str) -> Result<Self, Invalid> {
        validate::sandbox_id(value).map(|()| Self(value.to_owned()))
    }

    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SandboxId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A Linux interface name: 1–15 bytes, no `/`, `:` or whitespace, not `.` or `..`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IfName(String);

impl IfName {
    /// Validates `value` as an interface name.
    pub fn parse(value: &str) -> Result<Self, Invalid> {
        validate::ifname(value).map(|()| Self(value.to_owned()))
    }

    /// The name as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for IfName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A unicast Ethernet MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// Parses `aa:bb:cc:dd:ee:ff` (or `-` separated) and rejects multicast and all-zero addresses.
    pub fn parse(value: &str) -> Result<Self, Invalid> {
        validate::mac(value).map(Self)
    }

    /// The all-zero address: not known yet (a cni interface before its plugins ran).
    pub const UNKNOWN: MacAddr = MacAddr([0; 6]);

    /// A random locally administered unicast address (first octet `x2`, `x6`, `xA` or `xE`).
    pub fn random_local() -> Self {
        let mut octets = crate::names::random_bytes::<6>();
        octets[0] = (octets[0] & 0xfc) | 0x02;
        Self(octets)
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let o = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            o[0], o[1], o[2], o[3], o[4], o[5]
        )
    }
}

/// The interface kinds knid knows; a network names its default kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InterfaceKind {
    /// A veth pair, host end on the network's bridge (or routed).
    Veth,
    /// A tap for a VM: beside the pod's veth with tc redirects, or on the bridge for DAN.
    Tap,
    /// A macvlan child of the network's parent device.
    Macvlan,
    /// An ipvlan child of the network's parent device.
    Ipvlan,
    /// An existing host device moved into the pod.
    HostDevice,
    /// Whatever a `cni` network's plugins create.
    Cni,
}

impl InterfaceKind {
    /// Parses the API spelling (`veth`, `tap`, `macvlan`, `ipvlan`, `host-device`).
    pub fn parse(value: &str) -> Result<Self, Invalid> {
        match value {
            "veth" => Ok(Self::Veth),
            "tap" => Ok(Self::Tap),
            "macvlan" => Ok(Self::Macvlan),
            "ipvlan" => Ok(Self::Ipvlan),
            "host-device" => Ok(Self::HostDevice),
            "cni" => Ok(Self::Cni),
            _ => Err(Invalid::new(
                "must be one of veth, tap, macvlan, ipvlan, host-device, cni",
            )),
        }
    }

    /// The API spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Veth => "veth",
            Self::Tap => "tap",
            Self::Macvlan => "macvlan",
            Self::Ipvlan => "ipvlan",
            Self::HostDevice => "host-device",
            Self::Cni => "cni",
        }
    }
}

/// Lifecycle state of one attachment (ARCHITECTURE §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttachmentState {
    /// Intent recorded (names and IPs reserved), no kernel object yet.
    Pending,
    /// Kernel objects being created.
    Provisioning,
    /// Fully attached and durable.
    Attached,
    /// Detach in progress.
    Detaching,
    /// Links handed to the reaper; IPs released once they are gone.
    Reaping,
    /// A failed attach being undone.
    RollingBack,
}

impl AttachmentState {
    /// Lower-case name used in the API and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Provisioning => "provisioning",
            Self::Attached => "attached",
            Self::Detaching => "detaching",
            Self::Reaping => "reaping",
            Self::RollingBack => "rolling-back",
        }
    }
}

/// The pod a sandbox belongs to (informational; keys are always sandbox ids).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodRef {
    /// Pod name.
    pub name: String,
    /// Pod namespace.
    pub namespace: String,
    /// Pod UID.
    pub uid: String,
}

/// DNS settings handed back to the caller for the pod's resolv.conf.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dns {
    /// Name servers.
    pub servers: Vec<IpAddr>,
    /// Search domains.
    pub searches: Vec<String>,
    /// resolv.conf options.
    pub options: Vec<String>,
    /// Local domain.
    pub domain: String,
}

/// A requested host port mapping (recorded; enforced by a later driver).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortMapping {
    /// Port on the host.
    pub host_port: u16,
    /// Port in the pod.
    pub container_port: u16,
    /// `tcp`, `udp` or `sctp`.
    pub protocol: String,
    /// Host address to bind, if any.
    pub host_ip: Option<IpAddr>,
}

/// One interface the caller wants in the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceSpec {
    /// Pod-side interface name.
    pub name: IfName,
    /// Network name from the configuration.
    pub network: String,
    /// Kind override; the network's default when absent.
    pub kind: Option<InterfaceKind>,
    /// Requested MAC; generated when absent.
    pub mac: Option<MacAddr>,
    /// Requested MTU; the network's when absent.
    pub mtu: Option<u32>,
    /// Addresses the caller wants instead of allocated ones (at most one per family).
    pub static_ips: Vec<IpAddr>,
    /// Tap settings (kind `tap` only).
    pub tap: Option<TapSpec>,
    /// The host device to move in (kind `host-device` only, required there).
    pub device: Option<DeviceRef>,
}

/// Most queue pairs a tap may have.
pub const MAX_QUEUE_PAIRS: u32 = 256;

/// Requested tap settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TapSpec {
    /// Queue pairs, 1–256; multi-queue when above 1.
    pub queue_pairs: u32,
    /// TUNSETOWNER, when set.
    pub owner_uid: Option<u32>,
    /// TUNSETGROUP, when set.
    pub owner_gid: Option<u32>,
    /// A host-netns tap on the bridge described by a Kata DAN file.
    pub dan: bool,
}

impl Default for TapSpec {
    fn default() -> Self {
        Self {
            queue_pairs: 1,
            owner_uid: None,
            owner_gid: None,
            dan: false,
        }
    }
}

/// A host device named by the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceRef {
    /// By its host interface name.
    Name(IfName),
    /// By PCI address (`0000:3b:00.1`), resolved through sysfs.
    Pci(String),
}

/// The tap of an interface, as a VMM needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TapInfo {
    /// Tap device name.
    pub name: String,
    /// The netns it lives in; `None` = the host netns (DAN).
    pub netns_path: Option<PathBuf>,
    /// Queue pairs.
    pub queue_pairs: u32,
    /// Created with IFF_MULTI_QUEUE.
    pub multi_queue: bool,
    /// Created with IFF_VNET_HDR.
    pub vnet_hdr: bool,
    /// Created with IFF_NO_PI.
    pub no_pi: bool,
    /// /dev/vhost-net exists and opens read-write.
    pub vhost_net_ok: bool,
    /// Owner uid, when set.
    pub owner_uid: Option<u32>,
    /// Owner gid, when set.
    pub owner_gid: Option<u32>,
    /// The interface tc redirects to and from the tap; empty for DAN.
    pub redirect_peer: String,
    /// Described to Kata by a DAN file.
    pub dan: bool,
}

/// A host device moved into the pod, and what it gets back on detach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// PCI address, when known.
    pub pci_address: Option<String>,
    /// Its name on the host.
    pub original_name: String,
    /// Its MTU on the host.
    pub original_mtu: u32,
    /// Whether it was up on the host.
    pub was_up: bool,
}

/// A validated Attach request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachRequest {
    /// Sandbox id.
    pub sandbox_id: SandboxId,
    /// Pod identity.
    pub pod: PodRef,
    /// Path of the sandbox's network namespace.
    pub netns_path: PathBuf,
    /// Interfaces to create, all or nothing.
    pub interfaces: Vec<InterfaceSpec>,
    /// DNS settings.
    pub dns: Dns,
    /// Port mappings.
    pub port_mappings: Vec<PortMapping>,
    /// Caller labels.
    pub labels: BTreeMap<String, String>,
    /// Caller annotations.
    pub annotations: BTreeMap<String, String>,
}

/// One address of an interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpConfig {
    /// Address with prefix length.
    pub address: IpNet,
    /// Gateway of its subnet, if the network has one.
    pub gateway: Option<IpAddr>,
}

/// The scope of a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteScope {
    /// Via a gateway.
    Universe,
    /// Directly on the link.
    Link,
    /// On this host only.
    Host,
}

impl RouteScope {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Universe => "universe",
            Self::Link => "link",
            Self::Host => "host",
        }
    }

    /// Parses the lower-case name.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "universe" => Some(Self::Universe),
            "link" => Some(Self::Link),
            "host" => Some(Self::Host),
            _ => None,
        }
    }
}

/// The kernel's main routing table: what a route without a table means.
pub const MAIN_TABLE: u32 = 254;

/// A route inside the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteInfo {
    /// Destination (`0.0.0.0/0` or `::/0` for default).
    pub dst: IpNet,
    /// Next hop.
    pub gateway: Option<IpAddr>,
    /// Route MTU, when set.
    pub mtu: Option<u32>,
    /// Scope.
    pub scope: RouteScope,
    /// Routing table (254 = main).
    pub table: u32,
    /// Metric (lower wins), when set.
    pub metric: Option<u32>,
}

/// A static neighbour entry inside the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Neighbor {
    /// Neighbour address.
    pub ip: IpAddr,
    /// Its MAC.
    pub mac: MacAddr,
}

/// What knid created for one requested interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceResult {
    /// Pod-side name.
    pub name: IfName,
    /// Network name.
    pub network: String,
    /// Kind created.
    pub kind: InterfaceKind,
    /// Lifecycle state.
    pub state: AttachmentState,
    /// Pod-side MAC.
    pub mac: MacAddr,
    /// Pod-side MTU.
    pub mtu: u32,
    /// Host end of the veth (or the parent device).
    pub host_ifname: String,
    /// Addresses.
    pub ips: Vec<IpConfig>,
    /// Routes.
    pub routes: Vec<RouteInfo>,
    /// Static neighbours.
    pub neighbors: Vec<Neighbor>,
    /// The tap (kind `tap`).
    pub tap: Option<TapInfo>,
    /// The host device (kind `host-device`).
    pub device: Option<DeviceInfo>,
    /// The Kata DAN file describing this interface.
    pub dan_path: Option<PathBuf>,
    /// Parent device of a macvlan or ipvlan.
    pub parent: Option<String>,
    /// macvlan or ipvlan mode.
    pub mode: Option<String>,
    /// What a `cni` network's plugins reported.
    pub cni: Option<CniInfo>,
}

/// The outcome of a `cni` interface's plugin chain.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CniInfo {
    /// The host-side interface the result names (e.g. the veth's host end), if any.
    pub host_interface: Option<String>,
    /// The chain's final result as JSON; `None` until ADD finished.
    pub result: Option<String>,
}

impl InterfaceResult {
    /// What the API reports as `host_ifname`: the host link (veth end or DAN tap), the parent of
    /// a macvlan or ipvlan, nothing for a host device. (`host_ifname` itself stays the
    /// deterministic handle knid deletes by.)
    pub fn host_side_name(&self) -> &str {
        match (self.kind, &self.parent) {
            (InterfaceKind::HostDevice, _) => "",
            (InterfaceKind::Cni, _) => self
                .cni
                .as_ref()
                .and_then(|c| c.host_interface.as_deref())
                .unwrap_or_default(),
            (_, Some(parent)) => parent,
            _ => &self.host_ifname,
        }
    }
}

/// A sandbox and everything attached to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandbox {
    /// Sandbox id.
    pub id: SandboxId,
    /// Network namespace path.
    pub netns_path: PathBuf,
    /// Inode of the netns when attached (detects a recycled path).
    pub netns_inode: u64,
    /// Device of the nsfs the netns lives on.
    pub netns_dev: u64,
    /// Bumps on every change.
    pub generation: u64,
    /// Pod identity.
    pub pod: PodRef,
    /// Interfaces in request order.
    pub interfaces: Vec<InterfaceResult>,
    /// DNS settings.
    pub dns: Dns,
    /// Port mappings.
    pub port_mappings: Vec<PortMapping>,
    /// Caller labels.
    pub labels: BTreeMap<String, String>,
    /// Caller annotations.
    pub annotations: BTreeMap<String, String>,
    /// Creation time, ms since the Unix epoch.
    pub created_at_ms: i64,
    /// Last change, ms since the Unix epoch.
    pub updated_at_ms: i64,
}

impl Sandbox {
    /// The sandbox's overall state: `Attached` when every interface is, else the first other state.
    pub fn state(&self) -> AttachmentState {
        self.interfaces
            .iter()
            .map(|i| i.state)
            .find(|s| *s != AttachmentState::Attached)
            .unwrap_or(AttachmentState::Attached)
    }
}

/// Filters for `List`; empty fields match everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListFilter {
    /// Only sandboxes with an interface on this network.
    pub network: Option<String>,
    /// Only sandboxes in this state.
    pub state: Option<AttachmentState>,
    /// Only sandboxes carrying every one of these labels.
    pub labels: BTreeMap<String, String>,
}

/// One line of `List`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSummary {
    /// Sandbox id.
    pub id: SandboxId,
    /// Pod identity.
    pub pod: PodRef,
    /// Network namespace path.
    pub netns_path: PathBuf,
    /// Overall state.
    pub state: AttachmentState,
    /// Names of its interfaces.
    pub interfaces: Vec<String>,
    /// Its addresses (without prefix).
    pub ips: Vec<IpAddr>,
    /// Networks it is attached to.
    pub networks: Vec<String>,
    /// Creation time, ms since the Unix epoch.
    pub created_at_ms: i64,
}

/// A readiness condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    /// `NetworkReady`, `IPAMAvailable`, ...
    pub kind: String,
    /// Whether it holds.
    pub status: bool,
    /// Machine-readable reason (`Exhausted`, `BridgeMissing`, ...), empty when fine.
    pub reason: String,
    /// Human-readable detail.
    pub message: String,
    /// When the status last changed, ms since the Unix epoch.
    pub since_ms: i64,
}

/// Node network status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// True when every condition holds.
    pub ready: bool,
    /// Conditions.
    pub conditions: Vec<Condition>,
    /// knid version.
    pub version: String,
    /// Kernel boot id.
    pub boot_id: String,
}

/// Address family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

impl Family {
    /// The family of an address.
    pub fn of(addr: &IpAddr) -> Self {
        match addr {
            IpAddr::V4(_) => Self::V4,
            IpAddr::V6(_) => Self::V6,
        }
    }

    /// `ipv4` or `ipv6`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::V4 => "ipv4",
            Self::V6 => "ipv6",
        }
    }
}

/// Capacity of one family of a network's pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capacity {
    /// Family.
    pub family: Family,
    /// Assignable addresses (gateway, network and broadcast excluded), saturated at `u64::MAX`.
    pub total: u64,
    /// Reserved addresses.
    pub used: u64,
    /// `total - used`.
    pub free: u64,
}

/// A configured network as reported by `Networks`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkInfo {
    /// Network name.
    pub name: String,
    /// Driver kind (`bridge`, `routed`, `macvlan`, `ipvlan`, `host-device`).
    pub kind: String,
    /// Subnets.
    pub subnets: Vec<IpNet>,
    /// Gateways, one per subnet.
    pub gateways: Vec<IpAddr>,
    /// Default MTU.
    pub mtu: u32,
    /// Bridge name; empty unless a bridge network.
    pub bridge: String,
    /// Parent device of macvlan and ipvlan networks; empty otherwise.
    pub parent: String,
    /// macvlan or ipvlan mode; empty otherwise.
    pub mode: String,
    /// Capacity per family.
    pub capacity: Vec<Capacity>,
    /// Whether pods can be attached to it now: its node side is set up and its pool (or, for a
    /// cni network, its plugins' STATUS) has room.
    pub ready: bool,
    /// Why not: `NodeNetworkBroken`, `Exhausted` or `PluginNotAvailable`; empty when ready.
    pub reason: String,
    /// Detail of `reason`.
    pub message: String,
}

/// Which attachments a `GarbageCollect` keeps (CNI 1.1 GC semantics): an attachment is valid if
/// its sandbox id is listed, or its (sandbox id, ifname) pair is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcKeep {
    /// Sandboxes whose every attachment is valid.
    pub sandboxes: BTreeSet<SandboxId>,
    /// Single valid attachments.
    pub attachments: BTreeSet<(SandboxId, IfName)>,
    /// Only attachments on this network are judged, the others are kept (the CNI GC of one
    /// network's conflist); `None` judges every network.
    pub network: Option<String>,
}

impl GcKeep {
    /// Whether sandbox `id` is named at all: whole, or by one of its attachments (ordered
    /// lookups, no scan).
    pub fn keeps_sandbox(&self, id: &str) -> bool {
        let id = SandboxId(id.to_owned());
        self.sandboxes.contains(&id)
            || self
                .attachments
                .range((id.clone(), IfName(String::new()))..)
                .next()
                .is_some_and(|(s, _)| *s == id)
    }

    /// Whether the attachment `ifname` of sandbox `id`, on `network`, is valid.
    pub fn keeps(&self, id: &str, ifname: &str, network: &str) -> bool {
        if self.network.as_deref().is_some_and(|n| n != network) {
            return true;
        }
        let id = SandboxId(id.to_owned());
        self.sandboxes.contains(&id) || self.attachments.contains(&(id, IfName(ifname.to_owned())))
    }
}

/// A garbage collection request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcRequest {
    /// `Some`: every attachment not kept is detached. `None`: only the sweep runs (netns gone,
    /// interrupted operations, orphaned links and reservations).
    pub keep: Option<GcKeep>,
    /// Report what would be removed without removing anything.
    pub dry_run: bool,
}

/// The kind of object a GC finding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum GcObject {
    /// An attachment (record, kernel objects and addresses), detached.
    Attachment,
    /// A host link with knid's name or link group and no record, deleted.
    HostLink,
    /// A sandbox record without attachments, deleted.
    Sandbox,
    /// An address reservation whose owner has no record, released.
    Reservation,
    /// A Kata DAN file of a sandbox without DAN taps, removed.
    DanFile,
    /// A network namespace knid created, unmounted and removed.
    Netns,
}

impl GcObject {
    /// `attachment`, `host-link`, `sandbox`, `reservation`, `dan-file` or `netns`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Attachment => "attachment",
            Self::HostLink => "host-link",
            Self::Sandbox => "sandbox",
            Self::Reservation => "reservation",
            Self::DanFile => "dan-file",
            Self::Netns => "netns",
        }
    }
}

/// Why a GC finding is removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum GcReason {
    /// Not in the caller's valid list.
    NotValid,
    /// Its netns no longer exists (or is another namespace now).
    NetnsGone,
    /// Left half-done by an interrupted attach or detach.
    Interrupted,
    /// A kernel object without a record.
    NoRecord,
    /// A reservation whose owner has no record.
    NoOwner,
}

impl GcReason {
    /// `not-valid`, `netns-gone`, `interrupted`, `no-record` or `no-owner`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotValid => "not-valid",
            Self::NetnsGone => "netns-gone",
            Self::Interrupted => "interrupted",
            Self::NoRecord => "no-record",
            Self::NoOwner => "no-owner",
        }
    }
}

/// One thing GC removed (or, in a dry run, would remove).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct GcFinding {
    /// Sandbox id, when the object belongs to one (empty for an orphaned link).
    pub sandbox_id: String,
    /// Pod-side interface name, when known.
    pub ifname: String,
    /// What the object is.
    pub what: GcObject,
    /// Why it goes.
    pub reason: GcReason,
    /// The object itself: a link name, an address (`network/addr`), a netns path.
    pub detail: String,
}

/// The outcome of a garbage collection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcReport {
    /// Removed (or, in a dry run, removable) objects, sorted.
    pub removed: Vec<GcFinding>,
    /// What could not be removed, one message each.
    pub errors: Vec<String>,
    /// Whether this was a dry run.
    pub dry_run: bool,
}

/// A network namespace to create (CreateNetns, KNI CreateNetwork).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetnsRequest {
    /// Key of the netns: the sandbox id of CreateNetns, or [`kni_netns_owner`] of a KNI pod.
    pub owner: SandboxId,
    /// File name under `netns_dir`; `None` means `knid-<owner>`.
    pub name: Option<String>,
    /// The KNI pod it is for, when known.
    pub pod: Option<PodRef>,
    /// Pod labels (recorded).
    pub labels: std::collections::BTreeMap<String, String>,
    /// Pod annotations (recorded).
    pub annotations: std::collections::BTreeMap<String, String>,
}

/// A network namespace knid created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetnsInfo {
    /// Key of the netns (see [`NetnsRequest::owner`]).
    pub owner: String,
    /// Path of the bind mount.
    pub path: std::path::PathBuf,
    /// nsfs inode of the namespace.
    pub inode: u64,
    /// Whether this call created it (false for a repeat).
    pub created: bool,
    /// The sandbox attached in it, when linked (KNI AttachInterface); the owner for CreateNetns.
    pub sandbox_id: String,
    /// The KNI pod it was created for, if any.
    pub pod: Option<PodRef>,
}

/// How to find the netns a KNI DeleteNetwork means: the first of these that names a recorded
/// netns wins.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetnsLookup {
    /// A sandbox id: the owner, or the sandbox linked to the netns.
    pub sandbox_id: Option<String>,
    /// The netns path.
    pub path: Option<std::path::PathBuf>,
    /// Pod (namespace, name): matches only when exactly one recorded netns has it.
    pub pod: Option<(String, String)>,
}

/// The owner key of the netns of a KNI pod: `kni-<uid>`, or `kni-<namespace>.<name>` without a
/// uid. Errors name the KNI field at fault.
pub fn kni_netns_owner(uid: &str, namespace: &str, name: &str) -> Result<SandboxId, crate::Error> {
    let key = if uid.is_empty() {
        if namespace.is_empty() || name.is_empty() {
            return Err(Invalid::new("uid, or both namespace and name, must be set").at("uid"));
        }
        format!("kni-{namespace}.{name}")
    } else {
        format!("kni-{uid}")
    };
    SandboxId::parse(&key).map_err(|e| e.at(if uid.is_empty() { "name" } else { "uid" }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_sandbox_names_a_whole_sandbox_or_one_with_a_kept_attachment() {
        let id = |s: &str| SandboxId::parse(s).expect("id");
        let keep = GcKeep {
            sandboxes: [id("whole")].into(),
            attachments: [(id("pod-a"), IfName::parse("net1").expect("ifname"))].into(),
            network: None,
        };
        assert!(keep.keeps_sandbox("whole"));
        assert!(keep.keeps_sandbox("pod-a"));
        assert!(
            !keep.keeps_sandbox("pod"),
            "a prefix of a kept id is not kept"
        );
        assert!(!keep.keeps_sandbox("pod-b"));
    }
}
