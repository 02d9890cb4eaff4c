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
    /// Its InternalIP the route goes via; `None` when it is not directly reachable.
    pub via: Option<IpAddr>,
    /// Where the route stands.
    pub state: RouteState,
    /// Why, when not installed.
    pub message: String,
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
}

impl RouteState {
    /// The state's name in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            RouteState::Installed => "installed",
            RouteState::Unreachable => "unreachable",
            RouteState::Failed => "failed",
        }
    }
}
