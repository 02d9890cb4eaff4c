//! What policy keeps of the Kubernetes objects it watches, parsed from the API's types: a
//! NetworkPolicy as rules over selectors, address blocks and ports; a Namespace as its labels; a
//! Pod as its labels, addresses and named container ports. Nothing else of them is kept.

use std::collections::BTreeMap;
use std::net::IpAddr;

use ipnet::IpNet;
use k8s_openapi::api::core::v1::{Namespace as ApiNamespace, Pod as ApiPod};
use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyPeer, NetworkPolicyPort as ApiPort,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::{Deserialize, Serialize};

use super::selector::{Labels, Selector};

/// IP protocol numbers of the protocols a policy port names.
pub const TCP: u8 = 6;
/// UDP.
pub const UDP: u8 = 17;
/// SCTP.
pub const SCTP: u8 = 132;

/// A namespace and a name.
pub type Key = (String, String);

/// The name of a protocol number.
pub fn protocol_name(protocol: u8) -> &'static str {
    match protocol {
        TCP => "TCP",
        UDP => "UDP",
        SCTP => "SCTP",
        _ => "?",
    }
}

/// The protocol number of a policy's or a container port's protocol (`TCP` when absent).
pub fn protocol_number(name: Option<&str>) -> Option<u8> {
    match name.unwrap_or("TCP") {
        "TCP" => Some(TCP),
        "UDP" => Some(UDP),
        "SCTP" => Some(SCTP),
        _ => None,
    }
}

/// Who a rule is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Peer {
    /// Pods matching `pods` in the namespaces matching `namespaces` (the policy's own namespace
    /// when `None`).
    Pods {
        /// The pods' selector (empty: every pod).
        pods: Selector,
        /// The namespaces' selector.
        namespaces: Option<Selector>,
    },
    /// Addresses: a block less its exceptions.
    Block {
        /// The block.
        cidr: IpNet,
        /// What is taken out of it.
        except: Vec<IpNet>,
    },
}

/// Which ports of a protocol a rule allows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Ports {
    /// Every port.
    All,
    /// `first` to `last`, inclusive.
    Range(u16, u16),
    /// The container port of this name (of the destination pod).
    Named(String),
}

/// One port entry of a rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyPort {
    /// IP protocol number.
    pub protocol: u8,
    /// The ports.
    pub ports: Ports,
}

/// One ingress or egress rule: traffic with any of `peers` on any of `ports`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    /// `None`: every peer (the rule has no or an empty `from`/`to`).
    pub peers: Option<Vec<Peer>>,
    /// Empty: every protocol and port.
    pub ports: Vec<PolicyPort>,
}

/// A NetworkPolicy as knid enforces it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The pods of its namespace it selects.
    pub selector: Selector,
    /// Ingress rules, when it isolates the selected pods for ingress.
    pub ingress: Option<Vec<Rule>>,
    /// Egress rules, when it isolates them for egress.
    pub egress: Option<Vec<Rule>>,
    /// Rules that could not be read (each allows nothing), by field.
    pub refused: Vec<String>,
}

impl Policy {
    /// Parses `object`. An unreadable rule allows nothing (and is listed in `refused`); an
    /// object without a name or an unreadable pod selector is refused whole.
    pub fn parse(object: &NetworkPolicy) -> Result<Policy, String> {
        let meta = &object.metadata;
        let name = meta.name.clone().unwrap_or_default();
        let namespace = meta.namespace.clone().unwrap_or_default();
        if name.is_empty() || namespace.is_empty() {
            return Err("metadata: a NetworkPolicy without a namespace or a name".into());
        }
        let spec = object.spec.clone().unwrap_or_default();
        let selector = match &spec.pod_selector {
            Some(s) => Selector::parse(s, "spec.podSelector")?,
            None => Selector::default(),
        };
        let has_egress = spec.egress.as_ref().is_some_and(|e| !e.is_empty());
        let (ingress_type, egress_type) = match &spec.policy_types {
            Some(types) if !types.is_empty() => {
                for (i, t) in types.iter().enumerate() {
                    if t != "Ingress" && t != "Egress" {
                        return Err(format!(
                            "spec.policyTypes[{i}]: unknown policy type {t:?} (Ingress, Egress)"
                        ));
                    }
                }
                (
                    types.iter().any(|t| t == "Ingress"),
                    types.iter().any(|t| t == "Egress"),
                )
            }
            // kube-apiserver's defaulting, for objects that did not go through it.
            _ => (true, has_egress),
        };
        let mut refused = Vec::new();
        let ingress = ingress_type.then(|| {
            let rules = spec.ingress.as_deref().unwrap_or_default();
            rules
                .iter()
                .enumerate()
                .filter_map(|(i, r)| {
                    let at = format!("spec.ingress[{i}]");
                    parse_rule(r.from.as_deref(), r.ports.as_deref(), &at, "from")
                        .map_err(|e| refused.push(e))
                        .ok()
                })
                .collect()
        });
        let egress = egress_type.then(|| {
            let rules = spec.egress.as_deref().unwrap_or_default();
            rules
                .iter()
                .enumerate()
                .filter_map(|(i, r)| {
                    let at = format!("spec.egress[{i}]");
                    parse_rule(r.to.as_deref(), r.ports.as_deref(), &at, "to")
                        .map_err(|e| refused.push(e))
                        .ok()
                })
                .collect()
        });
        Ok(Policy {
            namespace,
            name,
            selector,
            ingress,
            egress,
            refused,
        })
    }

    /// `namespace/name`.
    pub fn key(&self) -> Key {
        (self.namespace.clone(), self.name.clone())
    }
}

fn parse_rule(
    peers: Option<&[NetworkPolicyPeer]>,
    ports: Option<&[ApiPort]>,
    at: &str,
    peers_field: &str,
) -> Result<Rule, String> {
    let peers = match peers {
        None | Some([]) => None,
        Some(list) => Some(
            list.iter()
                .enumerate()
                .map(|(i, p)| parse_peer(p, &format!("{at}.{peers_field}[{i}]")))
                .collect::<Result<Vec<_>, _>>()?,
        ),
    };
    let ports = ports
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(i, p)| parse_port(p, &format!("{at}.ports[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Rule { peers, ports })
}

fn parse_peer(peer: &NetworkPolicyPeer, at: &str) -> Result<Peer, String> {
    if let Some(block) = &peer.ip_block {
        if peer.pod_selector.is_some() || peer.namespace_selector.is_some() {
            return Err(format!(
                "{at}: ipBlock may not be combined with podSelector or namespaceSelector"
            ));
        }
        let cidr: IpNet = block
            .cidr
            .parse()
            .map_err(|_| format!("{at}.ipBlock.cidr: not a CIDR: {:?}", block.cidr))?;
        let except = block
            .except
            .iter()
            .flatten()
            .enumerate()
            .map(|(i, e)| {
                e.parse::<IpNet>()
                    .map_err(|_| format!("{at}.ipBlock.except[{i}]: not a CIDR: {e:?}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        return Ok(Peer::Block {
            cidr: cidr.trunc(),
            except,
        });
    }
    if peer.pod_selector.is_none() && peer.namespace_selector.is_none() {
        return Err(format!(
            "{at}: must specify one of podSelector, namespaceSelector or ipBlock"
        ));
    }
    let pods = match &peer.pod_selector {
        Some(s) => Selector::parse(s, &format!("{at}.podSelector"))?,
        None => Selector::default(),
    };
    let namespaces = peer
        .namespace_selector
        .as_ref()
        .map(|s| Selector::parse(s, &format!("{at}.namespaceSelector")))
        .transpose()?;
    Ok(Peer::Pods { pods, namespaces })
}

fn parse_port(port: &ApiPort, at: &str) -> Result<PolicyPort, String> {
    let protocol = protocol_number(port.protocol.as_deref()).ok_or_else(|| {
        format!(
            "{at}.protocol: unsupported protocol {:?} (TCP, UDP, SCTP)",
            port.protocol.as_deref().unwrap_or_default()
        )
    })?;
    let number = |n: i32, field: &str| {
        u16::try_from(n)
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("{at}.{field}: {n} is not a port (1-65535)"))
    };
    let ports = match (&port.port, port.end_port) {
        (None, None) => Ports::All,
        (None, Some(_)) => return Err(format!("{at}.endPort: may not be set without port")),
        (Some(IntOrString::Int(n)), end) => {
            let first = number(*n, "port")?;
            let last = match end {
                Some(e) => number(e, "endPort")?,
                None => first,
            };
            if last < first {
                return Err(format!(
                    "{at}.endPort: {last} must be greater than or equal to port {first}"
                ));
            }
            Ports::Range(first, last)
        }
        (Some(IntOrString::String(name)), None) => match name.parse::<i32>() {
            Ok(n) => Ports::Range(number(n, "port")?, number(n, "port")?),
            Err(_) if name.is_empty() => return Err(format!("{at}.port: an empty port name")),
            Err(_) => Ports::Named(name.clone()),
        },
        (Some(IntOrString::String(_)), Some(_)) => {
            return Err(format!("{at}.endPort: may not be set with a named port"))
        }
    };
    Ok(PolicyPort { protocol, ports })
}

/// A named container port of a pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamedPort {
    /// Its name.
    pub name: String,
    /// IP protocol number.
    pub protocol: u8,
    /// The port.
    pub port: u16,
}

/// A Pod as policy sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodInfo {
    /// Its labels.
    pub labels: Labels,
    /// Its addresses (none for a host-network pod or one not started).
    pub ips: Vec<IpAddr>,
    /// Its named container ports.
    pub ports: Vec<NamedPort>,
    /// The node it runs on.
    pub node: String,
}

impl PodInfo {
    /// Reads what policy needs of `pod`, with its key; `None` for a pod without a name. A
    /// host-network pod, or one that has ended, has no addresses here: no policy selects it
    /// as a peer by its labels.
    pub fn parse(pod: &ApiPod) -> Option<(Key, PodInfo)> {
        let meta = &pod.metadata;
        let key = (meta.namespace.clone()?, meta.name.clone()?);
        let spec = pod.spec.as_ref();
        let status = pod.status.as_ref();
        let host_network = spec.and_then(|s| s.host_network).unwrap_or(false);
        let ended = status
            .and_then(|s| s.phase.as_deref())
            .is_some_and(|p| p == "Succeeded" || p == "Failed");
        let mut ips: Vec<IpAddr> = Vec::new();
        if !host_network && !ended {
            let listed = status.and_then(|s| s.pod_ips.as_ref());
            for ip in listed.into_iter().flatten().map(|p| p.ip.as_str()).chain(
                status
                    .and_then(|s| s.pod_ip.as_deref())
                    .filter(|_| listed.is_none_or(|l| l.is_empty())),
            ) {
                if let Ok(ip) = ip.parse() {
                    if !ips.contains(&ip) {
                        ips.push(ip);
                    }
                }
            }
        }
        let ports = spec
            .map(|s| s.containers.as_slice())
            .unwrap_or_default()
            .iter()
            .flat_map(|c| c.ports.iter().flatten())
            .filter_map(|p| {
                Some(NamedPort {
                    name: p.name.clone().filter(|n| !n.is_empty())?,
                    protocol: protocol_number(p.protocol.as_deref())?,
                    port: u16::try_from(p.container_port).ok()?,
                })
            })
            .collect();
        let info = PodInfo {
            labels: meta.labels.clone().unwrap_or_default(),
            ips,
            ports,
            node: spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        };
        Some((key, info))
    }
}

/// A Namespace's name and labels.
pub fn parse_namespace(ns: &ApiNamespace) -> Option<(String, Labels)> {
    let name = ns.metadata.name.clone()?;
    let mut labels = ns.metadata.labels.clone().unwrap_or_default();
    // The API server sets it on every namespace; an object that lacks it still has the name.
    labels
        .entry(METADATA_NAME.into())
        .or_insert_with(|| name.clone());
    Some((name, labels))
}

/// The label every namespace carries with its own name.
pub const METADATA_NAME: &str = "kubernetes.io/metadata.name";

/// Every object policy needs: the policies, the namespaces' labels, the pods.
#[derive(Debug, Clone, Default)]
pub struct World {
    /// NetworkPolicies by namespace and name.
    pub policies: BTreeMap<Key, Policy>,
    /// Namespaces' labels by name.
    pub namespaces: BTreeMap<String, Labels>,
    /// Pods by namespace and name.
    pub pods: BTreeMap<Key, PodInfo>,
}
