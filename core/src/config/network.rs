//! One network of the configuration: the `[networks.<name>]` table as written, and the checked
//! [`Network`] it becomes, with its driver's rules.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;

use ipnet::IpNet;
use knid_netops::link::{IpvlanMode, MacvlanMode};
use serde::Deserialize;

use crate::cni::ConfList;
use crate::error::{Error, Result};
use crate::model::validate;
use crate::model::{Family, InterfaceKind, InterfaceSpec};

/// Gateway of routed networks' pods, IPv4: link-local, answered by a static neighbour entry.
pub const ROUTED_GATEWAY_V4: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(169, 254, 1, 1));
/// Gateway of routed networks' pods, IPv6.
pub const ROUTED_GATEWAY_V6: IpAddr =
    IpAddr::V6(std::net::Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1));

/// A network's MTU when it sets none (and, under the VXLAN overlay, the underlay's when
/// knid cannot find it).
pub const DEFAULT_MTU: u32 = 1500;
fn default_kind() -> String {
    "bridge".to_owned()
}

/// One network.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct NetworkConfig {
    /// Driver kind: `bridge` (default), `routed`, `macvlan`, `ipvlan`, `host-device` or `cni`.
    #[serde(default = "default_kind")]
    pub kind: String,
    /// Bridge device name (`bridge` networks only, required there).
    #[serde(default)]
    pub bridge: Option<String>,
    /// Parent device (`macvlan` and `ipvlan` networks only, required there).
    #[serde(default)]
    pub parent: Option<String>,
    /// `macvlan`: bridge (default), private, vepa or passthru; `ipvlan`: l2 (default) or l3.
    #[serde(default)]
    pub mode: Option<String>,
    /// Subnets, at most one per family; required except for `host-device` networks.
    #[serde(default)]
    pub subnets: Vec<String>,
    /// Gateways, one per subnet in the same order; the first host address when absent.
    #[serde(default)]
    pub gateways: Vec<String>,
    /// Default MTU of interfaces (and of the bridge when knid creates it); 1500, or under the
    /// VXLAN overlay the underlay's minus the encapsulation, when unset.
    #[serde(default)]
    pub mtu: Option<u32>,
    /// `cni` networks: path of the CNI network configuration list (`.conflist`, or a single
    /// plugin's `.conf`) the network runs; read at start-up and on reload.
    #[serde(default)]
    pub conflist: Option<PathBuf>,
    /// `cni` networks: the configuration list itself, as JSON (instead of `conflist`).
    #[serde(default)]
    pub conflist_inline: Option<String>,
    /// `host-device` networks: whether a pod may take the node's uplink (a device a default route
    /// of knid's netns goes through). Off by default: taking it cuts the node off.
    #[serde(default)]
    pub allow_uplink: bool,
    /// `bridge` networks: whether the pods' ports are in hairpin mode, so a pod reaches itself
    /// through an address the node translates (a Service VIP). On by default.
    #[serde(default)]
    pub hairpin: Option<bool>,
    /// `bridge` and `routed` networks: whether traffic from the network's subnets to other
    /// destinations is masqueraded to the node's address on the egress interface. On by default.
    #[serde(default)]
    pub masquerade: Option<bool>,
    /// `bridge` and `routed` networks: destinations (CIDRs) masquerade leaves alone, besides the
    /// network's own subnets (e.g. the cluster's pod CIDR).
    #[serde(default)]
    pub no_masquerade: Vec<String>,
    /// `bridge` and `routed` networks: whether each pod's host link drops what the pod sends
    /// from a MAC or an address not its own (and ARP, NDP and DHCP server messages claiming
    /// one). On by default.
    #[serde(default)]
    pub antispoof: Option<bool>,
    /// `bridge` and `routed` networks in cluster mode: the subnets are this node's pod CIDRs,
    /// read from its Node object (`spec.podCIDRs`), instead of `subnets`.
    #[serde(default)]
    pub pod_cidr_from_node: bool,
}

/// How a network connects its pods (docs/architecture.md#networks-and-device-kinds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Driver {
    /// veth pairs (or taps) on a Linux bridge holding the gateways.
    Bridge {
        /// Bridge device.
        bridge: String,
        /// Whether its pods' ports are in hairpin mode.
        hairpin: bool,
    },
    /// veth pairs without a bridge: /32 and /128 pod addresses, link-local gateways, host routes.
    Routed,
    /// macvlan children of a parent device.
    Macvlan {
        /// Parent device.
        parent: String,
        /// Mode.
        mode: MacvlanMode,
    },
    /// ipvlan children of a parent device.
    Ipvlan {
        /// Parent device.
        parent: String,
        /// Mode.
        mode: IpvlanMode,
    },
    /// Existing host devices moved into pods.
    HostDevice {
        /// Whether the node's uplink may be taken.
        allow_uplink: bool,
    },
    /// A CNI configuration list run with libcni's semantics.
    Cni(Arc<CniNetwork>),
}

/// The configuration list of a `cni` network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CniNetwork {
    /// The list as parsed.
    pub list: ConfList,
    /// Its text as read: recorded with each attachment, so DEL runs the configuration ADD ran.
    pub text: String,
}

/// A network with its subnets parsed and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Network {
    /// Name.
    pub name: String,
    /// Driver and its devices.
    pub driver: Driver,
    /// Default MTU.
    pub mtu: u32,
    /// (subnet, gateway) per family, IPv4 first. Routed networks' gateways are the link-local
    /// [`ROUTED_GATEWAY_V4`] and [`ROUTED_GATEWAY_V6`].
    pub subnets: Vec<(IpNet, IpAddr)>,
    /// Egress masquerade (`bridge` and `routed` networks): when on, the destinations it leaves
    /// alone besides the network's subnets and the multicast and link-local ranges.
    pub masquerade: Option<Vec<IpNet>>,
    /// Whether the subnets are the node's pod CIDRs from its Node object: empty until known.
    pub pod_cidr_from_node: bool,
    /// Whether the pods' host links are guarded against spoofed sources (`bridge` and `routed`
    /// networks; see `node::antispoof`).
    pub antispoof: bool,
}

impl Network {
    /// The driver's name as configured (`bridge`, `routed`, ...).
    pub fn kind(&self) -> &'static str {
        match self.driver {
            Driver::Bridge { .. } => "bridge",
            Driver::Routed => "routed",
            Driver::Macvlan { .. } => "macvlan",
            Driver::Ipvlan { .. } => "ipvlan",
            Driver::HostDevice { .. } => "host-device",
            Driver::Cni(_) => "cni",
        }
    }

    /// The bridge of a bridge network.
    pub fn bridge(&self) -> Option<&str> {
        match &self.driver {
            Driver::Bridge { bridge, .. } => Some(bridge),
            _ => None,
        }
    }

    /// The parent device of a macvlan or ipvlan network.
    pub fn parent(&self) -> Option<&str> {
        match &self.driver {
            Driver::Macvlan { parent, .. } | Driver::Ipvlan { parent, .. } => Some(parent),
            _ => None,
        }
    }

    /// The configuration list of a cni network.
    pub fn cni(&self) -> Option<&CniNetwork> {
        match &self.driver {
            Driver::Cni(cni) => Some(cni),
            _ => None,
        }
    }

    /// The mode of a macvlan or ipvlan network.
    pub fn mode(&self) -> Option<&'static str> {
        match &self.driver {
            Driver::Macvlan { mode, .. } => Some(mode.as_str()),
            Driver::Ipvlan { mode, .. } => Some(mode.as_str()),
            _ => None,
        }
    }

    /// The interface kind a request without one gets.
    pub fn default_kind(&self) -> InterfaceKind {
        match self.driver {
            Driver::Bridge { .. } | Driver::Routed => InterfaceKind::Veth,
            Driver::Macvlan { .. } => InterfaceKind::Macvlan,
            Driver::Ipvlan { .. } => InterfaceKind::Ipvlan,
            Driver::HostDevice { .. } => InterfaceKind::HostDevice,
            Driver::Cni(_) => InterfaceKind::Cni,
        }
    }

    /// Whether an interface of `kind` (with a DAN tap when `dan`) can be made on this network;
    /// the rule broken when not.
    pub fn allows(&self, kind: InterfaceKind, dan: bool) -> std::result::Result<(), String> {
        let ok = match (&self.driver, kind) {
            (Driver::Bridge { .. }, InterfaceKind::Veth | InterfaceKind::Tap) => true,
            (Driver::Routed, InterfaceKind::Veth) => true,
            (Driver::Routed, InterfaceKind::Tap) if !dan => true,
            (Driver::Routed, InterfaceKind::Tap) => {
                return Err(format!(
                    "a DAN tap needs a bridge; network {} is routed",
                    self.name
                ))
            }
            (_, k) => k == self.default_kind(),
        };
        if ok {
            Ok(())
        } else {
            Err(format!(
                "{} is not supported on {} network {}",
                kind.as_str(),
                self.kind(),
                self.name
            ))
        }
    }

    /// Whether the pods' bridge ports are in hairpin mode (`hairpin` on a `bridge` network).
    pub fn hairpin(&self) -> bool {
        matches!(self.driver, Driver::Bridge { hairpin: true, .. })
    }

    /// The masquerade of this network for knid's nf_tables table: sources its subnets, left
    /// alone the node's pod subnets (`local`, its own among them) and `no_masquerade`; `None`
    /// when it does not masquerade.
    pub fn masquerade_rule(&self, local: &[IpNet]) -> Option<knid_netops::nft::Masquerade> {
        let extra = self.masquerade.as_ref()?;
        let own: Vec<IpNet> = self.subnets.iter().map(|(n, _)| *n).collect();
        let mut except: Vec<IpNet> = own.clone();
        for net in local.iter().chain(extra) {
            if !except.contains(net) {
                except.push(*net);
            }
        }
        Some(knid_netops::nft::Masquerade {
            name: self.name.clone(),
            sources: own,
            except,
        })
    }

    /// Whether a pod may take the node's uplink (`allow_uplink` on a `host-device` network).
    pub fn allows_uplink(&self) -> bool {
        matches!(self.driver, Driver::HostDevice { allow_uplink: true })
    }

    /// Whether the driver's interfaces carry their parent's MAC.
    pub fn shares_parent_mac(&self) -> bool {
        matches!(
            self.driver,
            Driver::Ipvlan { .. }
                | Driver::Macvlan {
                    mode: MacvlanMode::Passthru,
                    ..
                }
        )
    }

    /// The rules a requested interface follows on this network, once its kind is allowed here
    /// ([`Network::allows`]): no MAC where interfaces carry their parent's, static addresses
    /// assignable in its subnets (when knid's IPAM assigns the kind's addresses:
    /// `own_addresses`), no MTU above the network's on a bridge. The error names the field, relative to the interface.
    pub(crate) fn check_interface(
        &self,
        spec: &InterfaceSpec,
        own_addresses: bool,
    ) -> std::result::Result<(), (String, validate::Invalid)> {
        let refuse = |field: String, rule: String| Err((field, validate::Invalid::new(rule)));
        if spec.mac.is_some() && self.shares_parent_mac() {
            return refuse(
                "mac".into(),
                format!(
                    "must be empty: {} interfaces carry their parent's MAC",
                    self.kind()
                ),
            );
        }
        if let (Some(mtu), Some(bridge)) = (spec.mtu, self.bridge()) {
            if mtu > self.mtu {
                return refuse(
                    "mtu".into(),
                    format!(
                        "{mtu} is above network {}'s mtu {}: bridge {bridge} keeps the network's",
                        self.name, self.mtu
                    ),
                );
            }
        }
        let static_ips = if own_addresses {
            &spec.static_ips[..]
        } else {
            &[][..]
        };
        for (j, ip) in static_ips.iter().enumerate() {
            let ok = self
                .subnets
                .iter()
                .any(|(net, gw)| crate::ipam::is_assignable(net, *ip) && gw != ip);
            if !ok {
                return refuse(
                    format!("static_ips[{j}]"),
                    format!("{ip} is not an assignable address of network {}", self.name),
                );
            }
        }
        Ok(())
    }

    /// This network with `cidrs` (the node's pod CIDRs, from its Node object) as its subnets,
    /// gateways chosen as for configured subnets; the rule a CIDR breaks otherwise.
    pub fn with_pod_cidrs(&self, cidrs: &[IpNet]) -> std::result::Result<Network, String> {
        let routed = self.driver == Driver::Routed;
        let subnets = with_gateways(cidrs, &[], routed).map_err(|(_, i, why)| {
            let cidr = cidrs.get(i).map(|c| c.to_string()).unwrap_or_default();
            format!("pod CIDR {cidr}: {why}")
        })?;
        Ok(Network {
            subnets,
            ..self.clone()
        })
    }

    /// Whether the network waits for the node's pod CIDR: its subnets come from the Node object
    /// and are not known yet.
    pub fn awaits_pod_cidr(&self) -> bool {
        self.pod_cidr_from_node && self.subnets.is_empty()
    }

    /// The subnet of a family, with its gateway.
    pub fn subnet(&self, family: Family) -> Option<(IpNet, IpAddr)> {
        self.subnets
            .iter()
            .copied()
            .find(|(net, _)| Family::of(&net.addr()) == family)
    }
}

/// A network name: 1–64 chars of `[A-Za-z0-9_.-]`.
pub fn network_name(value: &str) -> std::result::Result<(), validate::Invalid> {
    validate::name(value)
}

/// A subnet or gateway refused: the key (`subnets` or `gateways`), the index, the rule.
type SubnetRefusal = (&'static str, usize, String);

/// Each subnet with its gateway (the `gateways` entry, else the first host address; routed
/// networks' link-local ones), IPv4 first; on error the key (`subnets` or `gateways`), the
/// index and the rule. At most one subnet per family, each with room for a gateway and two pods.
fn with_gateways(
    nets: &[IpNet],
    gateways: &[String],
    routed: bool,
) -> std::result::Result<Vec<(IpNet, IpAddr)>, SubnetRefusal> {
    let mut subnets: Vec<(IpNet, IpAddr)> = Vec::with_capacity(nets.len());
    for (i, net) in nets.iter().copied().enumerate() {
        let family = Family::of(&net.addr());
        if subnets.iter().any(|(n, _)| Family::of(&n.addr()) == family) {
            return Err((
                "subnets",
                i,
                format!("only one {} subnet per network", family.as_str()),
            ));
        }
        // Leave room for a gateway and at least two pods.
        let max_prefix = if family == Family::V4 { 29 } else { 125 };
        if net.prefix_len() > max_prefix {
            return Err((
                "subnets",
                i,
                format!("prefix must be /{max_prefix} or shorter"),
            ));
        }
        let gateway = match gateways.get(i) {
            None if routed && family == Family::V4 => ROUTED_GATEWAY_V4,
            None if routed => ROUTED_GATEWAY_V6,
            Some(gw) => {
                let addr = validate::ip(gw).map_err(|e| ("gateways", i, e.rule))?;
                if !crate::ipam::is_assignable(&net, addr) {
                    return Err((
                        "gateways",
                        i,
                        format!("{addr} is not a host address of {net}"),
                    ));
                }
                addr
            }
            None => crate::ipam::first_host(&net),
        };
        subnets.push((net, gateway));
    }
    subnets.sort_by_key(|(n, _)| Family::of(&n.addr()));
    Ok(subnets)
}

impl NetworkConfig {
    pub(super) fn parse(&self, name: &str) -> Result<Network> {
        let field = |f: &str| format!("networks.{name}.{f}");
        let bad = |f: &str, why: String| Error::Config(format!("{}: {why}", field(f)));
        network_name(name).map_err(|e| Error::Config(format!("networks.{name}: {}", e.rule)))?;
        let driver = self.driver().map_err(|(f, why)| bad(f, why))?;
        let mtu = self.mtu.unwrap_or(DEFAULT_MTU);
        validate::mtu(mtu).map_err(|e| bad("mtu", e.rule))?;
        // Subnets and gateways set where something else owns the addresses.
        let owned_elsewhere = |why: &str| -> Result<()> {
            for (key, set) in [
                ("subnets", !self.subnets.is_empty()),
                ("gateways", !self.gateways.is_empty()),
            ] {
                if set {
                    return Err(bad(key, why.to_owned()));
                }
            }
            Ok(())
        };
        if let Driver::Cni(_) = driver {
            // The plugins own addressing and devices.
            owned_elsewhere("is not used by cni networks: the plugins' IPAM owns addresses")?;
        } else if self.pod_cidr_from_node {
            if !matches!(driver, Driver::Bridge { .. } | Driver::Routed) {
                return Err(bad(
                    "pod_cidr_from_node",
                    format!("is not used by {} networks", self.kind),
                ));
            }
            owned_elsewhere(
                "must be empty: the subnets are the node's pod CIDRs (pod_cidr_from_node)",
            )?;
        } else if self.subnets.is_empty() && !matches!(driver, Driver::HostDevice { .. }) {
            return Err(bad("subnets", "must name at least one subnet".into()));
        }
        let routed = driver == Driver::Routed;
        if routed && !self.gateways.is_empty() {
            return Err(bad(
                "gateways",
                "must be empty: routed pods use the link-local gateways 169.254.1.1 and fe80::1"
                    .into(),
            ));
        }
        if !self.gateways.is_empty() && self.gateways.len() != self.subnets.len() {
            return Err(bad(
                "gateways",
                "must be empty or have one entry per subnet".into(),
            ));
        }
        let mut nets = Vec::with_capacity(self.subnets.len());
        for (i, text) in self.subnets.iter().enumerate() {
            let net = validate::subnet(text).map_err(|e| bad(&format!("subnets[{i}]"), e.rule))?;
            nets.push(net);
        }
        let subnets = with_gateways(&nets, &self.gateways, routed)
            .map_err(|(key, i, why)| bad(&format!("{key}[{i}]"), why))?;
        let masquerade = self.masquerade(&driver).map_err(|(f, why)| bad(f, why))?;
        let guarded = matches!(driver, Driver::Bridge { .. } | Driver::Routed);
        if self.antispoof.is_some() && !guarded {
            return Err(bad(
                "antispoof",
                format!("is not used by {} networks", self.kind),
            ));
        }
        Ok(Network {
            name: name.to_owned(),
            driver,
            mtu,
            subnets,
            masquerade,
            pod_cidr_from_node: self.pod_cidr_from_node,
            antispoof: guarded && self.antispoof != Some(false),
        })
    }

    /// Egress masquerade and its exceptions; on error the key and the rule.
    fn masquerade(
        &self,
        driver: &Driver,
    ) -> std::result::Result<Option<Vec<IpNet>>, (&'static str, String)> {
        let nat = matches!(driver, Driver::Bridge { .. } | Driver::Routed);
        for (key, set) in [
            ("masquerade", self.masquerade.is_some()),
            ("no_masquerade", !self.no_masquerade.is_empty()),
        ] {
            if set && !nat {
                return Err((key, format!("is not used by {} networks", self.kind)));
            }
        }
        if !nat || self.masquerade == Some(false) {
            return Ok(None);
        }
        let mut except = Vec::with_capacity(self.no_masquerade.len());
        for (i, text) in self.no_masquerade.iter().enumerate() {
            let net = validate::subnet(text)
                .map_err(|e| ("no_masquerade", format!("[{i}]: {}", e.rule)))?;
            except.push(net);
        }
        Ok(Some(except))
    }

    /// The driver with its devices; on error the key and the rule.
    fn driver(&self) -> std::result::Result<Driver, (&'static str, String)> {
        let device = |key: &'static str, value: &Option<String>, wanted: bool| match value {
            Some(name) if wanted => validate::ifname(name)
                .map(|()| Some(name.clone()))
                .map_err(|e| (key, e.rule)),
            Some(_) => Err((key, format!("is not used by {} networks", self.kind))),
            None if wanted => Err((key, format!("is required by {} networks", self.kind))),
            None => Ok(None),
        };
        let kind = self.kind.as_str();
        if !matches!(
            kind,
            "bridge" | "routed" | "macvlan" | "ipvlan" | "host-device" | "cni"
        ) {
            return Err((
                "kind",
                format!(
                    "{:?} is not one of bridge, routed, macvlan, ipvlan, host-device, cni",
                    self.kind
                ),
            ));
        }
        if kind == "cni" {
            return self.cni_driver().map(|cni| Driver::Cni(Arc::new(cni)));
        }
        for (key, set) in [
            ("conflist", self.conflist.is_some()),
            ("conflist_inline", self.conflist_inline.is_some()),
            ("allow_uplink", self.allow_uplink && kind != "host-device"),
            ("hairpin", self.hairpin.is_some() && kind != "bridge"),
        ] {
            if set {
                return Err((key, format!("is not used by {kind} networks")));
            }
        }
        let bridge = device("bridge", &self.bridge, kind == "bridge")?;
        let parent = device("parent", &self.parent, matches!(kind, "macvlan" | "ipvlan"))?;
        let mode = |default: &str| self.mode.clone().unwrap_or_else(|| default.to_owned());
        if self.mode.is_some() && parent.is_none() {
            return Err(("mode", format!("is not used by {kind} networks")));
        }
        match (kind, bridge, parent) {
            ("bridge", Some(bridge), _) => Ok(Driver::Bridge {
                bridge,
                hairpin: self.hairpin.unwrap_or(true),
            }),
            ("routed", _, _) => Ok(Driver::Routed),
            ("host-device", _, _) => Ok(Driver::HostDevice {
                allow_uplink: self.allow_uplink,
            }),
            ("macvlan", _, Some(parent)) => {
                let mode = MacvlanMode::parse(&mode("bridge")).ok_or((
                    "mode",
                    "must be bridge, private, vepa or passthru".to_owned(),
                ))?;
                Ok(Driver::Macvlan { parent, mode })
            }
            ("ipvlan", _, Some(parent)) => {
                let mode = IpvlanMode::parse(&mode("l2"))
                    .ok_or(("mode", "must be l2 or l3".to_owned()))?;
                Ok(Driver::Ipvlan { parent, mode })
            }
            _ => Err(("kind", format!("{kind:?} is missing its device"))),
        }
    }

    /// A cni network's configuration list, read and checked.
    fn cni_driver(&self) -> std::result::Result<CniNetwork, (&'static str, String)> {
        for (key, set) in [
            ("bridge", self.bridge.is_some()),
            ("parent", self.parent.is_some()),
            ("mode", self.mode.is_some()),
        ] {
            if set {
                return Err((key, "is not used by cni networks".to_owned()));
            }
        }
        let (key, text) = match (&self.conflist, &self.conflist_inline) {
            (Some(path), None) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| ("conflist", format!("read {}: {e}", path.display())))?;
                ("conflist", text)
            }
            (None, Some(text)) => ("conflist_inline", text.clone()),
            (Some(_), Some(_)) => {
                return Err((
                    "conflist",
                    "set either conflist or conflist_inline, not both".into(),
                ))
            }
            (None, None) => {
                return Err((
                    "conflist",
                    "is required by cni networks (or conflist_inline)".into(),
                ))
            }
        };
        let list = ConfList::parse(text.as_bytes()).map_err(|e| (key, e.msg))?;
        Ok(CniNetwork { list, text })
    }
}

#[cfg(test)]
mod tests;
