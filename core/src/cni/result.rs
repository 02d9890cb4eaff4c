//! CNI results (the CNI spec's "Success" result): parsed from any supported version, written in the version the caller
//! asked for. Before 1.0.0 each `ips` entry carries `version` ("4"/"6"); 1.1.0 adds interface
//! `mtu`/`socketPath`/`pciID` and route `mtu`/`advmss`/`priority`/`table`/`scope`, which are left
//! out of older versions.

use std::net::IpAddr;

use ipnet::IpNet;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::cni::error::{CniError, DECODE};
use crate::cni::version::Version;

/// An interface a plugin created or touched.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Interface {
    /// Name (in its netns).
    pub name: String,
    /// MAC address, may be empty.
    pub mac: String,
    /// MTU (1.1.0), when known.
    pub mtu: Option<u32>,
    /// Netns path for a pod-side interface; empty for a host interface.
    pub sandbox: String,
    /// Socket path (1.1.0), e.g. vhost-user.
    pub socket_path: String,
    /// PCI id (1.1.0) of a device.
    pub pci_id: String,
}

/// One address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpConfig {
    /// Address with prefix length.
    pub address: IpNet,
    /// Default gateway of this address's subnet.
    pub gateway: Option<IpAddr>,
    /// Index into `interfaces` of the interface holding it.
    pub interface: Option<usize>,
}

/// One route in the pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// Destination.
    pub dst: IpNet,
    /// Next hop; none means the default gateway.
    pub gw: Option<IpAddr>,
    /// Route MTU (1.1.0).
    pub mtu: Option<u32>,
    /// Advertised MSS (1.1.0).
    pub advmss: Option<u32>,
    /// Priority / metric (1.1.0).
    pub priority: Option<u32>,
    /// Routing table (1.1.0).
    pub table: Option<u32>,
    /// Scope (1.1.0): 0 universe, 253 link, 254 host.
    pub scope: Option<u32>,
}

/// DNS settings.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(default)]
pub struct Dns {
    /// Name servers.
    pub nameservers: Vec<String>,
    /// Local domain.
    pub domain: String,
    /// Search domains.
    pub search: Vec<String>,
    /// Resolver options.
    pub options: Vec<String>,
}

impl Dns {
    /// Whether nothing is set.
    pub fn is_empty(&self) -> bool {
        self.nameservers.is_empty()
            && self.domain.is_empty()
            && self.search.is_empty()
            && self.options.is_empty()
    }
}

/// A CNI ADD result, version-neutral.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CniResult {
    /// Interfaces, host-side ones included.
    pub interfaces: Vec<Interface>,
    /// Addresses.
    pub ips: Vec<IpConfig>,
    /// Routes.
    pub routes: Vec<Route>,
    /// DNS.
    pub dns: Dns,
}

#[derive(Deserialize)]
#[serde(default, rename_all = "camelCase")]
#[derive(Default)]
struct RawInterface {
    name: String,
    mac: String,
    mtu: Option<u32>,
    sandbox: String,
    socket_path: String,
    #[serde(rename = "pciID")]
    pci_id: String,
}

#[derive(Deserialize)]
struct RawIp {
    address: String,
    #[serde(default)]
    gateway: Option<String>,
    #[serde(default)]
    interface: Option<usize>,
}

#[derive(Deserialize)]
struct RawRoute {
    dst: String,
    #[serde(default)]
    gw: Option<String>,
    #[serde(default)]
    mtu: Option<u32>,
    #[serde(default)]
    advmss: Option<u32>,
    #[serde(default)]
    priority: Option<u32>,
    #[serde(default)]
    table: Option<u32>,
    #[serde(default)]
    scope: Option<u32>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawResult {
    interfaces: Vec<RawInterface>,
    ips: Vec<RawIp>,
    routes: Vec<RawRoute>,
    dns: Dns,
}

fn decode(field: &str, detail: impl std::fmt::Display) -> CniError {
    CniError::new(DECODE, format!("result: invalid {field}: {detail}"))
}

fn cidr(field: &str, text: &str) -> Result<IpNet, CniError> {
    text.parse::<IpNet>()
        .map_err(|_| decode(field, format!("{text:?} is not an address/prefix")))
}

fn address(field: &str, text: Option<&str>) -> Result<Option<IpAddr>, CniError> {
    match text {
        None | Some("") => Ok(None),
        Some(t) => t
            .parse()
            .map(Some)
            .map_err(|_| decode(field, format!("{t:?} is not an IP address"))),
    }
}

impl CniResult {
    /// Parses a result of any supported version (0.3.x `ip4`/`ip6` results of 0.2.0 and older
    /// are refused). Unknown keys are ignored; a bad address names its field.
    pub fn parse(value: &Value) -> Result<Self, CniError> {
        if value.get("ip4").is_some() || value.get("ip6").is_some() {
            return Err(decode(
                "result",
                "0.1/0.2 results (ip4/ip6) are not supported",
            ));
        }
        let raw: RawResult =
            serde_json::from_value(value.clone()).map_err(|e| decode("result", e))?;
        let interfaces: Vec<Interface> = raw
            .interfaces
            .into_iter()
            .map(|i| Interface {
                name: i.name,
                mac: i.mac,
                mtu: i.mtu,
                sandbox: i.sandbox,
                socket_path: i.socket_path,
                pci_id: i.pci_id,
            })
            .collect();
        let mut ips = Vec::with_capacity(raw.ips.len());
        for (k, ip) in raw.ips.into_iter().enumerate() {
            if let Some(i) = ip.interface.filter(|i| *i >= interfaces.len()) {
                return Err(decode(
                    &format!("ips[{k}].interface"),
                    format!("{i} is not an index into interfaces"),
                ));
            }
            ips.push(IpConfig {
                address: cidr(&format!("ips[{k}].address"), &ip.address)?,
                gateway: address(&format!("ips[{k}].gateway"), ip.gateway.as_deref())?,
                interface: ip.interface,
            });
        }
        let mut routes = Vec::with_capacity(raw.routes.len());
        for (k, r) in raw.routes.into_iter().enumerate() {
            routes.push(Route {
                dst: cidr(&format!("routes[{k}].dst"), &r.dst)?,
                gw: address(&format!("routes[{k}].gw"), r.gw.as_deref())?,
                mtu: r.mtu,
                advmss: r.advmss,
                priority: r.priority,
                table: r.table,
                scope: r.scope,
            });
        }
        Ok(Self {
            interfaces,
            ips,
            routes,
            dns: raw.dns,
        })
    }

    /// The result in `version`'s format.
    pub fn to_json(&self, version: Version) -> Value {
        let v11 = version >= Version::V1_1_0;
        let interfaces: Vec<Value> = self
            .interfaces
            .iter()
            .map(|i| {
                let mut o = Map::new();
                o.insert("name".into(), json!(i.name));
                if !i.mac.is_empty() {
                    o.insert("mac".into(), json!(i.mac));
                }
                if let (true, Some(mtu)) = (v11, i.mtu) {
                    o.insert("mtu".into(), json!(mtu));
                }
                if !i.sandbox.is_empty() {
                    o.insert("sandbox".into(), json!(i.sandbox));
                }
                if v11 && !i.socket_path.is_empty() {
                    o.insert("socketPath".into(), json!(i.socket_path));
                }
                if v11 && !i.pci_id.is_empty() {
                    o.insert("pciID".into(), json!(i.pci_id));
                }
                Value::Object(o)
            })
            .collect();
        let ips: Vec<Value> = self
            .ips
            .iter()
            .map(|ip| {
                let mut o = Map::new();
                if version.ips_carry_version() {
                    let family = if ip.address.addr().is_ipv4() {
                        "4"
                    } else {
                        "6"
                    };
                    o.insert("version".into(), json!(family));
                }
                if let Some(i) = ip.interface {
                    o.insert("interface".into(), json!(i));
                }
                o.insert("address".into(), json!(ip.address.to_string()));
                if let Some(gw) = ip.gateway {
                    o.insert("gateway".into(), json!(gw.to_string()));
                }
                Value::Object(o)
            })
            .collect();
        let routes: Vec<Value> = self
            .routes
            .iter()
            .map(|r| {
                let mut o = Map::new();
                o.insert("dst".into(), json!(r.dst.to_string()));
                if let Some(gw) = r.gw {
                    o.insert("gw".into(), json!(gw.to_string()));
                }
                if v11 {
                    for (key, value) in [
                        ("mtu", r.mtu),
                        ("advmss", r.advmss),
                        ("priority", r.priority),
                        ("table", r.table),
                        ("scope", r.scope),
                    ] {
                        if let Some(value) = value {
                            o.insert(key.into(), json!(value));
                        }
                    }
                }
                Value::Object(o)
            })
            .collect();
        let mut out = Map::new();
        out.insert("cniVersion".into(), json!(version.as_str()));
        if !interfaces.is_empty() {
            out.insert("interfaces".into(), Value::Array(interfaces));
        }
        if !ips.is_empty() {
            out.insert("ips".into(), Value::Array(ips));
        }
        if !routes.is_empty() {
            out.insert("routes".into(), Value::Array(routes));
        }
        let mut dns = Map::new();
        if !self.dns.nameservers.is_empty() {
            dns.insert("nameservers".into(), json!(self.dns.nameservers));
        }
        if !self.dns.domain.is_empty() {
            dns.insert("domain".into(), json!(self.dns.domain));
        }
        if !self.dns.search.is_empty() {
            dns.insert("search".into(), json!(self.dns.search));
        }
        if !self.dns.options.is_empty() {
            dns.insert("options".into(), json!(self.dns.options));
        }
        out.insert("dns".into(), Value::Object(dns));
        Value::Object(out)
    }

    /// The first interface living in a netns (the pod side), with its index.
    pub fn pod_interface(&self, ifname: &str) -> Option<(usize, &Interface)> {
        self.interfaces
            .iter()
            .enumerate()
            .find(|(_, i)| !i.sandbox.is_empty() && i.name == ifname)
    }
}

#[cfg(test)]
mod tests;
