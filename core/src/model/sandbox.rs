//! A sandbox: the Attach request that creates it, its record with every interface, and what
//! `List` shows of it.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;

use super::validate::Invalid;
use super::{InterfaceResult, InterfaceSpec, SandboxId};
use crate::error::Error;
use crate::lifecycle::AttachmentState;

/// The pod a sandbox belongs to (informational; keys are always sandbox ids).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodRef {
    /// Pod name.
    pub name: String,
    /// Pod namespace.
    pub namespace: String,
    /// Pod UID.
    pub uid: String,
}

/// DNS settings handed back to the caller for the pod's resolv.conf.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dns {
    /// Name servers.
    pub servers: Vec<IpAddr>,
    /// Search domains.
    pub searches: Vec<String>,
    /// resolv.conf options.
    pub options: Vec<String>,
    /// Local domain.
    pub domain: String,
}

/// A requested host port mapping (recorded; enforced by a later driver).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortMapping {
    /// Port on the host.
    pub host_port: u16,
    /// Port in the pod.
    pub container_port: u16,
    /// `tcp`, `udp` or `sctp`.
    pub protocol: String,
    /// Host address to bind, if any.
    pub host_ip: Option<IpAddr>,
}

/// A validated Attach request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachRequest {
    /// Sandbox id.
    pub sandbox_id: SandboxId,
    /// Pod identity.
    pub pod: PodRef,
    /// Path of the sandbox's network namespace.
    pub netns_path: PathBuf,
    /// Interfaces to create, all or nothing.
    pub interfaces: Vec<InterfaceSpec>,
    /// DNS settings.
    pub dns: Dns,
    /// Port mappings.
    pub port_mappings: Vec<PortMapping>,
    /// Caller labels.
    pub labels: BTreeMap<String, String>,
    /// Caller annotations.
    pub annotations: BTreeMap<String, String>,
}

/// A sandbox and everything attached to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandbox {
    /// Sandbox id.
    pub id: SandboxId,
    /// Network namespace path.
    pub netns_path: PathBuf,
    /// Inode of the netns when attached (detects a recycled path).
    pub netns_inode: u64,
    /// Device of the nsfs the netns lives on.
    pub netns_dev: u64,
    /// Bumps on every change.
    pub generation: u64,
    /// Pod identity.
    pub pod: PodRef,
    /// Interfaces in request order.
    pub interfaces: Vec<InterfaceResult>,
    /// DNS settings.
    pub dns: Dns,
    /// Port mappings.
    pub port_mappings: Vec<PortMapping>,
    /// Caller labels.
    pub labels: BTreeMap<String, String>,
    /// Caller annotations.
    pub annotations: BTreeMap<String, String>,
    /// Creation time, ms since the Unix epoch.
    pub created_at_ms: i64,
    /// Last change, ms since the Unix epoch.
    pub updated_at_ms: i64,
}

/// Refuses two mappings of one request that take the same host port (the same protocol and
/// port, and the same host address or either on all addresses), an exact repeat included:
/// their elements would collide in knid's maps. Names the later one and the one it repeats.
pub fn distinct_host_ports(list: &[PortMapping]) -> Result<(), Error> {
    for (i, m) in list.iter().enumerate() {
        let taken = list[..i].iter().position(|e| {
            e.protocol == m.protocol
                && e.host_port == m.host_port
                && (e.host_ip.is_none() || m.host_ip.is_none() || e.host_ip == m.host_ip)
        });
        if let Some(j) = taken {
            return Err(Invalid::new(format!(
                "takes host port {}/{}, which port_mappings[{j}] takes",
                m.protocol, m.host_port
            ))
            .at(format!("port_mappings[{i}]")));
        }
    }
    Ok(())
}

impl Sandbox {
    /// The sandbox's overall state: `Attached` when every interface is, else the first other state.
    pub fn state(&self) -> AttachmentState {
        self.interfaces
            .iter()
            .map(|i| i.state)
            .find(|s| *s != AttachmentState::Attached)
            .unwrap_or(AttachmentState::Attached)
    }
}

/// Filters for `List`; empty fields match everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListFilter {
    /// Only sandboxes with an interface on this network.
    pub network: Option<String>,
    /// Only sandboxes in this state.
    pub state: Option<AttachmentState>,
    /// Only sandboxes carrying every one of these labels.
    pub labels: BTreeMap<String, String>,
}

/// One line of `List`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSummary {
    /// Sandbox id, as its records are keyed (the key of a corrupt record need not be a valid id).
    pub id: String,
    /// Pod identity.
    pub pod: PodRef,
    /// Network namespace path.
    pub netns_path: PathBuf,
    /// Overall state; `None` when a record of the sandbox is corrupt (see `error`).
    pub state: Option<AttachmentState>,
    /// Names of its interfaces.
    pub interfaces: Vec<String>,
    /// Its addresses (without prefix).
    pub ips: Vec<IpAddr>,
    /// Networks it is attached to.
    pub networks: Vec<String>,
    /// Creation time, ms since the Unix epoch.
    pub created_at_ms: i64,
    /// Why a record of the sandbox cannot be used (each corrupt record's error, `; `-separated);
    /// `None` for a sandbox whose records are all sound. Detach or GC removes such a record.
    pub error: Option<String>,
}
