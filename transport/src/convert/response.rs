//! Core results → protobuf responses. Absent values become empty strings or zeros, as the proto
//! documents.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::path::Path;

use knid_core::{
    Capacity, ClusterInfo, Condition, DeviceInfo, Dns, Family, GcFinding, GcReport,
    InterfaceResult, IpConfig, MacAddr, Neighbor, NetworkInfo, NodeRoute, PodRef, PortMapping,
    Published, RouteInfo, Sandbox, SandboxSummary, Status, TapInfo,
};
use protobuf::MessageField;

use crate::pb;

/// Encodes a sandbox.
pub fn sandbox(s: &Sandbox) -> pb::Sandbox {
    let mut out = pb::Sandbox::new();
    out.id = s.id.to_string();
    out.netns_path = path(&s.netns_path);
    out.netns_inode = s.netns_inode;
    out.generation = s.generation;
    out.state = s.state().as_str().to_owned();
    out.pod = MessageField::some(pod(&s.pod));
    out.interfaces = s.interfaces.iter().map(interface).collect();
    out.dns = MessageField::some(dns(&s.dns));
    out.port_mappings = s.port_mappings.iter().map(port_mapping).collect();
    out.labels = string_map(&s.labels);
    out.annotations = string_map(&s.annotations);
    out.created_at = s.created_at_ms;
    out.updated_at = s.updated_at_ms;
    out
}

/// The state List gives a sandbox with a record knid cannot use.
pub const CORRUPT: &str = "corrupt";

/// Encodes one line of List.
pub fn summary(s: &SandboxSummary) -> pb::SandboxSummary {
    let mut out = pb::SandboxSummary::new();
    out.id = s.id.clone();
    out.pod = MessageField::some(pod(&s.pod));
    out.netns_path = path(&s.netns_path);
    out.state = s.state.map_or(CORRUPT, |state| state.as_str()).to_owned();
    out.interfaces = s.interfaces.clone();
    out.ips = s.ips.iter().map(IpAddr::to_string).collect();
    out.networks = s.networks.clone();
    out.created_at = s.created_at_ms;
    out.error = s.error.clone().unwrap_or_default();
    out
}

/// Encodes the List response.
pub fn list_response(summaries: &[SandboxSummary]) -> pb::ListResponse {
    let mut out = pb::ListResponse::new();
    out.sandboxes = summaries.iter().map(summary).collect();
    out
}

/// Encodes the Status response.
pub fn status(s: &Status) -> pb::StatusResponse {
    let mut out = pb::StatusResponse::new();
    out.ready = s.ready;
    out.conditions = s.conditions.iter().map(condition).collect();
    out.version = s.version.clone();
    out.boot_id = s.boot_id.clone();
    out.link_mark = s.link_mark.clone();
    out.cluster = s.cluster.as_ref().map(cluster).into();
    out
}

fn cluster(c: &ClusterInfo) -> pb::Cluster {
    let mut out = pb::Cluster::new();
    out.node_name = c.node_name.clone();
    out.api_server = c.api_server.clone();
    out.api_reachable = c.api_reachable;
    out.api_message = c.api_message.clone();
    out.last_contact_ms = c.last_contact_ms;
    out.resource_version = c.resource_version.clone();
    out.nodes = c.nodes;
    out.pod_cidrs = c.pod_cidrs.iter().map(ToString::to_string).collect();
    out.pod_cidr_network = c.pod_cidr_network.clone();
    out.cluster_cidrs = c.cluster_cidrs.iter().map(ToString::to_string).collect();
    out.cluster_cidrs_from = c.cluster_cidrs_from.clone();
    out.routes = c.routes.iter().map(node_route).collect();
    out.published = Some(published(&c.published)).into();
    out.backend = c.backend.clone();
    out.vtep = c
        .vtep
        .as_ref()
        .map(|v| {
            let mut out = pb::Vtep::new();
            out.vni = v.vni;
            out.port = u32::from(v.port);
            out.mac = MacAddr(v.mac).to_string();
            out.devices = v.devices.clone();
            out.on_node = v.on_node;
            out
        })
        .into();
    out
}

fn published(p: &Published) -> pb::NodePublication {
    let mut out = pb::NodePublication::new();
    out.network_unavailable = match p.network_unavailable {
        None => String::new(),
        Some(true) => "True".to_owned(),
        Some(false) => "False".to_owned(),
    };
    out.condition_reason = p.condition_reason.clone();
    out.condition_message = p.condition_message.clone();
    out.condition_ms = p.condition_ms;
    out.tainted = p.tainted;
    out.taint_ms = p.taint_ms;
    out.annotation_ms = p.annotation_ms;
    out.vtep_ms = p.vtep_ms;
    out.error = p.error.clone();
    out
}

fn node_route(r: &NodeRoute) -> pb::NodeRoute {
    let mut out = pb::NodeRoute::new();
    out.node = r.node.clone();
    out.dst = r.dst.to_string();
    out.via = optional_ip(r.via);
    out.state = r.state.as_str().to_owned();
    out.message = r.message.clone();
    out.backend = r.backend.as_str().to_owned();
    if let Some(path) = &r.overlay {
        out.device = path.device.clone();
        out.vtep_mac = MacAddr(path.mac).to_string();
        out.underlay = path.underlay.to_string();
        out.fdb = path.fdb;
        out.neighbour = path.neighbour;
    }
    out
}

/// Encodes the Networks response.
pub fn networks(list: &[NetworkInfo]) -> pb::NetworksResponse {
    let mut out = pb::NetworksResponse::new();
    out.networks = list.iter().map(network).collect();
    out
}

/// Encodes the GarbageCollect response.
pub fn garbage_collect_response(r: &GcReport) -> pb::GarbageCollectResponse {
    let mut out = pb::GarbageCollectResponse::new();
    out.removed = r.removed.iter().map(gc_finding).collect();
    out.left = r.left.iter().map(gc_finding).collect();
    out.errors = r.errors.clone();
    out.dry_run = r.dry_run;
    out
}

fn gc_finding(f: &GcFinding) -> pb::GcFinding {
    let mut out = pb::GcFinding::new();
    out.sandbox_id = f.sandbox_id.clone();
    out.ifname = f.ifname.clone();
    out.what = f.what.as_str().to_owned();
    out.reason = f.reason.as_str().to_owned();
    out.detail = f.detail.clone();
    out
}

fn pod(p: &PodRef) -> pb::PodRef {
    let mut out = pb::PodRef::new();
    out.name = p.name.clone();
    out.namespace = p.namespace.clone();
    out.uid = p.uid.clone();
    out
}

fn dns(d: &Dns) -> pb::Dns {
    let mut out = pb::Dns::new();
    out.servers = d.servers.iter().map(IpAddr::to_string).collect();
    out.searches = d.searches.clone();
    out.options = d.options.clone();
    out.domain = d.domain.clone();
    out
}

fn port_mapping(m: &PortMapping) -> pb::PortMapping {
    let mut out = pb::PortMapping::new();
    out.host_port = m.host_port.into();
    out.container_port = m.container_port.into();
    out.protocol = m.protocol.clone();
    out.host_ip = optional_ip(m.host_ip);
    out
}

fn interface(i: &InterfaceResult) -> pb::InterfaceResult {
    let mut out = pb::InterfaceResult::new();
    out.name = i.name.to_string();
    out.network = i.network.clone();
    out.kind = i.kind.as_str().to_owned();
    out.state = i.state.as_str().to_owned();
    if i.mac != MacAddr::UNKNOWN {
        out.mac = i.mac.to_string();
    }
    out.mtu = i.mtu;
    out.host_ifname = i.host_side_name().to_owned();
    out.ips = i.ips.iter().map(ip_config).collect();
    out.routes = i.routes.iter().map(route).collect();
    out.neighbors = i.neighbors.iter().map(neighbor).collect();
    out.tap = i.tap.as_ref().map(tap).into();
    out.device = i.device.as_ref().map(device).into();
    out.dan_path = i.dan_path.as_deref().map(path).unwrap_or_default();
    out.mode = i.mode.clone().unwrap_or_default();
    out.cni_result = i
        .cni
        .as_ref()
        .and_then(|c| c.result.clone())
        .unwrap_or_default();
    out.bandwidth = i.bandwidth.as_ref().map(bandwidth).into();
    out
}

pub(crate) fn bandwidth(b: &knid_core::Bandwidth) -> pb::Bandwidth {
    let mut out = pb::Bandwidth::new();
    out.ingress_rate = b.ingress.map_or(0, |l| l.rate);
    out.ingress_burst = b.ingress.map_or(0, |l| l.burst);
    out.egress_rate = b.egress.map_or(0, |l| l.rate);
    out.egress_burst = b.egress.map_or(0, |l| l.burst);
    out
}

fn tap(t: &TapInfo) -> pb::TapResult {
    let mut out = pb::TapResult::new();
    out.name = t.name.clone();
    out.netns_path = t.netns_path.as_deref().map(path).unwrap_or_default();
    out.queue_pairs = t.queue_pairs;
    out.multi_queue = t.multi_queue;
    out.vnet_hdr = t.vnet_hdr;
    out.no_pi = t.no_pi;
    out.vhost_net_ok = t.vhost_net_ok;
    out.owner_uid = t.owner_uid;
    out.owner_gid = t.owner_gid;
    out.redirect_peer = t.redirect_peer.clone();
    out
}

fn device(d: &DeviceInfo) -> pb::DeviceResult {
    let mut out = pb::DeviceResult::new();
    out.pci_address = d.pci_address.clone().unwrap_or_default();
    out.original_name = d.original_name.clone();
    out.original_mtu = d.original_mtu;
    out
}

fn ip_config(c: &IpConfig) -> pb::IpConfig {
    let mut out = pb::IpConfig::new();
    out.address = c.address.to_string();
    out.family = Family::of(&c.address.addr()).as_str().to_owned();
    out.gateway = optional_ip(c.gateway);
    out
}

fn route(r: &RouteInfo) -> pb::Route {
    let mut out = pb::Route::new();
    out.dst = r.dst.to_string();
    out.gateway = optional_ip(r.gateway);
    out.mtu = r.mtu.unwrap_or(0);
    out.scope = r.scope.as_str().to_owned();
    out.table = r.table;
    out.metric = r.metric.unwrap_or(0);
    out
}

fn neighbor(n: &Neighbor) -> pb::Neighbor {
    let mut out = pb::Neighbor::new();
    out.ip = n.ip.to_string();
    out.mac = n.mac.to_string();
    out
}

fn condition(c: &Condition) -> pb::Condition {
    let mut out = pb::Condition::new();
    out.type_ = c.kind.clone();
    out.status = c.status;
    out.reason = c.reason.clone();
    out.message = c.message.clone();
    out.since = c.since_ms;
    out
}

fn network(n: &NetworkInfo) -> pb::Network {
    let mut out = pb::Network::new();
    out.name = n.name.clone();
    out.kind = n.kind.clone();
    out.subnets = n.subnets.iter().map(ToString::to_string).collect();
    out.gateways = n.gateways.iter().map(IpAddr::to_string).collect();
    out.mtu = n.mtu;
    out.bridge = n.bridge.clone();
    out.parent = n.parent.clone();
    out.mode = n.mode.clone();
    out.capacity = n.capacity.iter().map(capacity).collect();
    out.ready = n.ready;
    out.schedulable = n.schedulable;
    out.reason = n.reason.clone();
    out.message = n.message.clone();
    out.subnets_from = n.subnets_from.clone();
    out.bridge_ports = n
        .ports
        .as_ref()
        .map(|p| {
            let mut out = pb::BridgePorts::new();
            out.bridge = p.bridge.clone();
            out.total = p.total;
            out.used = p.used;
            out.free = p.free;
            out
        })
        .into();
    out
}

fn capacity(c: &Capacity) -> pb::Capacity {
    let mut out = pb::Capacity::new();
    out.family = c.family.as_str().to_owned();
    out.total = c.total;
    out.used = c.used;
    out.free = c.free;
    out
}

fn optional_ip(ip: Option<IpAddr>) -> String {
    ip.map(|ip| ip.to_string()).unwrap_or_default()
}

/// Paths came in as validated UTF-8 strings, so the lossy conversion never loses anything.
fn path(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

fn string_map(map: &BTreeMap<String, String>) -> HashMap<String, String> {
    map.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

#[cfg(test)]
mod tests;
