//! The plugin configuration on stdin (the CNI spec's network configuration) as libcni hands it
//! to one plugin of a list:
//! `cniVersion` and `name` injected, `runtimeConfig` from the capabilities the plugin declared,
//! `prevResult` when chained, and for GC the still-valid attachments. knid's own keys are
//! `network` and `socket`; unknown keys are ignored, as the spec asks.

use std::path::PathBuf;

use knid_core::cni::conf::check_name;
use knid_core::cni::error::{DECODE, INVALID_CONFIG};
use knid_core::cni::{CniError, CniResult, Version};
use serde_json::{Map, Value};

use crate::pb;

/// The `type` this plugin answers to.
pub const PLUGIN_TYPE: &str = "knid";
/// knid's socket when the configuration names none.
pub const DEFAULT_SOCKET: &str = "/run/knid/knid.sock";

/// One plugin's configuration, checked.
#[derive(Debug, Clone)]
pub struct PluginConf {
    /// The requested spec version; results and errors are written in it.
    pub version: Version,
    /// The knid network: `network`, else the list's `name`.
    pub network: String,
    /// knid's socket.
    pub socket: PathBuf,
    /// Capability arguments.
    pub runtime: RuntimeConfig,
    /// The result of the ADD (or of the chain so far), when given.
    pub prev_result: Option<CniResult>,
    /// GC's still-valid attachments as (container id, ifname); `None` when the key is absent.
    pub valid_attachments: Option<Vec<(String, String)>>,
}

/// The capability arguments knid understands (CONVENTIONS.md): `portMappings`, `dns`, `ips`,
/// `mac`. Others are ignored.
#[derive(Debug, Clone, Default)]
pub struct RuntimeConfig {
    /// Host port mappings, recorded by knid.
    pub port_mappings: Vec<pb::PortMapping>,
    /// DNS settings, recorded by knid and returned in the result.
    pub dns: Option<pb::Dns>,
    /// Requested addresses, plain IPs (a prefix length given is dropped: the network's
    /// subnet decides it).
    pub ips: Vec<String>,
    /// Requested pod-side MAC.
    pub mac: String,
}

fn invalid(key: &str, rule: impl std::fmt::Display) -> CniError {
    CniError::new(INVALID_CONFIG, format!("invalid {key}: {rule}"))
}

/// The `cniVersion` the caller asked for, as written (for echoing it back in an error, even
/// one about the version itself).
pub fn requested_version(conf: &Value) -> Option<&str> {
    conf.get("cniVersion").and_then(Value::as_str)
}

impl PluginConf {
    /// Checks a decoded configuration. An unsupported `cniVersion` is code 1, anything else
    /// wrong code 7 naming the key (a malformed `prevResult` is code 6).
    pub fn parse(conf: &Value) -> Result<Self, CniError> {
        let Value::Object(obj) = conf else {
            return Err(invalid("network configuration", "must be a JSON object"));
        };
        let version = match obj.get("cniVersion") {
            Some(Value::String(v)) => Version::parse(v)?,
            Some(_) => return Err(invalid("cniVersion", "must be a string")),
            None => return Err(invalid("cniVersion", "missing")),
        };
        let name = string(obj, "name")?.ok_or_else(|| invalid("name", "missing"))?;
        check_name("name", name)?;
        match string(obj, "type")? {
            Some(PLUGIN_TYPE) => {}
            Some(other) => {
                return Err(invalid("type", format!("{other:?} is not {PLUGIN_TYPE:?}")))
            }
            None => return Err(invalid("type", "missing")),
        }
        let network = string(obj, "network")?.unwrap_or(name);
        knid_core::config::network_name(network)
            .map_err(|e| invalid("network", format!("{network:?} {}", e.rule)))?;
        let socket = match string(obj, "socket")? {
            None => DEFAULT_SOCKET,
            Some(path) if path.starts_with('/') => path,
            Some(path) => {
                return Err(invalid(
                    "socket",
                    format!("{path:?} must be an absolute path"),
                ))
            }
        };
        let runtime = match obj.get("runtimeConfig") {
            None | Some(Value::Null) => RuntimeConfig::default(),
            Some(Value::Object(rc)) => RuntimeConfig::parse(rc)?,
            Some(_) => return Err(invalid("runtimeConfig", "must be an object")),
        };
        let prev_result = match obj.get("prevResult") {
            None | Some(Value::Null) => None,
            Some(prev) => Some(
                CniResult::parse(prev)
                    .map_err(|e| CniError::new(DECODE, format!("invalid prevResult: {}", e.msg)))?,
            ),
        };
        // The spec's 1.1.0 text names the key `cni.dev/attachments`; libcni sends both.
        let valid_attachments = match obj.get("cni.dev/valid-attachments") {
            Some(list) => Some(attachments("cni.dev/valid-attachments", list)?),
            None => match obj.get("cni.dev/attachments") {
                Some(list) => Some(attachments("cni.dev/attachments", list)?),
                None => None,
            },
        };
        Ok(Self {
            version,
            network: network.to_owned(),
            socket: PathBuf::from(socket),
            runtime,
            prev_result,
            valid_attachments,
        })
    }
}

impl RuntimeConfig {
    fn parse(rc: &Map<String, Value>) -> Result<Self, CniError> {
        let mut out = Self::default();
        if let Some(list) = rc.get("portMappings") {
            let at = "runtimeConfig.portMappings";
            for (i, m) in array(at, list)?.iter().enumerate() {
                let at = format!("{at}[{i}]");
                let m = m
                    .as_object()
                    .ok_or_else(|| invalid(&at, "must be an object"))?;
                let port = |key: &str| -> Result<u32, CniError> {
                    let value = m
                        .get(key)
                        .and_then(Value::as_u64)
                        .filter(|p| (1..=65535).contains(p));
                    // Checked to be at most 65535 just above.
                    value
                        .map(|p| p as u32)
                        .ok_or_else(|| invalid(&format!("{at}.{key}"), "must be a port, 1-65535"))
                };
                out.port_mappings.push(pb::PortMapping {
                    host_port: port("hostPort")?,
                    container_port: port("containerPort")?,
                    // Runtimes spell it either case; knid wants lower case.
                    protocol: string(m, "protocol")
                        .map_err(|e| invalid(&format!("{at}.protocol"), e.msg))?
                        .unwrap_or_default()
                        .to_ascii_lowercase(),
                    host_ip: string(m, "hostIP")
                        .map_err(|e| invalid(&format!("{at}.hostIP"), e.msg))?
                        .unwrap_or_default()
                        .to_owned(),
                    ..Default::default()
                });
            }
        }
        if let Some(dns) = rc.get("dns") {
            let at = "runtimeConfig.dns";
            let dns = dns
                .as_object()
                .ok_or_else(|| invalid(at, "must be an object"))?;
            let words = |key: &str| strings(&format!("{at}.{key}"), dns.get(key));
            out.dns = Some(pb::Dns {
                servers: words("servers")?,
                searches: words("searches")?,
                options: words("options")?,
                domain: string(dns, "domain")
                    .map_err(|e| invalid(&format!("{at}.domain"), e.msg))?
                    .unwrap_or_default()
                    .to_owned(),
                ..Default::default()
            });
        }
        out.ips = strings("runtimeConfig.ips", rc.get("ips"))?
            .into_iter()
            .map(|ip| match ip.split_once('/') {
                Some((addr, _prefix)) => addr.to_owned(),
                None => ip,
            })
            .collect();
        out.mac = string(rc, "mac")
            .map_err(|e| invalid("runtimeConfig.mac", e.msg))?
            .unwrap_or_default()
            .to_owned();
        Ok(out)
    }
}

/// An optional string key; any other JSON type is code 7 naming it.
fn string<'a>(obj: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, CniError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(invalid(key, "must be a string")),
    }
}

fn array<'a>(at: &str, value: &'a Value) -> Result<&'a [Value], CniError> {
    value
        .as_array()
        .map(Vec::as_slice)
        .ok_or_else(|| invalid(at, "must be a list"))
}

fn strings(at: &str, value: Option<&Value>) -> Result<Vec<String>, CniError> {
    let Some(value) = value.filter(|v| !v.is_null()) else {
        return Ok(Vec::new());
    };
    array(at, value)?
        .iter()
        .enumerate()
        .map(|(i, v)| {
            v.as_str()
                .map(str::to_owned)
                .ok_or_else(|| invalid(&format!("{at}[{i}]"), "must be a string"))
        })
        .collect()
}

fn attachments(key: &str, value: &Value) -> Result<Vec<(String, String)>, CniError> {
    array(key, value)?
        .iter()
        .enumerate()
        .map(|(i, entry)| {
            let field = |name: &str| {
                entry
                    .get(name)
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .ok_or_else(|| invalid(&format!("{key}[{i}].{name}"), "must be a string"))
            };
            Ok((field("containerID")?, field("ifname")?))
        })
        .collect()
}

#[cfg(test)]
mod tests;
