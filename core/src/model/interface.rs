//! One interface of a sandbox: what the caller asks for (kind, tap, host device) and what knid
//! created for it.

use std::net::IpAddr;
use std::path::PathBuf;

use super::validate::Invalid;
use super::{Bandwidth, IfName, IpConfig, MacAddr, Neighbor, RouteInfo};
use crate::lifecycle::AttachmentState;

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
    /// Rate limits (kinds `veth` and `tap` only); `None` = unlimited.
    pub bandwidth: Option<Bandwidth>,
}

impl InterfaceSpec {
    /// Whether this asks for a Kata DAN tap.
    pub fn is_dan(&self) -> bool {
        self.tap.as_ref().is_some_and(|t| t.dan)
    }
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
    /// The rate limits on its host link; `None` = unlimited.
    pub bandwidth: Option<Bandwidth>,
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
    /// Whether this is a Kata DAN tap: a tap in the host netns, nothing in the sandbox netns.
    pub fn is_dan(&self) -> bool {
        self.tap.as_ref().is_some_and(|t| t.dan)
    }

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
