//! knid's configuration (TOML), with an embedded default so `knid` runs out of the box.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ipnet::IpNet;
use serde::Deserialize;

use crate::cni::ConfList;
use crate::error::{Error, Result};
use crate::model::{Family, InterfaceKind};
use crate::validate;
pub use api::ApiSettings;
pub use knid_netops::link::{IpvlanMode, MacvlanMode};

mod api;
mod metrics;

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
/// Gateway of routed networks' pods, IPv4: link-local, answered by a static neighbour entry.
pub const ROUTED_GATEWAY_V4: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(169, 254, 1, 1));
/// Gateway of routed networks' pods, IPv6.
pub const ROUTED_GATEWAY_V6: IpAddr =
    IpAddr::V6(std::net::Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1));

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
fn default_queue_depth() -> usize {
    256
}
fn default_store_cache_bytes() -> u64 {
    4 << 20
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
fn default_mtu() -> u32 {
    1500
}
fn default_kind() -> String {
    "bridge".to_owned()
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
    /// Shard workers; 0 means the number of CPUs (at least 2).
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
    /// Networks by name.
    #[serde(default)]
    pub networks: BTreeMap<String, NetworkConfig>,
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
    /// Default MTU of interfaces (and of the bridge when knid creates it).
    #[serde(default = "default_mtu")]
    pub mtu: u32,
    /// `cni` networks: path of the CNI network configuration list (`.conflist`, or a single
    /// plugin's `.conf`) the network runs; read at start-up and on reload.
    #[serde(default)]
    pub conflist: Option<PathBuf>,
    /// `cni` networks: the configuration list itself, as JSON (instead of `conflist`).
    #[serde(default)]
    pub conflist_inline: Option<String>,
}

/// How a network connects its pods (ARCHITECTURE §9).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Driver {
    /// veth pairs (or taps) on a Linux bridge holding the gateways.
    Bridge {
        /// Bridge device.
        bridge: String,
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
    HostDevice,
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
}

impl Network {
    /// The driver's name as configured (`bridge`, `routed`, ...).
    pub fn kind(&self) -> &'static str {
        match self.driver {
            Driver::Bridge { .. } => "bridge",
            Driver::Routed => "routed",
            Driver::Macvlan { .. } => "macvlan",
            Driver::Ipvlan { .. } => "ipvlan",
            Driver::HostDevice => "host-device",
            Driver::Cni(_) => "cni",
        }
    }

    /// The bridge of a bridge network.
    pub fn bridge(&self) -> Option<&str> {
        match &self.driver {
            Driver::Bridge { bridge } => Some(bridge),
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
            Driver::HostDevice => InterfaceKind::HostDevice,
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

    /// The subnet of a family, with its gateway.
    pub fn subnet(&self, family: Family) -> Option<(IpNet, IpAddr)> {
        self.subnets
            .iter()
            .copied()
            .find(|(net, _)| Family::of(&net.addr()) == family)
    }
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

    /// Number of shard workers to run.
    pub fn worker_count(&self) -> usize {
        if self.workers > 0 {
            self.workers
        } else {
            std::thread::available_parallelism()
                .map(usize::from)
                .unwrap_or(2)
                .max(2)
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
            || !crate::validate::netns_path_allowed(&child, &self.netns_prefixes)
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
        let mut bridges = BTreeMap::new();
        let mut out = Vec::with_capacity(self.networks.len());
        for (name, net) in &self.networks {
            let network = net.parse(name)?;
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

/// A network name: 1–64 chars of `[A-Za-z0-9_.-]`.
pub fn network_name(value: &str) -> std::result::Result<(), validate::Invalid> {
    validate::name(value)
}

impl NetworkConfig {
    fn parse(&self, name: &str) -> Result<Network> {
        let field = |f: &str| format!("networks.{name}.{f}");
        let bad = |f: &str, why: String| Error::Config(format!("{}: {why}", field(f)));
        network_name(name).map_err(|e| Error::Config(format!("networks.{name}: {}", e.rule)))?;
        let driver = self.driver().map_err(|(f, why)| bad(f, why))?;
        validate::mtu(self.mtu).map_err(|e| bad("mtu", e.rule))?;
        if let Driver::Cni(_) = driver {
            // The plugins own addressing and devices.
            for (key, set) in [
                ("subnets", !self.subnets.is_empty()),
                ("gateways", !self.gateways.is_empty()),
            ] {
                if set {
                    return Err(bad(
                        key,
                        "is not used by cni networks: the plugins' IPAM owns addresses".into(),
                    ));
                }
            }
        } else if self.subnets.is_empty() && driver != Driver::HostDevice {
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
        let mut subnets: Vec<(IpNet, IpAddr)> = Vec::new();
        for (i, text) in self.subnets.iter().enumerate() {
            let net = validate::subnet(text).map_err(|e| bad(&format!("subnets[{i}]"), e.rule))?;
            let family = Family::of(&net.addr());
            if subnets.iter().any(|(n, _)| Family::of(&n.addr()) == family) {
                return Err(bad(
                    &format!("subnets[{i}]"),
                    format!("only one {} subnet per network", family.as_str()),
                ));
            }
            // Leave room for a gateway and at least two pods.
            let max_prefix = if family == Family::V4 { 29 } else { 125 };
            if net.prefix_len() > max_prefix {
                return Err(bad(
                    &format!("subnets[{i}]"),
                    format!("prefix must be /{max_prefix} or shorter"),
                ));
            }
            let gateway = match self.gateways.get(i) {
                None if routed && family == Family::V4 => ROUTED_GATEWAY_V4,
                None if routed => ROUTED_GATEWAY_V6,
                Some(gw) => {
                    let addr =
                        validate::ip(gw).map_err(|e| bad(&format!("gateways[{i}]"), e.rule))?;
                    if !crate::ipam::is_assignable(&net, addr) {
                        return Err(bad(
                            &format!("gateways[{i}]"),
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
        Ok(Network {
            name: name.to_owned(),
            driver,
            mtu: self.mtu,
            subnets,
        })
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
            ("bridge", Some(bridge), _) => Ok(Driver::Bridge { bridge }),
            ("routed", _, _) => Ok(Driver::Routed),
            ("host-device", _, _) => Ok(Driver::HostDevice),
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
mod tests {
    use super::*;

    #[test]
    fn embedded_default_has_one_dual_stack_bridge_network() {
        let config = Config::embedded_default().expect("default parses");
        let nets = config.networks().expect("valid");
        assert_eq!(nets.len(), 1);
        let net = &nets[0];
        assert_eq!(net.name, "default");
        assert_eq!(net.bridge(), Some("knid0"));
        assert_eq!(net.subnets[0].0.to_string(), "10.88.0.0/16");
        assert_eq!(net.subnets[0].1.to_string(), "10.88.0.1");
        assert_eq!(net.subnets[1].0.to_string(), "fd00:88::/64");
        assert_eq!(net.subnets[1].1.to_string(), "fd00:88::1");
        assert_eq!(config.socket, PathBuf::from(DEFAULT_SOCKET));
        assert_eq!(config.socket_mode, 0o660);
    }

    #[test]
    fn config_errors_name_the_key() {
        let cases = [
            ("[networks.n]\nbridge = \"b\"\nsubnets = [\"10.0.0.1/24\"]", "networks.n.subnets[0]"),
            ("[networks.n]\nbridge = \"b\"\nsubnets = [\"10.0.0.0/24\", \"10.1.0.0/24\"]", "networks.n.subnets[1]"),
            ("[networks.n]\nbridge = \"b/c\"\nsubnets = [\"10.0.0.0/24\"]", "networks.n.bridge"),
            ("[networks.n]\nbridge = \"b\"\nmtu = 9\nsubnets = [\"10.0.0.0/24\"]", "networks.n.mtu"),
            ("[networks.n]\nbridge = \"b\"\nsubnets = [\"10.0.0.0/24\"]\ngateways = [\"10.0.1.1\"]", "networks.n.gateways[0]"),
            ("[networks.n]\nbridge = \"b\"\nsubnets = [\"10.0.0.0/24\"]\ngateways = [\"10.0.0.255\"]", "networks.n.gateways[0]"),
            ("[networks.n]\nkind = \"vxlan\"\nbridge = \"b\"\nsubnets = [\"10.0.0.0/24\"]", "networks.n.kind"),
            ("[networks.n]\nbridge = \"b\"\nsubnets = [\"10.0.0.0/31\"]", "networks.n.subnets[0]"),
            ("[networks.a]\nbridge = \"b\"\nsubnets = [\"10.0.0.0/24\"]\n[networks.c]\nbridge = \"b\"\nsubnets = [\"10.1.0.0/24\"]", "networks.c.bridge"),
            ("bogus = 1", "bogus"),
            ("gc_interval = \"60\"", "gc_interval"),
            ("gc_interval = \"1d\"", "gc_interval"),
            ("gc_interval = \"-5s\"", "gc_interval"),
            ("gc_interval = \"99999999999999999h\"", "gc_interval"),
            ("reaper_group = 0", "reaper_group"),
            ("dan_dir = \"dans\"", "dan_dir"),
            ("netns_dir = \"/srv/netns\"", "netns_dir"),
            ("netns_dir = \"netns\"", "netns_dir"),
            ("[networks.n]\nsubnets = [\"10.0.0.0/24\"]", "networks.n.bridge"),
            ("[networks.n]\nkind = \"routed\"\nbridge = \"b\"\nsubnets = [\"10.0.0.0/24\"]", "networks.n.bridge"),
            ("[networks.n]\nkind = \"routed\"\nsubnets = [\"10.0.0.0/24\"]\ngateways = [\"10.0.0.1\"]", "networks.n.gateways"),
            ("[networks.n]\nkind = \"routed\"", "networks.n.subnets"),
            ("[networks.n]\nkind = \"macvlan\"\nsubnets = [\"10.0.0.0/24\"]", "networks.n.parent"),
            ("[networks.n]\nkind = \"macvlan\"\nparent = \"eth/1\"\nsubnets = [\"10.0.0.0/24\"]", "networks.n.parent"),
            ("[networks.n]\nkind = \"macvlan\"\nparent = \"p\"\nmode = \"l3\"\nsubnets = [\"10.0.0.0/24\"]", "networks.n.mode"),
            ("[networks.n]\nkind = \"ipvlan\"\nparent = \"p\"\nmode = \"bridge\"\nsubnets = [\"10.0.0.0/24\"]", "networks.n.mode"),
            ("[networks.n]\nkind = \"bridge\"\nbridge = \"b\"\nmode = \"l2\"\nsubnets = [\"10.0.0.0/24\"]", "networks.n.mode"),
            ("[networks.n]\nkind = \"cni\"", "networks.n.conflist"),
            ("[networks.n]\nkind = \"cni\"\nconflist = \"/nonexistent/x.conflist\"", "networks.n.conflist"),
            ("[networks.n]\nkind = \"cni\"\nconflist_inline = \"{}\"", "networks.n.conflist_inline"),
            ("[networks.n]\nkind = \"cni\"\nconflist_inline = '{\"cniVersion\":\"1.0.0\",\"name\":\"n\",\"plugins\":[{\"type\":\"a/b\"}]}'", "plugins[0].type"),
            ("[networks.n]\nkind = \"cni\"\nsubnets = [\"10.0.0.0/24\"]\nconflist_inline = '{\"cniVersion\":\"1.0.0\",\"name\":\"n\",\"type\":\"x\"}'", "networks.n.subnets"),
            ("[networks.n]\nkind = \"cni\"\nbridge = \"b\"\nconflist_inline = '{\"cniVersion\":\"1.0.0\",\"name\":\"n\",\"type\":\"x\"}'", "networks.n.bridge"),
            ("[networks.n]\nbridge = \"b\"\nsubnets = [\"10.0.0.0/24\"]\nconflist = \"/x\"", "networks.n.conflist"),
            ("cni_path = [\"relative\"]\n[networks.n]\nbridge = \"b\"\nsubnets = [\"10.0.0.0/24\"]", "cni_path"),
            ("cni_timeout = \"0s\"\n[networks.n]\nbridge = \"b\"\nsubnets = [\"10.0.0.0/24\"]", "cni_timeout"),
            ("[networks.n]\nkind = \"host-device\"\nparent = \"p\"", "networks.n.parent"),
            ("extension_health_interval = \"10\"", "extension_health_interval"),
            ("required_extensions = [\"mesh/1\"]", "required_extensions[0]"),
            ("required_extensions = [\"mesh\", \"\"]", "required_extensions[1]"),
            ("required_extensions = [\"mesh\", \"mesh\"]", "required_extensions[1]"),
        ];
        for (text, key) in cases {
            let err = Config::from_toml(text).expect_err(text).to_string();
            assert!(err.contains(key), "{err:?} does not name {key}");
        }
    }

    #[test]
    fn gc_interval_takes_units_and_zero_turns_it_off() {
        let interval = |text: &str| {
            Config::from_toml(&format!("gc_interval = \"{text}\""))
                .expect(text)
                .gc_interval()
                .expect(text)
        };
        assert_eq!(interval("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(interval("60s"), Some(Duration::from_secs(60)));
        assert_eq!(interval("5m"), Some(Duration::from_secs(300)));
        assert_eq!(interval("1h"), Some(Duration::from_secs(3600)));
        assert_eq!(interval("0s"), None);
        let default = Config::embedded_default().expect("default");
        assert_eq!(
            default.gc_interval().expect("valid"),
            Some(Duration::from_secs(60))
        );
        assert_eq!(default.reaper_group, DEFAULT_REAPER_GROUP);
    }

    #[test]
    fn extension_settings_default_to_a_10s_poll_and_nothing_required() {
        let default = Config::embedded_default().expect("default");
        assert_eq!(
            default.extension_health_interval().expect("valid"),
            Some(Duration::from_secs(10))
        );
        assert!(default.required_extensions().expect("valid").is_empty());
        let config = Config::from_toml(
            "extension_health_interval = \"0s\"\nrequired_extensions = [\"mesh\", \"policy.v2\"]",
        )
        .expect("valid");
        assert_eq!(config.extension_health_interval().expect("valid"), None);
        assert_eq!(
            config.required_extensions().expect("valid"),
            ["mesh", "policy.v2"]
        );
    }

    #[test]
    fn every_kind_parses_with_its_devices_and_defaults() {
        let config = Config::from_toml(
            r#"
[networks.br]
bridge = "b0"
subnets = ["10.0.0.0/24"]
[networks.rt]
kind = "routed"
subnets = ["10.1.0.0/24", "fd01::/64"]
[networks.mv]
kind = "macvlan"
parent = "eth1"
subnets = ["10.2.0.0/24"]
[networks.pt]
kind = "macvlan"
parent = "eth3"
mode = "passthru"
subnets = ["10.5.0.0/24"]
[networks.iv]
kind = "ipvlan"
parent = "eth2"
mode = "l3"
subnets = ["10.3.0.0/24"]
[networks.hd]
kind = "host-device"
"#,
        )
        .expect("valid");
        let nets: BTreeMap<String, Network> = config
            .networks()
            .expect("valid")
            .into_iter()
            .map(|n| (n.name.clone(), n))
            .collect();
        assert_eq!(nets["br"].bridge(), Some("b0"));
        assert_eq!(nets["br"].default_kind(), InterfaceKind::Veth);
        let rt = &nets["rt"];
        assert_eq!((rt.kind(), rt.bridge()), ("routed", None));
        assert_eq!(rt.subnets[0].1, ROUTED_GATEWAY_V4);
        assert_eq!(rt.subnets[1].1, ROUTED_GATEWAY_V6);
        assert!(rt.allows(InterfaceKind::Tap, false).is_ok());
        assert!(rt.allows(InterfaceKind::Tap, true).is_err());
        assert!(rt.allows(InterfaceKind::Macvlan, false).is_err());
        let mv = &nets["mv"];
        assert_eq!((mv.parent(), mv.mode()), (Some("eth1"), Some("bridge")));
        assert_eq!(mv.default_kind(), InterfaceKind::Macvlan);
        assert!(mv.allows(InterfaceKind::Veth, false).is_err());
        assert_eq!(nets["pt"].mode(), Some("passthru"));
        assert_eq!(
            (nets["iv"].parent(), nets["iv"].mode()),
            (Some("eth2"), Some("l3"))
        );
        let hd = &nets["hd"];
        assert!(hd.subnets.is_empty());
        assert_eq!(hd.default_kind(), InterfaceKind::HostDevice);
        assert!(nets["br"].allows(InterfaceKind::Tap, true).is_ok());
        assert!(nets["br"].allows(InterfaceKind::HostDevice, false).is_err());
    }

    #[test]
    fn explicit_gateway_is_kept() {
        let config = Config::from_toml(
            "[networks.n]\nbridge = \"b\"\nsubnets = [\"fd01::/64\", \"10.0.0.0/24\"]\ngateways = [\"fd01::fe\", \"10.0.0.254\"]",
        )
        .expect("valid");
        let net = &config.networks().expect("valid")[0];
        // IPv4 sorts first whatever the file order.
        assert_eq!(net.subnets[0].1.to_string(), "10.0.0.254");
        assert_eq!(net.subnets[1].1.to_string(), "fd01::fe");
    }
}
