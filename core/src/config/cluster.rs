//! The `[cluster]` table: knid in a multi-node Kubernetes cluster, reading its own Node object
//! for the pod CIDR of the network marked `pod_cidr_from_node`, and every Node for the routes to
//! the other nodes' pods (docs/operations.md#multi-node-cluster).

use std::path::PathBuf;
use std::time::Duration;

use ipnet::IpNet;
use serde::Deserialize;

use crate::error::{Error, Result};
use crate::model::validate;

/// Where a pod's service account credentials are mounted.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

fn default_service_account_dir() -> PathBuf {
    PathBuf::from(SERVICE_ACCOUNT_DIR)
}
fn default_true() -> bool {
    true
}
fn default_route_resync() -> String {
    "30s".to_owned()
}
fn default_publish_interval() -> String {
    "1s".to_owned()
}
fn default_annotation_interval() -> String {
    "10s".to_owned()
}
fn default_high_water() -> u64 {
    1
}
fn default_backend() -> String {
    "auto".to_owned()
}
fn default_vni() -> u32 {
    1
}
fn default_vxlan_port() -> u16 {
    VXLAN_PORT
}

/// The UDP port of VXLAN as the Linux kernel and flannel use it (IANA's is 4789).
pub const VXLAN_PORT: u16 = 8472;
/// The largest VXLAN network identifier (24 bits).
pub const MAX_VNI: u32 = (1 << 24) - 1;

/// The `[cluster]` table as written.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq, Default)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// Cluster mode; off by default (the DaemonSet turns it on).
    #[serde(default)]
    pub enabled: bool,
    /// This node's name; the `NODE_NAME` environment variable (the downward API) when unset.
    #[serde(default)]
    pub node_name: Option<String>,
    /// A kubeconfig to reach the API server with, for knid running outside a pod; the in-cluster
    /// service account (`service_account_dir` and `KUBERNETES_SERVICE_HOST`/`_PORT`) when unset.
    #[serde(default)]
    pub kubeconfig: Option<PathBuf>,
    /// Where the service account's `token` and `ca.crt` are.
    #[serde(default = "default_service_account_dir")]
    pub service_account_dir: PathBuf,
    /// The cluster's pod CIDRs: traffic to them is never masqueraded. The union of every
    /// node's pod CIDRs when empty.
    #[serde(default)]
    pub cluster_cidrs: Vec<String>,
    /// Whether knid routes the other nodes' pod CIDRs via their InternalIPs (host-gw).
    #[serde(default = "default_true")]
    pub routes: bool,
    /// How often the routes to other nodes are checked against the kernel (`"30s"`).
    #[serde(default = "default_route_resync")]
    pub route_resync: String,
    /// How often knid compares what it publishes on its own Node (the NetworkUnavailable
    /// condition, the pod-network-full taint, the networks annotation) with the node (`"1s"`).
    #[serde(default = "default_publish_interval")]
    pub publish_interval: String,
    /// The least time between two writes of the `knid.io/node-networks` annotation (`"10s"`).
    #[serde(default = "default_annotation_interval")]
    pub annotation_interval: String,
    /// Whether knid taints its Node `knid.io/pod-network-full:NoSchedule` while the pod
    /// network has no room for another pod.
    #[serde(default = "default_true")]
    pub full_taint: bool,
    /// The taint goes on when the fewest free addresses (or bridge ports) of the pod network
    /// is at most this.
    #[serde(default)]
    pub full_taint_low_water: u64,
    /// The taint comes off when the fewest free addresses (and bridge ports) is at least this;
    /// more than `full_taint_low_water`.
    #[serde(default = "default_high_water")]
    pub full_taint_high_water: u64,
    /// How other nodes' pods are reached: `auto` (host-gw to nodes on a directly connected
    /// subnet, VXLAN to the rest), `host-gw` or `vxlan`.
    #[serde(default = "default_backend")]
    pub backend: String,
    /// The VXLAN network identifier every node of the cluster uses.
    #[serde(default = "default_vni")]
    pub vxlan_vni: u32,
    /// The UDP port of the VXLAN overlay.
    #[serde(default = "default_vxlan_port")]
    pub vxlan_port: u16,
    /// The underlay device of the overlay; the one holding the node's InternalIP when unset.
    #[serde(default)]
    pub vxlan_device: Option<String>,
    /// Whether knid enforces Kubernetes NetworkPolicy for the pods it attaches (it then lists
    /// and watches NetworkPolicies, and Namespaces and Pods while a policy exists).
    #[serde(default = "default_true")]
    pub network_policy: bool,
}

/// The checked `[cluster]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cluster {
    /// This node's name.
    pub node_name: String,
    /// How the API server is reached.
    pub credentials: Credentials,
    /// The configured cluster CIDRs (empty: the union of the nodes').
    pub cluster_cidrs: Vec<IpNet>,
    /// Whether routes to other nodes are programmed.
    pub routes: bool,
    /// Period of the routes' check against the kernel.
    pub route_resync: Duration,
    /// Period of the comparison of what is published on the Node with the node.
    pub publish_interval: Duration,
    /// Least time between two writes of the networks annotation.
    pub annotation_interval: Duration,
    /// The pod-network-full taint, when it is on.
    pub full_taint: Option<WaterMarks>,
    /// How other nodes' pods are reached.
    pub backend: Backend,
    /// The VXLAN overlay's settings (used unless `backend` is host-gw).
    pub vxlan: VxlanSettings,
    /// Why `backend` is not the configured one (`auto` fell back to host-gw at start-up: the
    /// pod network's configured MTU is more than the overlay carries).
    pub backend_note: Option<String>,
    /// Whether NetworkPolicy is enforced.
    pub network_policy: bool,
}

/// How the routes to other nodes' pods go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// host-gw to nodes on a directly connected subnet, VXLAN to the others.
    Auto,
    /// Only host-gw: a node that is not a neighbour is reported, not routed.
    HostGw,
    /// VXLAN to every node.
    Vxlan,
}

impl Backend {
    /// The backend as `cluster.backend` names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Auto => "auto",
            Backend::HostGw => "host-gw",
            Backend::Vxlan => "vxlan",
        }
    }

    /// Whether this node runs the overlay (VXLAN devices, the VTEP annotation).
    pub fn overlay(self) -> bool {
        self != Backend::HostGw
    }
}

/// The `vxlan_*` settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VxlanSettings {
    /// VNI.
    pub vni: u32,
    /// UDP port.
    pub port: u16,
    /// The underlay device, when configured.
    pub device: Option<String>,
}

/// When the pod-network-full taint goes on and comes off: the fewest free addresses (or bridge
/// ports) at most `low`, and at least `high`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaterMarks {
    /// Taint at or below this.
    pub low: u64,
    /// Untaint at or above this.
    pub high: u64,
}

/// Where the API server's address and credentials come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credentials {
    /// The pod's service account: token and CA in this directory, the server from
    /// `KUBERNETES_SERVICE_HOST` and `KUBERNETES_SERVICE_PORT`.
    InCluster(PathBuf),
    /// A kubeconfig file.
    Kubeconfig(PathBuf),
}

impl ClusterConfig {
    /// The checked table, `None` when cluster mode is off; `env` reads the environment
    /// (`NODE_NAME`).
    pub fn parse(&self, env: impl Fn(&str) -> Option<String>) -> Result<Option<Cluster>> {
        let bad = |key: &str, why: String| Error::Config(format!("cluster.{key}: {why}"));
        if !self.enabled {
            return Ok(None);
        }
        let node_name = match (&self.node_name, env("NODE_NAME")) {
            (Some(name), _) => name.clone(),
            (None, Some(name)) if !name.is_empty() => name,
            (None, _) => {
                return Err(bad(
                    "node_name",
                    "is required: set it, or the NODE_NAME environment variable (the downward \
                     API's spec.nodeName)"
                        .into(),
                ))
            }
        };
        node_name_rule(&node_name).map_err(|why| bad("node_name", why))?;
        let credentials = match &self.kubeconfig {
            Some(path) if !path.is_absolute() => {
                return Err(bad(
                    "kubeconfig",
                    format!("{} must be absolute", path.display()),
                ))
            }
            Some(path) => Credentials::Kubeconfig(path.clone()),
            None if !self.service_account_dir.is_absolute() => {
                return Err(bad(
                    "service_account_dir",
                    format!("{} must be absolute", self.service_account_dir.display()),
                ))
            }
            None => Credentials::InCluster(self.service_account_dir.clone()),
        };
        let mut cluster_cidrs = Vec::with_capacity(self.cluster_cidrs.len());
        for (i, text) in self.cluster_cidrs.iter().enumerate() {
            let net =
                validate::subnet(text).map_err(|e| bad(&format!("cluster_cidrs[{i}]"), e.rule))?;
            cluster_cidrs.push(net);
        }
        let route_resync = super::interval("cluster.route_resync", &self.route_resync)?
            .ok_or_else(|| bad("route_resync", "must be more than 0".into()))?;
        let publish_interval = super::interval("cluster.publish_interval", &self.publish_interval)?
            .ok_or_else(|| bad("publish_interval", "must be more than 0".into()))?;
        let annotation_interval =
            super::interval("cluster.annotation_interval", &self.annotation_interval)?
                .unwrap_or_default();
        if self.full_taint_high_water <= self.full_taint_low_water {
            return Err(bad(
                "full_taint_high_water",
                format!(
                    "{} must be more than full_taint_low_water ({})",
                    self.full_taint_high_water, self.full_taint_low_water
                ),
            ));
        }
        let backend = [Backend::Auto, Backend::HostGw, Backend::Vxlan]
            .into_iter()
            .find(|b| b.as_str() == self.backend);
        let backend = match backend {
            Some(backend) => backend,
            None => {
                let other = &self.backend;
                return Err(bad(
                    "backend",
                    format!("{other:?} is not one of \"auto\", \"host-gw\", \"vxlan\""),
                ));
            }
        };
        if self.vxlan_vni == 0 || self.vxlan_vni > MAX_VNI {
            return Err(bad(
                "vxlan_vni",
                format!("{} is not a VNI (1 to {MAX_VNI})", self.vxlan_vni),
            ));
        }
        if self.vxlan_port == 0 {
            return Err(bad("vxlan_port", "must be a UDP port (1 to 65535)".into()));
        }
        if let Some(device) = &self.vxlan_device {
            validate::ifname(device).map_err(|e| bad("vxlan_device", e.rule))?;
        }
        let vxlan = VxlanSettings {
            vni: self.vxlan_vni,
            port: self.vxlan_port,
            device: self.vxlan_device.clone(),
        };
        let full_taint = self.full_taint.then_some(WaterMarks {
            low: self.full_taint_low_water,
            high: self.full_taint_high_water,
        });
        Ok(Some(Cluster {
            publish_interval,
            annotation_interval,
            full_taint,
            node_name,
            credentials,
            cluster_cidrs,
            routes: self.routes,
            route_resync,
            backend,
            vxlan,
            backend_note: None,
            network_policy: self.network_policy,
        }))
    }
}

impl ClusterConfig {
    /// Checks every setting that does not depend on the environment: a configuration read
    /// where `NODE_NAME` is not set (a check of the DaemonSet's ConfigMap, `knid
    /// --check-config` on a workstation) is judged on what it says.
    pub fn check(&self) -> Result<()> {
        self.parse(|key| (key == "NODE_NAME").then(|| "node".to_owned()))
            .map(drop)
    }
}

/// A Node name is a DNS subdomain: 1–253 chars of lower-case alphanumerics, `-` and `.`.
fn node_name_rule(name: &str) -> std::result::Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 253
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a Node name (a DNS subdomain: lower-case letters, digits, '-' and \
             '.', at most 253)"
        ))
    }
}

#[cfg(test)]
mod tests;
