//! knid's configuration (TOML), with an embedded default so `knid` runs out of the box.
//!
//! This file owns [`Config`]: its defaults and constants, parsing and the checked accessors of its
//! settings. `network` owns one network's configuration and its rules, `api` the socket's access
//! settings, `metrics` the HTTP metrics listener.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::model::validate;
pub use api::ApiSettings;
pub use cluster::{
    Backend, Cluster, ClusterConfig, Credentials, VxlanSettings, WaterMarks, SERVICE_ACCOUNT_DIR,
    VXLAN_PORT,
};
pub use knid_netops::link::{IpvlanMode, MacvlanMode};
pub use network::{
    network_name, CniNetwork, Driver, Network, NetworkConfig, ROUTED_GATEWAY_V4, ROUTED_GATEWAY_V6,
};

mod api;
mod cluster;
mod metrics;
mod network;

/// The configuration used when no file exists: one bridge network `default` on `knid0`.
pub const DEFAULT_CONFIG: &str = r#"
# knid embedded default configuration.
[networks.default]
kind = "bridge"
bridge = "knid0"
subnets = ["10.88.0.0/16", "fd00:88::/64"]
mtu = 1500
"#;

/// Default socket path.
pub const DEFAULT_SOCKET: &str = "/run/knid/knid.sock";
/// Default state directory.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/knid";
/// Default link group of retired host links ("knid" in ASCII).
pub const DEFAULT_REAPER_GROUP: u32 = 0x6b6e_6964;
/// Default directory of Kata DAN files (runtime-rs `dan_conf` default).
pub const DEFAULT_DAN_DIR: &str = "/run/kata-containers/dans";
/// Where `cni` networks' plugins are looked for, in order (upstream's and Debian's places).
pub const DEFAULT_CNI_PATH: [&str; 2] = ["/opt/cni/bin", "/usr/lib/cni"];

fn default_socket() -> PathBuf {
    PathBuf::from(DEFAULT_SOCKET)
}
fn default_state_dir() -> PathBuf {
    PathBuf::from(DEFAULT_STATE_DIR)
}
fn default_netns_prefixes() -> Vec<String> {
    ["/run/netns/", "/var/run/netns/", "/proc/"]
        .map(String::from)
        .to_vec()
}
fn default_netns_dir() -> PathBuf {
    PathBuf::from("/run/netns")
}
fn default_netns_pool() -> usize {
    4
}
/// The fewest shards `workers = 0` gives. A shard's operation spends most of its time waiting in
/// the kernel (for the RTNL lock, an RCU grace period, its store flush), so with many clients at
/// once more shards than CPUs keep more operations at the kernel: on 2 cores, 16 shards raised
/// the churn at concurrency 8 by 14–16% over 2. An idle shard costs a host netlink socket and
/// no thread or queue memory (docs/performance-history.md).
pub const MIN_DEFAULT_SHARDS: usize = 16;

fn default_queue_depth() -> usize {
    256
}
/// 2 MiB: with 5,000 sandboxes recorded, 4 MiB left knid ~0.5–0.8 MiB more resident once
/// settled (docs/performance.md#footprint), for reads that the page cache serves anyway.
fn default_store_cache_bytes() -> u64 {
    2 << 20
}
fn default_max_sandboxes() -> usize {
    10_000
}
fn default_socket_mode() -> u32 {
    0o660
}
fn default_gc_interval() -> String {
    "60s".to_owned()
}
fn default_reaper_group() -> u32 {
    DEFAULT_REAPER_GROUP
}
fn default_dan_dir() -> PathBuf {
    PathBuf::from(DEFAULT_DAN_DIR)
}
fn default_sysfs() -> PathBuf {
    PathBuf::from("/sys")
}
fn default_cni_path() -> Vec<PathBuf> {
    DEFAULT_CNI_PATH.iter().map(PathBuf::from).collect()
}
fn default_cni_timeout() -> String {
    "60s".to_owned()
}
fn default_extension_health_interval() -> String {
    "10s".to_owned()
}
/// The whole configuration file.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Unix socket path.
    #[serde(default = "default_socket")]
    pub socket: PathBuf,
    /// Socket file mode (octal in TOML: `0o660`).
    #[serde(default = "default_socket_mode")]
    pub socket_mode: u32,
    /// Group id given to the socket, if any.
    #[serde(default)]
    pub socket_gid: Option<u32>,
    /// Peer uids (SO_PEERCRED) allowed to call knid; root only by default.
    #[serde(default = "api::default_allowed_uids")]
    pub allowed_uids: Vec<u32>,
    /// Peer primary gids allowed to call knid, whatever their uid.
    #[serde(default)]
    pub allowed_gids: Vec<u32>,
    /// Connections held open at once; more are accepted and closed at once.
    #[serde(default = "api::default_max_connections")]
    pub max_connections: usize,
    /// Largest request knid reads, in bytes (at most ttrpc's 4 MiB).
    #[serde(default = "api::default_max_request_bytes")]
    pub max_request_bytes: usize,
    /// Deadline of a request that carries none, and the longest a request may carry (`"120s"`).
    #[serde(default = "api::default_request_timeout")]
    pub request_timeout: String,
    /// Where to serve Prometheus metrics over HTTP (`GET /metrics`): a port (loopback) or
    /// `ip:port`; unset means no HTTP listener (the `Metrics` RPC always serves them).
    #[serde(default)]
    pub metrics_addr: Option<String>,
    /// Directory of the store.
    #[serde(default = "default_state_dir")]
    pub state_dir: PathBuf,
    /// Shards; 0 means one per CPU, at least [`MIN_DEFAULT_SHARDS`].
    #[serde(default)]
    pub workers: usize,
    /// Bounded queue length of each shard worker.
    #[serde(default = "default_queue_depth")]
    pub queue_depth: usize,
    /// Where sandbox netns paths may live (`/proc/` allows `/proc/<pid>/ns/net`).
    #[serde(default = "default_netns_prefixes")]
    pub netns_prefixes: Vec<String>,
    /// Directory of the network namespaces knid creates (CreateNetns, KNI CreateNetwork); must
    /// lie under one of `netns_prefixes`.
    #[serde(default = "default_netns_dir")]
    pub netns_dir: PathBuf,
    /// Spare network namespaces kept ready (pinned by fd, mounted nowhere), so CreateNetns only
    /// bind-mounts one; 0 creates each on demand.
    #[serde(default = "default_netns_pool")]
    pub netns_pool: usize,
    /// sled page cache size in bytes.
    #[serde(default = "default_store_cache_bytes")]
    pub store_cache_bytes: u64,
    /// Most sandboxes knid will hold.
    #[serde(default = "default_max_sandboxes")]
    pub max_sandboxes: usize,
    /// Period of the reconciler's sweep (`"60s"`, `"500ms"`, `"5m"`); `"0s"` turns it off.
    #[serde(default = "default_gc_interval")]
    pub gc_interval: String,
    /// Link group detached host links wait in until the reaper deletes the whole group; must
    /// not be 0 (every link's default group) nor a group anything else on the node uses.
    #[serde(default = "default_reaper_group")]
    pub reaper_group: u32,
    /// Directory of the Kata DAN files written for `tap` interfaces with `dan` (Kata
    /// runtime-rs's `dan_conf`).
    #[serde(default = "default_dan_dir")]
    pub dan_dir: PathBuf,
    /// sysfs mount used to find a host device by PCI address.
    #[serde(default = "default_sysfs")]
    pub sysfs: PathBuf,
    /// Directories (absolute) searched in order for the plugins of `cni` networks (`CNI_PATH`).
    #[serde(default = "default_cni_path")]
    pub cni_path: Vec<PathBuf>,
    /// How long one CNI plugin call may run before it is killed (`"60s"`).
    #[serde(default = "default_cni_timeout")]
    pub cni_timeout: String,
    /// Period of the Health poll of every registered extension (`"10s"`); `"0s"` turns it off.
    #[serde(default = "default_extension_health_interval")]
    pub extension_health_interval: String,
    /// Extensions that must be registered and answer their calls for knid to be ready (the
    /// `ExtensionsReady` condition); re-read on SIGHUP.
    #[serde(default)]
    pub required_extensions: Vec<String>,
    /// Cluster mode: the pod CIDR from the Node object, routes to the other nodes.
    #[serde(default)]
    pub cluster: ClusterConfig,
    /// Networks by name.
    #[serde(default)]
    pub networks: BTreeMap<String, NetworkConfig>,
}

impl Config {
    /// Parses TOML and checks every network.
    pub fn from_toml(text: &str) -> Result<Self> {
        let config: Self = toml::from_str(text).map_err(|e| Error::Config(e.to_string()))?;
        config.networks()?;
        Ok(config)
    }

    /// The embedded default.
    pub fn embedded_default() -> Result<Self> {
        Self::from_toml(DEFAULT_CONFIG)
    }

    /// Number of shards to run.
    pub fn worker_count(&self) -> usize {
        if self.workers > 0 {
            self.workers
        } else {
            std::thread::available_parallelism()
                .map_or(MIN_DEFAULT_SHARDS, usize::from)
                .max(MIN_DEFAULT_SHARDS)
        }
    }

    /// The deadline of one CNI plugin call.
    pub fn cni_timeout(&self) -> Result<Duration> {
        let d = parse_duration(&self.cni_timeout)
            .map_err(|rule| Error::Config(format!("cni_timeout: {:?} {rule}", self.cni_timeout)))?;
        if d.is_zero() {
            return Err(Error::Config("cni_timeout: must be more than 0".into()));
        }
        Ok(d)
    }

    /// The reconciler period; `None` when it is turned off.
    pub fn gc_interval(&self) -> Result<Option<Duration>> {
        interval("gc_interval", &self.gc_interval)
    }

    /// The period of the extensions' Health poll; `None` when it is turned off.
    pub fn extension_health_interval(&self) -> Result<Option<Duration>> {
        interval("extension_health_interval", &self.extension_health_interval)
    }

    /// The names of `required_extensions`, each valid and listed once.
    pub fn required_extensions(&self) -> Result<Vec<String>> {
        for (i, name) in self.required_extensions.iter().enumerate() {
            validate::name(name)
                .map_err(|e| Error::Config(format!("required_extensions[{i}]: {}", e.rule)))?;
            if self.required_extensions[..i].contains(name) {
                return Err(Error::Config(format!(
                    "required_extensions[{i}]: {name} is listed twice"
                )));
            }
        }
        Ok(self.required_extensions.clone())
    }

    /// Cluster mode's settings, `None` when it is off; `NODE_NAME` read from the environment.
    pub fn cluster(&self) -> Result<Option<Cluster>> {
        self.cluster.parse(|key| std::env::var(key).ok())
    }

    /// Every network, parsed and checked (with the settings they depend on).
    pub fn networks(&self) -> Result<Vec<Network>> {
        if self.queue_depth == 0 {
            return Err(Error::Config("queue_depth must be at least 1".into()));
        }
        if self.reaper_group == 0 {
            return Err(Error::Config(
                "reaper_group must not be 0, the group every link starts in".into(),
            ));
        }
        self.gc_interval()?;
        self.cni_timeout()?;
        self.api()?;
        self.metrics_addr()?;
        self.extension_health_interval()?;
        self.required_extensions()?;
        self.cluster.check()?;
        for dir in &self.cni_path {
            if !dir.is_absolute() {
                return Err(Error::Config(format!(
                    "cni_path: {} must be absolute",
                    dir.display()
                )));
            }
        }
        for prefix in &self.netns_prefixes {
            if !prefix.starts_with('/') || !prefix.ends_with('/') {
                return Err(Error::Config(format!(
                    "netns_prefixes: {prefix:?} must be absolute and end with '/'"
                )));
            }
        }
        // What knid creates there must pass its own Attach check.
        let child = format!("{}/knid-x", self.netns_dir.display());
        if !self.netns_dir.is_absolute()
            || !crate::model::validate::netns_path_allowed(&child, &self.netns_prefixes)
        {
            return Err(Error::Config(format!(
                "netns_dir: {} must be absolute and under one of netns_prefixes ({})",
                self.netns_dir.display(),
                self.netns_prefixes.join(", ")
            )));
        }
        if !self.dan_dir.is_absolute() {
            return Err(Error::Config(format!(
                "dan_dir: {} must be absolute",
                self.dan_dir.display()
            )));
        }
        let cluster = self.cluster.enabled;
        let mut from_node: Option<&str> = None;
        let mut bridges = BTreeMap::new();
        let mut out = Vec::with_capacity(self.networks.len());
        for (name, net) in &self.networks {
            let network = net.parse(name)?;
            if network.pod_cidr_from_node {
                let key = format!("networks.{name}.pod_cidr_from_node");
                if !cluster {
                    return Err(Error::Config(format!(
                        "{key}: needs cluster mode ([cluster] enabled = true)"
                    )));
                }
                if let Some(other) = from_node.replace(name) {
                    return Err(Error::Config(format!(
                        "{key}: network {other} already takes the node's pod CIDR"
                    )));
                }
            }
            if let Some(bridge) = network.bridge() {
                if let Some(other) = bridges.insert(bridge.to_owned(), name.clone()) {
                    return Err(Error::Config(format!(
                        "networks.{name}.bridge: {bridge} is already used by network {other}"
                    )));
                }
            }
            out.push(network);
        }
        Ok(out)
    }
}

/// A period setting (`key = "60s"`): `None` when `"0s"` turns it off.
fn interval(key: &str, text: &str) -> Result<Option<Duration>> {
    let d =
        parse_duration(text).map_err(|rule| Error::Config(format!("{key}: {text:?} {rule}")))?;
    Ok(Some(d).filter(|d| !d.is_zero()))
}

/// Parses `<number><unit>` with unit `ms`, `s`, `m` or `h`.
fn parse_duration(text: &str) -> std::result::Result<Duration, &'static str> {
    const RULE: &str = "must be a whole number followed by ms, s, m or h, e.g. \"60s\"";
    let split = text.find(|c: char| !c.is_ascii_digit()).ok_or(RULE)?;
    let (number, unit) = text.split_at(split);
    let n: u64 = number.parse().map_err(|_| RULE)?;
    let ms = match unit {
        "ms" => Some(n),
        "s" => n.checked_mul(1_000),
        "m" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        _ => return Err(RULE),
    }
    .ok_or("is too long")?;
    Ok(Duration::from_millis(ms))
}

#[cfg(test)]
mod tests;
