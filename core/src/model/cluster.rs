//! Cluster mode as `Status` reports it: the API server and the watch, this node's pod CIDR and
//! where it came from, the routes to the other nodes' pods, and what knid published on its own
//! Node.

use std::net::IpAddr;

use ipnet::IpNet;

/// Cluster mode's state.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClusterInfo {
    /// This node's name (its Node object).
    pub node_name: String,
    /// The API server (`https://host:port`).
    pub api_server: String,
    /// Whether the last list or watch got an answer.
    pub api_reachable: bool,
    /// The last error talking to the API server; empty while reachable.
    pub api_message: String,
    /// When the API server last answered, ms since the Unix epoch (0: never).
    pub last_contact_ms: i64,
    /// The resource version the Node watch runs from.
    pub resource_version: String,
    /// Nodes known (this one included).
    pub nodes: u64,
    /// This node's pod CIDRs as its Node object has them (`spec.podCIDRs`).
    pub pod_cidrs: Vec<IpNet>,
    /// The network whose subnets they are (`pod_cidr_from_node`); empty when none.
    pub pod_cidr_network: String,
    /// The pod CIDRs of the whole cluster, never masqueraded.
    pub cluster_cidrs: Vec<IpNet>,
    /// Where `cluster_cidrs` come from: `config` (`cluster.cluster_cidrs`) or `nodes` (the
    /// union of every node's pod CIDRs).
    pub cluster_cidrs_from: String,
    /// The routes to the other nodes' pod CIDRs, by node then destination.
    pub routes: Vec<NodeRoute>,
    /// What knid last wrote on its own Node.
    pub published: Published,
    /// `cluster.backend`: `auto`, `host-gw` or `vxlan`.
    pub backend: String,
    /// This node's VXLAN endpoint; `None` under host-gw.
    pub vtep: Option<VtepInfo>,
}

/// This node's VXLAN endpoint, its devices, and whether its Node carries it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VtepInfo {
    /// VNI.
    pub vni: u32,
    /// UDP port.
    pub port: u16,
    /// The MAC of its devices.
    pub mac: [u8; 6],
    /// The devices as set up ("vxlan.knid mtu 1450 over eth0"), or why a family has none.
    pub devices: Vec<String>,
    /// The Node object, as last watched, carries it.
    pub on_node: bool,
}

/// What knid wrote on its own Node, and when (ms since the Unix epoch; 0: not yet).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Published {
    /// The `NetworkUnavailable` condition's status as written (`None`: not written yet).
    pub network_unavailable: Option<bool>,
    /// Its reason.
    pub condition_reason: String,
    /// Its message.
    pub condition_message: String,
    /// When it was written.
    pub condition_ms: i64,
    /// Whether the Node carries knid's `knid.io/pod-network-full:NoSchedule` taint, as last
    /// written or found.
    pub tainted: bool,
    /// When the taint was last put on or taken off (or found as wanted).
    pub taint_ms: i64,
    /// When the `knid.io/node-networks` annotation was last written.
    pub annotation_ms: i64,
    /// When the `knid.io/vxlan` annotation was last written.
    pub vtep_ms: i64,
    /// The last write that failed, while it has not succeeded since; empty otherwise.
    pub error: String,
}

/// One other node's pod CIDR and what knid does about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRoute {
    /// The node.
    pub node: String,
    /// One of its pod CIDRs.
    pub dst: IpNet,
    /// The route's gateway: its InternalIP (host-gw) or its VTEP address (VXLAN); `None`
    /// when it is not routed.
    pub via: Option<IpAddr>,
    /// Where the route stands.
    pub state: RouteState,
    /// Why, when not installed.
    pub message: String,
    /// How its pods are reached.
    pub backend: RouteBackend,
    /// VXLAN: the overlay device, the node's VTEP MAC and its InternalIP the packets go to.
    pub overlay: Option<OverlayPath>,
}

/// How a route to another node's pods goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RouteBackend {
    /// Via its InternalIP on a directly connected subnet.
    #[default]
    HostGw,
    /// Through the VXLAN overlay.
    Vxlan,
}

impl RouteBackend {
    /// The backend's name in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            RouteBackend::HostGw => "host-gw",
            RouteBackend::Vxlan => "vxlan",
        }
    }
}

/// The overlay half of a VXLAN route, and whether its entries were in the kernel at the last
/// check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverlayPath {
    /// The overlay device.
    pub device: String,
    /// The node's VTEP MAC.
    pub mac: [u8; 6],
    /// Its InternalIP: where the encapsulated packets go.
    pub underlay: IpAddr,
    /// The FDB entry (MAC → InternalIP) was in the kernel.
    pub fdb: bool,
    /// The permanent neighbour (VTEP address → MAC) was in the kernel.
    pub neighbour: bool,
}

/// Where a route to another node's pods stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteState {
    /// In the kernel as knid wants it.
    Installed,
    /// The node has no InternalIP of that family on a directly connected subnet.
    Unreachable,
    /// Another route (not knid's) has the destination, or the kernel refused the route.
    Failed,
    /// Reached through the overlay, but the node has not published its VXLAN endpoint yet.
    AwaitingVtep,
}

impl RouteState {
    /// The state's name in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            RouteState::Installed => "installed",
            RouteState::Unreachable => "unreachable",
            RouteState::Failed => "failed",
            RouteState::AwaitingVtep => "awaiting-vtep",
        }
    }
}
