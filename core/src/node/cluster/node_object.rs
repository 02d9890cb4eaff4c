//! The parts of the Kubernetes API's JSON that cluster mode reads: a Node (name, resource
//! version, annotations, `spec.podCIDRs`, `spec.taints`, `status.addresses`,
//! `status.conditions`), a watch event and a Status.
//! Everything else in the objects is skipped while parsing, so a watched node costs only the
//! few fields kept in [`NodeFacts`].

use std::collections::BTreeMap;
use std::net::IpAddr;

use ipnet::IpNet;
use serde::Deserialize;

use crate::node::overlay::{vtep, Vtep};

/// `metadata` of an object or a list.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    /// The object's name.
    #[serde(default)]
    pub name: String,
    /// Its resource version (a list's: the version the list was read at).
    #[serde(default)]
    pub resource_version: String,
    /// The token of a list's next page, if any.
    #[serde(default, rename = "continue")]
    pub next: Option<String>,
    /// The object's annotations.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

/// A core/v1 Node.
#[derive(Debug, Default, Deserialize)]
pub struct Node {
    /// Metadata.
    #[serde(default)]
    pub metadata: Meta,
    /// Spec.
    #[serde(default)]
    pub spec: NodeSpec,
    /// Status.
    #[serde(default)]
    pub status: NodeStatus,
}

/// `spec` of a Node.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSpec {
    /// The single pod CIDR of clusters before dual stack (`podCIDR`).
    #[serde(default, rename = "podCIDR")]
    pub pod_cidr: Option<String>,
    /// The pod CIDRs, at most one per family (`podCIDRs`).
    #[serde(default, rename = "podCIDRs")]
    pub pod_cidrs: Vec<String>,
    /// Its taints, in the object's order.
    #[serde(default)]
    pub taints: Vec<Taint>,
}

/// One entry of `spec.taints`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Taint {
    /// The key.
    pub key: String,
    /// The effect: `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    #[serde(default)]
    pub effect: String,
}

/// `status` of a Node.
#[derive(Debug, Default, Deserialize)]
pub struct NodeStatus {
    /// Its addresses.
    #[serde(default)]
    pub addresses: Vec<NodeAddress>,
    /// Its conditions.
    #[serde(default)]
    pub conditions: Vec<NodeCondition>,
}

/// One entry of `status.conditions`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeCondition {
    /// `Ready`, `NetworkUnavailable`, ...
    #[serde(rename = "type")]
    pub kind: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Machine-readable reason.
    #[serde(default)]
    pub reason: String,
    /// Human-readable message.
    #[serde(default)]
    pub message: String,
    /// When the status last changed (RFC 3339).
    #[serde(default)]
    pub last_transition_time: String,
}

/// One entry of `status.addresses`.
#[derive(Debug, Deserialize)]
pub struct NodeAddress {
    /// `InternalIP`, `ExternalIP`, `Hostname`, ...
    #[serde(rename = "type")]
    pub kind: String,
    /// The address.
    pub address: String,
}

/// One line of a watch stream.
#[derive(Debug, Deserialize)]
pub struct WatchEvent {
    /// `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK` or `ERROR`.
    #[serde(rename = "type")]
    pub kind: String,
    /// A Node, or a Status for `ERROR`.
    pub object: serde_json::Value,
}

/// A meta/v1 Status: the body of an error answer, and the object of a watch `ERROR`.
#[derive(Debug, Default, Deserialize)]
pub struct Status {
    /// HTTP-like code (410 for an expired resource version).
    #[serde(default)]
    pub code: u16,
    /// Machine-readable reason (`Expired`, `Forbidden`, ...).
    #[serde(default)]
    pub reason: String,
    /// Human-readable message.
    #[serde(default)]
    pub message: String,
}

/// What cluster mode keeps of a Node.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeFacts {
    /// Its name.
    pub name: String,
    /// Its pod CIDRs that parse, in the object's order.
    pub pod_cidrs: Vec<IpNet>,
    /// Its InternalIP addresses that parse.
    pub internal_ips: Vec<IpAddr>,
    /// What in the object could not be used (a pod CIDR or address that does not parse).
    pub problems: Vec<String>,
    /// Its VXLAN endpoint (the `knid.io/vxlan` annotation), when it has one; `Err` says what
    /// is wrong with it.
    pub vtep: Option<Result<Vtep, String>>,
}

impl Node {
    /// The facts cluster mode keeps. `podCIDRs` wins over `podCIDR` (the API server keeps
    /// `podCIDR` equal to the first of `podCIDRs`).
    pub fn facts(&self) -> NodeFacts {
        let mut facts = NodeFacts {
            name: self.metadata.name.clone(),
            vtep: self
                .metadata
                .annotations
                .get(vtep::ANNOTATION)
                .map(|text| Vtep::parse(text)),
            ..NodeFacts::default()
        };
        let cidrs: Vec<&String> = if self.spec.pod_cidrs.is_empty() {
            self.spec.pod_cidr.iter().collect()
        } else {
            self.spec.pod_cidrs.iter().collect()
        };
        for text in cidrs {
            match text.parse::<IpNet>() {
                Ok(net) if net.trunc() == net => facts.pod_cidrs.push(net),
                _ => facts
                    .problems
                    .push(format!("spec.podCIDRs: {text:?} is not a CIDR")),
            }
        }
        for address in self
            .status
            .addresses
            .iter()
            .filter(|a| a.kind == "InternalIP")
        {
            match address.address.parse() {
                Ok(ip) => facts.internal_ips.push(ip),
                Err(_) => facts.problems.push(format!(
                    "status.addresses: InternalIP {:?} is not an address",
                    address.address
                )),
            }
        }
        facts
    }
}

#[cfg(test)]
mod tests;
