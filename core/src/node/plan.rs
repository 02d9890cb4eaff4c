//! What the node side is applied from: the configured networks, and in cluster mode the node's
//! pod CIDR (the subnets of the network marked `pod_cidr_from_node`) and the cluster's pod
//! CIDRs (left alone by every network's masquerade). Reload, SetupNodeNetwork and the cluster
//! thread each change their part under one lock and apply the whole.

use ipnet::IpNet;

use crate::config::Network;

/// The inputs of the node side.
#[derive(Debug, Default, Clone)]
pub struct Plan {
    /// The networks as configured.
    pub configured: Vec<Network>,
    /// This node's pod CIDRs from its Node object, once known.
    pub pod_cidrs: Option<Vec<IpNet>>,
    /// The cluster's pod CIDRs, never masqueraded.
    pub cluster_cidrs: Vec<IpNet>,
    /// Why the pod CIDRs cannot be used by the network that takes them, if they cannot.
    pub unusable: Option<String>,
}

impl Plan {
    /// The networks as applied: the pod CIDR network with its subnets (empty until known, or
    /// when they are unusable: `unusable` says why), every masquerade leaving the cluster's pod
    /// CIDRs alone.
    pub fn networks(&mut self) -> Vec<Network> {
        self.unusable = None;
        let mut out = Vec::with_capacity(self.configured.len());
        for net in &self.configured {
            let mut net = match (&self.pod_cidrs, net.pod_cidr_from_node) {
                (Some(cidrs), true) => match net.with_pod_cidrs(cidrs) {
                    Ok(filled) => filled,
                    Err(why) => {
                        self.unusable = Some(format!("network {}: {why}", net.name));
                        net.clone()
                    }
                },
                _ => net.clone(),
            };
            if let Some(except) = net.masquerade.as_mut() {
                for cidr in &self.cluster_cidrs {
                    if !except.contains(cidr) {
                        except.push(*cidr);
                    }
                }
            }
            out.push(net);
        }
        out
    }

    /// The network whose subnets are the node's pod CIDRs, if any.
    pub fn pod_cidr_network(&self) -> Option<&Network> {
        self.configured.iter().find(|n| n.pod_cidr_from_node)
    }
}

#[cfg(test)]
mod tests;
