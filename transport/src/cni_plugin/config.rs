//! The plugin configuration on stdin (the CNI spec's network configuration) as libcni hands it
//! to one plugin of a list:
//! `cniVersion` and `name` injected, `runtimeConfig` from the capabilities the plugin declared,
//! `prevResult` when chained, and for GC the still-valid attachments. knid's own keys are
//! `network` and `socket`; unknown keys are ignored, as the spec asks. Keys are matched the way
//! Go plugins match them ([`super::go_json`]): exact, else ignoring case.

use std::path::PathBuf;

use knid_core::cni::conf::check_name;
use knid_core::cni::error::{DECODE, INVALID_CONFIG};
use knid_core::cni::{CniError, CniResult, Version};
use serde_json::{Map, Value};

use super::go_json::field;
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

/// The capability arguments knid understands (CONVENTIONS.md, and what go-cni and CRI-O send):
/// `portMappings`, `dns`, `ips`, `mac`, `bandwidth` and `io.kubernetes.cri.pod-annotations`.
/// `ipRanges` and `cgroupPath` are accepted and not used (the knid network decides the
/// addresses; knid has no per-cgroup state); any other key is ignored.
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
    /// Rate limits of the pod's traffic, as the CNI `bandwidth` plugin reads them.
    pub bandwidth: Option<Bandwidth>,
    /// The pod's annotations (containerd's `io.kubernetes.cri.pod-annotations`), recorded as
    /// the sandbox's annotations.
    pub annotations: std::collections::HashMap<String, String>,
}

/// The `bandwidth` capability: bits per second and bits of burst, as the CNI `bandwidth`
/// plugin reads them (0 = no limit that way).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bandwidth {
    /// Traffic into the pod, bits/s.
    pub ingress_rate: u64,
    /// Burst into the pod, bits.
    pub ingress_burst: u64,
    /// Traffic out of the pod, bits/s.
    pub egress_rate: u64,
    /// Burst out of the pod, bits.
    pub egress_burst: u64,
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
    /// wrong code 7 naming the key (a malformed `prevResult` is code 6). For a teardown
    /// (`teardown`: DEL), a `runtimeConfig` or `prevResult` knid cannot use is dropped instead:
    /// DEL removes what knid recorded whatever the runtime sends with it.
    pub fn parse(conf: &Value, teardown: bool) -> Result<Self, CniError> {
        let Value::Object(obj) = conf else {
            return Err(invalid("network configuration", "must be a JSON object"));
        };
        let version = match field(obj, "cniVersion") {
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
        let runtime = match field(obj, "runtimeConfig") {
            None | Some(Value::Null) => Ok(RuntimeConfig::default()),
            Some(Value::Object(rc)) => RuntimeConfig::parse(rc),
            Some(_) => Err(invalid("runtimeConfig", "must be an object")),
        };
        let prev_result = match field(obj, "prevResult") {
            None | Some(Value::Null) => Ok(None),
            Some(prev) => CniResult::parse(prev)
                .map(Some)
                .map_err(|e| CniError::new(DECODE, format!("invalid prevResult: {}", e.msg))),
        };
        let (runtime, prev_result) = if teardown {
            (runtime.unwrap_or_default(), prev_result.unwrap_or(None))
        } else {
            (runtime?, prev_result?)
        };
        // The spec's 1.1.0 text names the key `cni.dev/attachments`; libcni sends both.
        let valid_attachments = match field(obj, "cni.dev/valid-attachments") {
            Some(list) => Some(attachments("cni.dev/valid-attachments", list)?),
            None => match field(obj, "cni.dev/attachments") {
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
        let at = "runtimeConfig";
        let mut out = Self::default();
        if let Some(list) = field(rc, "portMappings").filter(|v| !v.is_null()) {
            let at = format!("{at}.portMappings");
            for (i, m) in array(&at, list)?.iter().enumerate() {
                let at = format!("{at}[{i}]");
                let m = object(&at, m)?;
                let port = |key: &str| -> Result<u32, CniError> {
                    let value = field(m, key)
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
                    protocol: string_at(&at, m, "protocol")?
                        .unwrap_or_default()
                        .to_ascii_lowercase(),
                    host_ip: string_at(&at, m, "hostIP")?.unwrap_or_default().to_owned(),
                    ..Default::default()
                });
            }
        }
        if let Some(dns) = field(rc, "dns").filter(|v| !v.is_null()) {
            let at = format!("{at}.dns");
            let dns = object(&at, dns)?;
            let words = |key: &str| strings(&format!("{at}.{key}"), field(dns, key));
            out.dns = Some(pb::Dns {
                servers: words("servers")?,
                searches: words("searches")?,
                options: words("options")?,
                domain: string_at(&at, dns, "domain")?
                    .unwrap_or_default()
                    .to_owned(),
                ..Default::default()
            });
        }
        out.ips = strings(&format!("{at}.ips"), field(rc, "ips"))?
            .into_iter()
            .map(|ip| match ip.split_once('/') {
                Some((addr, _prefix)) => addr.to_owned(),
                None => ip,
            })
            .collect();
        out.mac = string_at(at, rc, "mac")?.unwrap_or_default().to_owned();
        if let Some(bw) = field(rc, "bandwidth").filter(|v| !v.is_null()) {
            let at = format!("{at}.bandwidth");
            let bw = object(&at, bw)?;
            let bits = |key: &str| -> Result<u64, CniError> {
                match field(bw, key) {
                    None | Some(Value::Null) => Ok(0),
                    Some(v) => v.as_u64().ok_or_else(|| {
                        invalid(
                            &format!("{at}.{key}"),
                            "must be a whole number of bits (0 = none)",
                        )
                    }),
                }
            };
            out.bandwidth = Some(Bandwidth {
                ingress_rate: bits("ingressRate")?,
                ingress_burst: bits("ingressBurst")?,
                egress_rate: bits("egressRate")?,
                egress_burst: bits("egressBurst")?,
            });
        }
        if let Some(annotations) =
            field(rc, "io.kubernetes.cri.pod-annotations").filter(|v| !v.is_null())
        {
            let at = format!("{at}.io.kubernetes.cri.pod-annotations");
            for (key, value) in object(&at, annotations)? {
                let value = value
                    .as_str()
                    .ok_or_else(|| invalid(&format!("{at}.{key}"), "must be a string"))?;
                out.annotations.insert(key.clone(), value.to_owned());
            }
        }
        // Accepted and not used: the network decides addresses, knid keeps no cgroup state.
        if let Some(ranges) = field(rc, "ipRanges").filter(|v| !v.is_null()) {
            array(&format!("{at}.ipRanges"), ranges)?;
        }
        if let Some(path) = field(rc, "cgroupPath").filter(|v| !v.is_null()) {
            path.as_str()
                .ok_or_else(|| invalid(&format!("{at}.cgroupPath"), "must be a string"))?;
        }
        Ok(out)
    }
}

fn object<'a>(at: &str, value: &'a Value) -> Result<&'a Map<String, Value>, CniError> {
    value
        .as_object()
        .ok_or_else(|| invalid(at, "must be an object"))
}

/// An optional string key of the object at `at`; any other JSON type is code 7 naming
/// `at.key`.
fn string_at<'a>(
    at: &str,
    obj: &'a Map<String, Value>,
    key: &str,
) -> Result<Option<&'a str>, CniError> {
    string(obj, key).map_err(|_| invalid(&format!("{at}.{key}"), "must be a string"))
}

/// An optional string key; any other JSON type is code 7 naming it.
fn string<'a>(obj: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, CniError> {
    match field(obj, key) {
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
            let named = |name: &str| {
                entry
                    .as_object()
                    .and_then(|entry| field(entry, name))
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .ok_or_else(|| invalid(&format!("{key}[{i}].{name}"), "must be a string"))
            };
            Ok((named("containerID")?, named("ifname")?))
        })
        .collect()
}

#[cfg(test)]
mod tests;
