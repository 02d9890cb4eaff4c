//! Kata runtime-rs's `DanConfig` (resource/src/network/dan.rs), mirrored on the test side: the
//! file knid writes for a DAN tap, read the way Kata reads it. Stricter than Kata (unknown
//! fields are refused), so knid writes nothing Kata cannot read.

use std::fs;
use std::path::Path;

use serde::Deserialize;

/// One DAN file: the devices of one sandbox.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DanConfig {
    /// The netns the devices are in (`None`: the host's).
    pub netns: Option<String>,
    /// The devices, one per interface.
    pub devices: Vec<DanDevice>,
}

/// One device and how the guest sees it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DanDevice {
    /// The interface name in the guest.
    pub name: String,
    /// The guest's MAC.
    pub guest_mac: String,
    /// The host side.
    pub device: DanDeviceKind,
    /// Addresses, routes and neighbours the guest gets.
    pub network_info: DanNetworkInfo,
}

/// The host side of a device.
#[derive(Debug, PartialEq, Eq, Deserialize)]
#[serde(tag = "type", deny_unknown_fields)]
pub enum DanDeviceKind {
    /// A tap the VMM opens in the host netns.
    #[serde(rename = "host-tap")]
    HostTap {
        /// The tap's name.
        tap_name: String,
        /// Queues the VMM opens.
        queue_num: usize,
        /// Queue size (0: the VMM's default).
        queue_size: usize,
    },
}

/// The guest's layer 3.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DanNetworkInfo {
    /// The interface.
    pub interface: DanInterface,
    /// Routes.
    pub routes: Vec<DanRoute>,
    /// Static neighbours.
    pub neighbors: Vec<DanNeighbor>,
}

/// The guest's interface.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DanInterface {
    /// Addresses in CIDR notation.
    pub ip_addresses: Vec<String>,
    /// MTU.
    pub mtu: u64,
    /// Netlink type of the host device (`tuntap`).
    pub ntype: String,
    /// Interface flags.
    pub flags: u32,
}

/// One route of the guest.
#[derive(Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DanRoute {
    /// Destination in CIDR notation.
    pub dest: String,
    /// Next hop, empty for an on-link route.
    pub gateway: String,
    /// Preferred source, empty for none.
    pub source: String,
    /// Route scope.
    pub scope: u32,
    /// Route flags.
    pub flags: u32,
    /// MTU, 0 for the link's.
    pub mtu: u32,
}

/// One static neighbour of the guest.
#[derive(Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DanNeighbor {
    /// The neighbour's IP in CIDR notation.
    pub ip_address: Option<String>,
    /// Its MAC.
    pub hardware_addr: String,
    /// NUD state.
    pub state: u32,
    /// Neighbour flags.
    pub flags: u32,
}

/// Reads and parses the DAN file at `path`; panics naming the file when it is not a
/// `DanConfig`.
pub fn read_dan(path: &Path) -> DanConfig {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not a Kata DanConfig: {e}\n{text}", path.display()))
}
