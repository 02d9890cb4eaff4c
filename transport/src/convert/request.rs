//! Protobuf requests → validated core requests. Every field is checked here, by the rules of
//! docs/security.md#validation-rules;
//! the core then checks what needs the node (netns prefixes and nsfs, network names, ranges).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;
use std::path::PathBuf;

use knid_core::config::network_name;
use knid_core::validate::{self, Invalid};
use knid_core::{
    AttachRequest, AttachmentState, Bandwidth, DeviceRef, Dns, Error, Family, GcKeep, GcRequest,
    IfName, InterfaceKind, InterfaceSpec, ListFilter, MacAddr, PodRef, PortMapping, SandboxId,
    TapSpec, MAX_QUEUE_PAIRS,
};

use crate::pb;

/// Interface name used when the request has a single interface without a name.
pub const DEFAULT_IFNAME: &str = "eth0";
/// Network used when an interface names none.
pub const DEFAULT_NETWORK: &str = "default";
/// Port mapping protocol used when none is given.
pub const DEFAULT_PROTOCOL: &str = "tcp";

/// Most entries in each valid list of a GarbageCollect request: far above a node's pod count,
/// yet a bound on what one request can make the daemon hold.
pub const MAX_GC_VALID_ENTRIES: usize = 65_536;

/// Every state a sandbox can be filtered on.
const STATES: [AttachmentState; 6] = [
    AttachmentState::Pending,
    AttachmentState::Provisioning,
    AttachmentState::Attached,
    AttachmentState::Detaching,
    AttachmentState::Reaping,
    AttachmentState::RollingBack,
];

/// Validates an Attach request and converts it; the error names the first bad field.
pub fn attach_request(req: &pb::AttachRequest) -> Result<AttachRequest, Error> {
    Ok(AttachRequest {
        sandbox_id: sandbox_id(&req.sandbox_id)?,
        pod: pod(req.pod.get_or_default())?,
        netns_path: netns_path(&req.netns_path)?,
        interfaces: interfaces(&req.interfaces)?,
        dns: dns(req.dns.get_or_default())?,
        port_mappings: port_mappings(&req.port_mappings)?,
        labels: string_map(&req.labels, "labels")?,
        annotations: string_map(&req.annotations, "annotations")?,
    })
}

/// Validates a Detach request: the sandbox id and the interface (`None` = all of them).
pub fn detach_request(req: &pb::DetachRequest) -> Result<(SandboxId, Option<IfName>), Error> {
    Ok((sandbox_id(&req.sandbox_id)?, optional_ifname(&req.ifname)?))
}

/// A validated Check request: the sandbox, the interface when one is given, and the MAC the
/// caller expects on it instead of the recorded one.
pub type CheckTarget = (SandboxId, Option<IfName>, Option<MacAddr>);

/// Validates a Check request: the sandbox id, the interface name when one is given, and the
/// expected MAC, which needs an interface.
pub fn check_request(req: &pb::CheckRequest) -> Result<CheckTarget, Error> {
    let id = sandbox_id(&req.sandbox_id)?;
    let ifname = optional_ifname(&req.ifname)?;
    let mac = optional(&req.expected_mac, MacAddr::parse).map_err(|e| e.at("expected_mac"))?;
    if mac.is_some() && ifname.is_none() {
        return Err(
            Invalid::new("needs ifname: a MAC is expected of one interface").at("expected_mac"),
        );
    }
    Ok((id, ifname, mac))
}

fn optional_ifname(value: &str) -> Result<Option<IfName>, Error> {
    if value.is_empty() {
        return Ok(None);
    }
    Ok(Some(IfName::parse(value).map_err(|e| e.at("ifname"))?))
}

/// Validates an Inspect request.
pub fn inspect_request(req: &pb::InspectRequest) -> Result<SandboxId, Error> {
    sandbox_id(&req.sandbox_id)
}

/// Validates a List request; empty fields match everything.
pub fn list_request(req: &pb::ListRequest) -> Result<ListFilter, Error> {
    let network = if req.network.is_empty() {
        None
    } else {
        network_name(&req.network).map_err(|e| e.at("network"))?;
        Some(req.network.clone())
    };
    let state = if req.state.is_empty() {
        None
    } else {
        Some(state(&req.state).map_err(|e| e.at("state"))?)
    };
    Ok(ListFilter {
        network,
        state,
        labels: string_map(&req.labels, "labels")?,
    })
}

/// Validates a GarbageCollect request. `sweep_only` gives a request without a valid list (only
/// the sweep runs); otherwise the lists, even both empty, say which attachments stay.
pub fn garbage_collect_request(req: &pb::GarbageCollectRequest) -> Result<GcRequest, Error> {
    if req.sweep_only
        && !(req.valid_sandbox_ids.is_empty()
            && req.valid_attachments.is_empty()
            && req.network.is_empty())
    {
        return Err(Invalid::new(
            "must not be set together with valid_sandbox_ids, valid_attachments or network",
        )
        .at("sweep_only"));
    }
    validate::count(req.valid_sandbox_ids.len(), MAX_GC_VALID_ENTRIES)
        .map_err(|e| e.at("valid_sandbox_ids"))?;
    validate::count(req.valid_attachments.len(), MAX_GC_VALID_ENTRIES)
        .map_err(|e| e.at("valid_attachments"))?;
    let no_list = req.valid_sandbox_ids.is_empty() && req.valid_attachments.is_empty();
    if no_list && !req.network.is_empty() && !req.allow_detach_all {
        return Err(Invalid::new(
            "without valid_sandbox_ids or valid_attachments every attachment of the network \
             would be detached: give the lists, or set allow_detach_all to mean it",
        )
        .at("network"));
    }
    // An empty request is a sweep: "nothing is valid" is never what a zero value means.
    let keep = if req.sweep_only || (no_list && req.network.is_empty() && !req.allow_detach_all) {
        None
    } else {
        let sandboxes = req
            .valid_sandbox_ids
            .iter()
            .enumerate()
            .map(|(i, id)| {
                SandboxId::parse(id).map_err(|e| e.at(format!("valid_sandbox_ids[{i}]")))
            })
            .collect::<Result<BTreeSet<_>, _>>()?;
        let attachments = req
            .valid_attachments
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let field = |name: &str| format!("valid_attachments[{i}].{name}");
                Ok((
                    SandboxId::parse(&a.sandbox_id).map_err(|e| e.at(field("sandbox_id")))?,
                    IfName::parse(&a.ifname).map_err(|e| e.at(field("ifname")))?,
                ))
            })
            .collect::<Result<BTreeSet<_>, Error>>()?;
        let network = match req.network.as_str() {
            "" => None,
            name => {
                network_name(name).map_err(|e| e.at("network"))?;
                Some(name.to_owned())
            }
        };
        Some(GcKeep {
            sandboxes,
            attachments,
            network,
            allow_detach_all: req.allow_detach_all,
        })
    };
    Ok(GcRequest {
        keep,
        dry_run: req.dry_run,
    })
}

pub(crate) fn sandbox_id(value: &str) -> Result<SandboxId, Error> {
    SandboxId::parse(value).map_err(|e| e.at("sandbox_id"))
}

pub(crate) fn pod(pod: &pb::PodRef) -> Result<PodRef, Error> {
    validate::text(&pod.name).map_err(|e| e.at("pod.name"))?;
    validate::text(&pod.namespace).map_err(|e| e.at("pod.namespace"))?;
    validate::text(&pod.uid).map_err(|e| e.at("pod.uid"))?;
    Ok(PodRef {
        name: pod.name.clone(),
        namespace: pod.namespace.clone(),
        uid: pod.uid.clone(),
    })
}

pub(crate) fn netns_path(value: &str) -> Result<PathBuf, Error> {
    validate::netns_path(value).map_err(|e| e.at("netns_path"))?;
    Ok(PathBuf::from(value))
}

fn interfaces(list: &[pb::InterfaceRequest]) -> Result<Vec<InterfaceSpec>, Error> {
    if list.is_empty() {
        return Err(Invalid::new("must have at least one entry").at("interfaces"));
    }
    validate::count(list.len(), validate::MAX_INTERFACES).map_err(|e| e.at("interfaces"))?;
    let mut specs: Vec<InterfaceSpec> = Vec::with_capacity(list.len());
    for (i, req) in list.iter().enumerate() {
        let spec = interface(req, &format!("interfaces[{i}]"), list.len())?;
        if let Some(first) = specs.iter().position(|s| s.name == spec.name) {
            return Err(Invalid::new(format!("duplicates interfaces[{first}].name"))
                .at(format!("interfaces[{i}].name")));
        }
        specs.push(spec);
    }
    Ok(specs)
}

/// One interface; `at` is its path (`interfaces[2]`), `total` the number requested.
fn interface(req: &pb::InterfaceRequest, at: &str, total: usize) -> Result<InterfaceSpec, Error> {
    let field = |name: &str| format!("{at}.{name}");
    let name = match req.name.as_str() {
        "" if total == 1 => IfName::parse(DEFAULT_IFNAME),
        "" => Err(Invalid::new(
            "must not be empty when more than one interface is requested",
        )),
        name => IfName::parse(name),
    }
    .map_err(|e| e.at(field("name")))?;
    let network = if req.network.is_empty() {
        DEFAULT_NETWORK.to_owned()
    } else {
        network_name(&req.network).map_err(|e| e.at(field("network")))?;
        req.network.clone()
    };
    let kind = optional(&req.kind, InterfaceKind::parse).map_err(|e| e.at(field("kind")))?;
    let mac = optional(&req.mac, MacAddr::parse).map_err(|e| e.at(field("mac")))?;
    let mtu = match req.mtu {
        0 => None,
        mtu => {
            validate::mtu(mtu).map_err(|e| e.at(field("mtu")))?;
            Some(mtu)
        }
    };
    let static_ips = static_ips(&req.static_ips, &field("static_ips"))?;
    // An empty message is "not set", like an empty string field.
    let tap = req
        .tap
        .as_ref()
        .filter(|t| **t != pb::TapRequest::new())
        .map(|t| tap(t, &field("tap")))
        .transpose()?;
    let device = req
        .device
        .as_ref()
        .filter(|d| **d != pb::DeviceRequest::new())
        .map(|d| device(d, &field("device")))
        .transpose()?;
    let bandwidth = match req.bandwidth.as_ref() {
        Some(b) => bandwidth(b, &field("bandwidth"))?,
        None => None,
    };
    Ok(InterfaceSpec {
        name,
        network,
        kind,
        mac,
        mtu,
        static_ips,
        tap,
        device,
        bandwidth,
    })
}

/// Limits from the API's bits; all zero is none.
pub(crate) fn bandwidth(b: &pb::Bandwidth, at: &str) -> Result<Option<Bandwidth>, Error> {
    Bandwidth::from_bits(
        b.ingress_rate,
        b.ingress_burst,
        b.egress_rate,
        b.egress_burst,
    )
    .map_err(|(field, e)| e.at(format!("{at}.{field}")))
}

fn tap(t: &pb::TapRequest, at: &str) -> Result<TapSpec, Error> {
    let queue_pairs = match t.queue_pairs {
        0 => 1,
        n if n > MAX_QUEUE_PAIRS => {
            return Err(Invalid::new(format!("must be 1-{MAX_QUEUE_PAIRS}"))
                .at(format!("{at}.queue_pairs")))
        }
        n => n,
    };
    Ok(TapSpec {
        queue_pairs,
        owner_uid: t.owner_uid,
        owner_gid: t.owner_gid,
        dan: t.dan,
    })
}

fn device(d: &pb::DeviceRequest, at: &str) -> Result<DeviceRef, Error> {
    match (d.name.as_str(), d.pci_address.as_str()) {
        ("", "") => Err(Invalid::new("must name the device: name or pci_address").at(at)),
        (name, "") => IfName::parse(name)
            .map(DeviceRef::Name)
            .map_err(|e| e.at(format!("{at}.name"))),
        ("", pci) => validate::pci_address(pci)
            .map(|()| DeviceRef::Pci(pci.to_owned()))
            .map_err(|e| e.at(format!("{at}.pci_address"))),
        _ => Err(Invalid::new("must set only one of name and pci_address").at(at)),
    }
}

/// Plain addresses, at most one per family.
fn static_ips(values: &[String], at: &str) -> Result<Vec<IpAddr>, Error> {
    let mut ips: Vec<IpAddr> = Vec::with_capacity(values.len());
    for (j, value) in values.iter().enumerate() {
        let field = format!("{at}[{j}]");
        let ip = validate::ip(value).map_err(|e| e.at(&field))?;
        let family = Family::of(&ip);
        if let Some(k) = ips.iter().position(|other| Family::of(other) == family) {
            return Err(Invalid::new(format!(
                "must not be a second {} address (static_ips[{k}] is one; at most one per family)",
                family.as_str()
            ))
            .at(field));
        }
        ips.push(ip);
    }
    Ok(ips)
}

fn dns(dns: &pb::Dns) -> Result<Dns, Error> {
    validate::count(dns.servers.len(), validate::MAX_DNS_ENTRIES)
        .map_err(|e| e.at("dns.servers"))?;
    let servers = dns
        .servers
        .iter()
        .enumerate()
        .map(|(k, s)| validate::ip(s).map_err(|e| e.at(format!("dns.servers[{k}]"))))
        .collect::<Result<Vec<_>, _>>()?;
    dns_words(&dns.searches, "dns.searches")?;
    dns_words(&dns.options, "dns.options")?;
    if !dns.domain.is_empty() {
        dns_word(&dns.domain).map_err(|e| e.at("dns.domain"))?;
    }
    Ok(Dns {
        servers,
        searches: dns.searches.clone(),
        options: dns.options.clone(),
        domain: dns.domain.clone(),
    })
}

fn dns_words(values: &[String], at: &str) -> Result<(), Error> {
    validate::count(values.len(), validate::MAX_DNS_ENTRIES).map_err(|e| e.at(at))?;
    for (k, value) in values.iter().enumerate() {
        dns_word(value).map_err(|e| e.at(format!("{at}[{k}]")))?;
    }
    Ok(())
}

/// A resolv.conf token: bounded, non-empty, no whitespace (it would split into two entries).
fn dns_word(value: &str) -> Result<(), Invalid> {
    validate::text(value)?;
    if value.is_empty() {
        return Err(Invalid::new("must not be empty"));
    }
    if value.chars().any(char::is_whitespace) {
        return Err(Invalid::new("must not contain whitespace"));
    }
    Ok(())
}

fn port_mappings(list: &[pb::PortMapping]) -> Result<Vec<PortMapping>, Error> {
    validate::count(list.len(), validate::MAX_PORT_MAPPINGS).map_err(|e| e.at("port_mappings"))?;
    let mappings = list
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let field = |name: &str| format!("port_mappings[{i}].{name}");
            let protocol = match m.protocol.as_str() {
                "" => DEFAULT_PROTOCOL,
                p @ ("tcp" | "udp" | "sctp") => p,
                _ => {
                    return Err(Invalid::new("must be one of tcp, udp, sctp").at(field("protocol")))
                }
            };
            Ok(PortMapping {
                host_port: port(m.host_port).map_err(|e| e.at(field("host_port")))?,
                container_port: port(m.container_port)
                    .map_err(|e| e.at(field("container_port")))?,
                protocol: protocol.to_owned(),
                host_ip: optional(&m.host_ip, validate::ip).map_err(|e| e.at(field("host_ip")))?,
            })
        })
        .collect::<Result<Vec<_>, Error>>()?;
    knid_core::distinct_host_ports(&mappings)?;
    Ok(mappings)
}

fn port(value: u32) -> Result<u16, Invalid> {
    u16::try_from(value)
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| Invalid::new("must be between 1 and 65535"))
}

/// Labels or annotations; a bad entry is named by its key: `labels["app"]`.
pub(crate) fn string_map(
    map: &HashMap<String, String>,
    at: &str,
) -> Result<BTreeMap<String, String>, Error> {
    // Counted first so that every error `validate::labels` returns names a key.
    validate::count(map.len(), validate::MAX_LABELS).map_err(|e| e.at(at))?;
    let map: BTreeMap<String, String> = map.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    validate::labels(&map).map_err(|(key, e)| e.at(format!("{at}[{key:?}]")))?;
    Ok(map)
}

fn state(value: &str) -> Result<AttachmentState, Invalid> {
    STATES
        .into_iter()
        .find(|s| s.as_str() == value)
        .ok_or_else(|| {
            let names: Vec<&str> = STATES.iter().map(|s| s.as_str()).collect();
            Invalid::new(format!("must be one of {}", names.join(", ")))
        })
}

/// `parse` of a non-empty value; empty means "not set".
fn optional<T>(
    value: &str,
    parse: impl Fn(&str) -> Result<T, Invalid>,
) -> Result<Option<T>, Invalid> {
    if value.is_empty() {
        Ok(None)
    } else {
        parse(value).map(Some)
    }
}

#[cfg(test)]
mod tests;
