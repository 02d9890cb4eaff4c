//! Host ports (`hostPort`, KNI and CNI `portMappings`) as elements of knid's nf_tables maps:
//! who holds which port (so a conflict is refused before anything changes), which elements a
//! sandbox's mappings become, and their removal with the sandbox's first interface.
//!
//! The mappings are recorded in the sandbox record with the attach's intent and the target
//! addresses in its first attachment record (position 0), so the elements are derived from
//! the store alone: recovery, GC and a restart find them without a record of their own.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

use knid_netops::nft::{PortMap, Protocol};
use knid_store::{AttachmentRecord, SandboxRecord, Store};

use crate::error::{Error, Result};
use crate::locks::LockExt;
use crate::model::PortMapping;

/// The host ports of every sandbox that has some, in memory, loaded from the store.
#[derive(Debug, Default)]
pub(crate) struct HostPorts {
    held: Mutex<HashMap<String, Held>>,
}

#[derive(Debug, Default, Clone)]
struct Held {
    mappings: Vec<(Protocol, Option<IpAddr>, u16)>,
    elements: Vec<PortMap>,
}

fn protocol(text: &str) -> Option<Protocol> {
    match text {
        "" | "tcp" => Some(Protocol::Tcp),
        "udp" => Some(Protocol::Udp),
        "sctp" => Some(Protocol::Sctp),
        _ => None,
    }
}

/// The map elements of `mappings` towards a pod with addresses `addrs`: one per mapping and
/// pod family, only the host address's family when the mapping names one.
pub fn elements(mappings: &[PortMapping], addrs: &[IpAddr]) -> Vec<PortMap> {
    let mut out = Vec::new();
    for m in mappings {
        let Some(protocol) = protocol(&m.protocol) else {
            continue;
        };
        for target in addrs {
            if m.host_ip.is_some_and(|h| h.is_ipv6() != target.is_ipv6()) {
                continue;
            }
            out.push(PortMap {
                protocol,
                host_ip: m.host_ip,
                host_port: m.host_port,
                target: *target,
                target_port: m.container_port,
            });
        }
    }
    out
}

/// Whether an attachment is the one a sandbox's host ports lead to: its first interface.
pub(crate) fn is_target(rec: &AttachmentRecord) -> bool {
    rec.position == 0
}

impl HostPorts {
    /// Takes the ports of `mappings` for `sandbox`, or refuses naming the sandbox that holds
    /// one of them (same protocol and port, and the same host address or either on all).
    pub(crate) fn claim(&self, sandbox: &str, mappings: &[PortMapping]) -> Result<()> {
        let mut held = self.held.acquire();
        let mut mine = Vec::with_capacity(mappings.len());
        for (i, m) in mappings.iter().enumerate() {
            let Some(p) = protocol(&m.protocol) else {
                continue;
            };
            for (holder, h) in held.iter().filter(|(id, _)| id.as_str() != sandbox) {
                let taken = h.mappings.iter().any(|(hp, hip, port)| {
                    *hp == p
                        && *port == m.host_port
                        && (hip.is_none() || m.host_ip.is_none() || *hip == m.host_ip)
                });
                if taken {
                    return Err(Error::HostPortTaken {
                        field: format!("port_mappings[{i}]"),
                        port: format!(
                            "{}/{}{}",
                            if m.protocol.is_empty() {
                                "tcp"
                            } else {
                                &m.protocol
                            },
                            m.host_port,
                            m.host_ip.map(|ip| format!(" on {ip}")).unwrap_or_default()
                        ),
                        holder: holder.clone(),
                    });
                }
            }
            mine.push((p, m.host_ip, m.host_port));
        }
        held.entry(sandbox.to_owned()).or_default().mappings = mine;
        Ok(())
    }

    /// Records the elements `sandbox`'s ports became.
    pub(crate) fn set_elements(&self, sandbox: &str, elements: Vec<PortMap>) {
        if let Some(h) = self.held.acquire().get_mut(sandbox) {
            h.elements = elements;
        }
    }

    /// The elements of `sandbox`'s ports.
    pub(crate) fn elements_of(&self, sandbox: &str) -> Vec<PortMap> {
        self.held
            .acquire()
            .get(sandbox)
            .map(|h| h.elements.clone())
            .unwrap_or_default()
    }

    /// Frees `sandbox`'s ports.
    pub(crate) fn release(&self, sandbox: &str) {
        self.held.acquire().remove(sandbox);
    }

    /// How many mappings the sandboxes hold, for the metrics.
    pub(crate) fn mapping_count(&self) -> usize {
        self.held.acquire().values().map(|h| h.mappings.len()).sum()
    }

    /// How many elements the maps hold, for the metrics.
    pub(crate) fn element_count(&self) -> usize {
        self.held.acquire().values().map(|h| h.elements.len()).sum()
    }

    /// Every element, for rebuilding the table.
    pub(crate) fn all_elements(&self) -> Vec<PortMap> {
        let mut all: Vec<PortMap> = self
            .held
            .acquire()
            .values()
            .flat_map(|h| h.elements.iter().copied())
            .collect();
        all.sort();
        all
    }

    /// Loads what the store records: every sandbox with mappings, and the elements towards its
    /// first attachment.
    pub(crate) fn load(&self, store: &Store) -> Result<()> {
        self.load_from(store, &store.sandboxes()?.decoded)
    }

    /// [`HostPorts::load`] with the sandbox records already read: every one that decodes.
    pub(crate) fn load_from<'r>(
        &self,
        store: &Store,
        sandboxes: impl IntoIterator<Item = &'r SandboxRecord>,
    ) -> Result<()> {
        let mut held = HashMap::new();
        for rec in sandboxes {
            if rec.port_mappings.is_empty() {
                continue;
            }
            let mappings: Vec<PortMapping> = rec
                .port_mappings
                .iter()
                .map(|p| PortMapping {
                    host_port: u16::try_from(p.host_port).unwrap_or_default(),
                    container_port: u16::try_from(p.container_port).unwrap_or_default(),
                    protocol: p.protocol.clone(),
                    host_ip: p.host_ip.parse().ok(),
                })
                .collect();
            // A Reaping attachment's elements were removed when it was retired.
            let target = store
                .attachments(&rec.id)?
                .decoded
                .into_iter()
                .find(is_target)
                .filter(|t| {
                    crate::lifecycle::state_of(t)
                        .is_ok_and(|s| s != crate::model::AttachmentState::Reaping)
                });
            if target.is_none() {
                continue;
            }
            let addrs = target
                .map(|t| crate::records::addresses(&t))
                .transpose()?
                .unwrap_or_default();
            let entry = Held {
                mappings: mappings
                    .iter()
                    .filter_map(|m| Some((protocol(&m.protocol)?, m.host_ip, m.host_port)))
                    .collect(),
                elements: elements(&mappings, &addrs),
            };
            held.insert(rec.id.clone(), entry);
        }
        *self.held.acquire() = held;
        Ok(())
    }
}
