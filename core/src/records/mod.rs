//! Mapping between the store's records and the domain model. A record that does not map back is
//! reported as corrupt with its key, never silently skipped ([`corrupt`] reads those apart from
//! the others). Anything [`attachment_to_record`] encodes maps back: it refuses what would not
//! be read.

use std::net::IpAddr;
use std::path::PathBuf;

use ipnet::IpNet;
use knid_store::{
    AttachmentRecord, BandwidthRecord, DeviceRecord, DnsRecord, InterfaceSpecRecord, IpRecord,
    NeighborRecord, PodRecord, PortMappingRecord, RouteRecord, SandboxRecord, TapRecord,
};
use protobuf::{EnumOrUnknown, MessageField};

use crate::error::{Error, Result};
use crate::lifecycle::state_from_record;
use crate::lifecycle::{attachment_key, state_to_record};
use crate::model::{
    Bandwidth, DeviceInfo, DeviceRef, Dns, IfName, InterfaceKind, InterfaceResult, InterfaceSpec,
    IpConfig, MacAddr, Neighbor, PodRef, PortMapping, RouteInfo, RouteScope, Sandbox, SandboxId,
    TapInfo,
};

pub(crate) mod corrupt;
pub mod fuzz;

fn corrupt(key: &str, detail: impl Into<String>) -> Error {
    Error::Corrupt {
        key: key.to_owned(),
        detail: detail.into(),
    }
}

fn opt_ip(text: &str) -> Option<IpAddr> {
    if text.is_empty() {
        None
    } else {
        text.parse().ok()
    }
}

/// Record of a requested interface, kept to compare a repeated Attach.
pub fn spec_to_record(spec: &InterfaceSpec) -> InterfaceSpecRecord {
    InterfaceSpecRecord {
        network: spec.network.clone(),
        kind: spec.kind.map(|k| k.as_str().to_owned()).unwrap_or_default(),
        mac: spec.mac.map(|m| m.to_string()).unwrap_or_default(),
        mtu: spec.mtu.unwrap_or(0),
        static_ips: spec.static_ips.iter().map(ToString::to_string).collect(),
        queue_pairs: spec.tap.as_ref().map_or(0, |t| t.queue_pairs),
        owner_uid: spec.tap.as_ref().and_then(|t| t.owner_uid),
        owner_gid: spec.tap.as_ref().and_then(|t| t.owner_gid),
        dan: spec.is_dan(),
        device_name: match &spec.device {
            Some(DeviceRef::Name(name)) => name.to_string(),
            _ => String::new(),
        },
        device_pci: match &spec.device {
            Some(DeviceRef::Pci(pci)) => pci.clone(),
            _ => String::new(),
        },
        bandwidth: spec.bandwidth.as_ref().map(bandwidth_to_record).into(),
        ..Default::default()
    }
}

fn bandwidth_to_record(b: &Bandwidth) -> BandwidthRecord {
    BandwidthRecord {
        ingress_rate: b.ingress.map_or(0, |l| l.rate),
        ingress_burst: b.ingress.map_or(0, |l| l.burst),
        egress_rate: b.egress.map_or(0, |l| l.rate),
        egress_burst: b.egress.map_or(0, |l| l.burst),
        ..Default::default()
    }
}

/// The limits of a record; one that does not map back (a rate below the floor, a burst with no
/// rate) is corrupt: what is wrong, for the caller to name the record.
fn bandwidth_from_record(b: &BandwidthRecord) -> std::result::Result<Option<Bandwidth>, String> {
    // Every recorded limit has its burst: 0 never stands for the default here.
    let missing_burst = (b.ingress_rate != 0 && b.ingress_burst == 0)
        || (b.egress_rate != 0 && b.egress_burst == 0);
    if missing_burst {
        return Err("invalid bandwidth: a rate without a burst".to_owned());
    }
    Bandwidth::from_bits(
        b.ingress_rate,
        b.ingress_burst,
        b.egress_rate,
        b.egress_burst,
    )
    .map_err(|(field, e)| format!("invalid bandwidth: {field} {}", e.rule))
}

/// The first field where a recorded spec differs from a new request, if any.
pub fn spec_difference(
    recorded: &InterfaceSpecRecord,
    spec: &InterfaceSpec,
) -> Option<&'static str> {
    let wanted = spec_to_record(spec);
    if recorded.network != wanted.network {
        Some("network")
    } else if recorded.kind != wanted.kind {
        Some("kind")
    } else if recorded.mac != wanted.mac {
        Some("mac")
    } else if recorded.mtu != wanted.mtu {
        Some("mtu")
    } else if recorded.static_ips != wanted.static_ips {
        Some("static_ips")
    } else if (
        recorded.queue_pairs,
        recorded.owner_uid,
        recorded.owner_gid,
        recorded.dan,
    ) != (
        wanted.queue_pairs,
        wanted.owner_uid,
        wanted.owner_gid,
        wanted.dan,
    ) {
        Some("tap")
    } else if (&recorded.device_name, &recorded.device_pci)
        != (&wanted.device_name, &wanted.device_pci)
    {
        Some("device")
    } else if recorded.bandwidth != wanted.bandwidth {
        Some("bandwidth")
    } else {
        None
    }
}

/// Record of an interface result, refused ([`Error::FailedPrecondition`], naming the field) when
/// it would not map back: the values it checks here came from the kernel, a plugin or knid's own
/// plan, the caller's having been validated at the API.
pub fn attachment_to_record(
    sandbox_id: &SandboxId,
    iface: &InterfaceResult,
    spec: &InterfaceSpec,
    position: u32,
    now_ms: i64,
) -> Result<AttachmentRecord> {
    // Only a cni interface may not know its MAC yet; an all-zero one is otherwise what a device
    // without an Ethernet address reports.
    if iface.kind != InterfaceKind::Cni && iface.mac == MacAddr::UNKNOWN {
        return Err(Error::FailedPrecondition(format!(
            "sandbox {sandbox_id} interface {}: mac: the {} interface has no Ethernet address \
             (all zeros); not recorded",
            iface.name,
            iface.kind.as_str()
        )));
    }
    let rec = AttachmentRecord {
        sandbox_id: sandbox_id.as_str().to_owned(),
        ifname: iface.name.as_str().to_owned(),
        network: iface.network.clone(),
        kind: iface.kind.as_str().to_owned(),
        state: EnumOrUnknown::new(state_to_record(iface.state)),
        mac: if iface.mac == MacAddr::UNKNOWN {
            String::new()
        } else {
            iface.mac.to_string()
        },
        mtu: iface.mtu,
        host_ifname: iface.host_ifname.clone(),
        ips: iface
            .ips
            .iter()
            .map(|ip| IpRecord {
                address: ip.address.to_string(),
                gateway: ip.gateway.map(|g| g.to_string()).unwrap_or_default(),
                ..Default::default()
            })
            .collect(),
        routes: iface
            .routes
            .iter()
            .map(|r| RouteRecord {
                dst: r.dst.to_string(),
                gateway: r.gateway.map(|g| g.to_string()).unwrap_or_default(),
                mtu: r.mtu.unwrap_or(0),
                scope: r.scope.as_str().to_owned(),
                table: r.table,
                metric: r.metric.unwrap_or(0),
                ..Default::default()
            })
            .collect(),
        spec: MessageField::some(spec_to_record(spec)),
        tap: iface.tap.as_ref().map(tap_to_record).into(),
        device: iface
            .device
            .as_ref()
            .map(|d| DeviceRecord {
                pci_address: d.pci_address.clone().unwrap_or_default(),
                original_name: d.original_name.clone(),
                original_mtu: d.original_mtu,
                was_up: d.was_up,
                ..Default::default()
            })
            .into(),
        dan_path: path_text(iface.dan_path.as_deref()),
        neighbors: iface
            .neighbors
            .iter()
            .map(|n| NeighborRecord {
                ip: n.ip.to_string(),
                mac: n.mac.to_string(),
                ..Default::default()
            })
            .collect(),
        parent: iface.parent.clone().unwrap_or_default(),
        mode: iface.mode.clone().unwrap_or_default(),
        bandwidth: iface.bandwidth.as_ref().map(bandwidth_to_record).into(),
        position,
        created_at_ms: now_ms,
        updated_at_ms: now_ms,
        ..Default::default()
    };
    check_encodable(&rec)?;
    Ok(rec)
}

/// Refuses ([`Error::FailedPrecondition`]) an attachment record that would not map back, before
/// it is written: the decoder and the encoder agree on what a record may hold.
pub(crate) fn check_encodable(rec: &AttachmentRecord) -> Result<()> {
    match attachment_from_record(rec) {
        Ok(_) => Ok(()),
        Err(Error::Corrupt { detail, .. }) => Err(Error::FailedPrecondition(format!(
            "sandbox {} interface {}: {detail}; not recorded",
            rec.sandbox_id, rec.ifname
        ))),
        Err(other) => Err(other),
    }
}

/// Domain form of an attachment record.
pub fn attachment_from_record(rec: &AttachmentRecord) -> Result<InterfaceResult> {
    // The key is spelled only for an error: start-up converts every record, most more than once.
    let at = |detail: String| corrupt(&attachment_key(rec), detail);
    let bad = |what: &str| at(format!("invalid {what}"));
    let ips = rec
        .ips
        .iter()
        .map(|ip| {
            Ok(IpConfig {
                address: ip
                    .address
                    .parse::<IpNet>()
                    .map_err(|_| at(format!("invalid address {:?}", ip.address)))?,
                gateway: opt_ip(&ip.gateway),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let routes = rec
        .routes
        .iter()
        .map(|r| {
            Ok(RouteInfo {
                dst: r.dst.parse::<IpNet>().map_err(|_| bad("route"))?,
                gateway: opt_ip(&r.gateway),
                mtu: (r.mtu != 0).then_some(r.mtu),
                scope: RouteScope::parse(&r.scope).ok_or_else(|| bad("route scope"))?,
                table: r.table,
                metric: (r.metric != 0).then_some(r.metric),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let kind = InterfaceKind::parse(&rec.kind)
        .map_err(|e| at(format!("invalid kind {:?}: {}", rec.kind, e.rule)))?;
    Ok(InterfaceResult {
        name: IfName::parse(&rec.ifname)
            .map_err(|e| at(format!("invalid ifname {:?}: {}", rec.ifname, e.rule)))?,
        network: rec.network.clone(),
        kind,
        state: state_from_record(rec)?,
        // Only a cni interface may not know its MAC (before ADD, or when no plugin says).
        mac: if rec.mac.is_empty() && kind == InterfaceKind::Cni {
            MacAddr::UNKNOWN
        } else {
            MacAddr::parse(&rec.mac)
                .map_err(|e| at(format!("invalid mac {:?}: {}", rec.mac, e.rule)))?
        },
        mtu: rec.mtu,
        host_ifname: rec.host_ifname.clone(),
        ips,
        routes,
        neighbors: rec
            .neighbors
            .iter()
            .map(|n| {
                Ok(Neighbor {
                    ip: n.ip.parse().map_err(|_| bad("neighbour ip"))?,
                    mac: MacAddr::parse(&n.mac).map_err(|e| {
                        at(format!("invalid neighbour mac {:?}: {}", n.mac, e.rule))
                    })?,
                })
            })
            .collect::<Result<_>>()?,
        tap: rec.tap.as_ref().map(|t| tap_from_record(t, rec)),
        device: rec.device.as_ref().map(|d| DeviceInfo {
            pci_address: non_empty(&d.pci_address),
            original_name: d.original_name.clone(),
            original_mtu: d.original_mtu,
            was_up: d.was_up,
        }),
        dan_path: non_empty(&rec.dan_path).map(PathBuf::from),
        parent: non_empty(&rec.parent),
        mode: non_empty(&rec.mode),
        cni: rec.cni.as_ref().map(|c| crate::model::CniInfo {
            host_interface: non_empty(&c.host_interface),
            result: non_empty(&c.result),
        }),
        bandwidth: match rec.bandwidth.as_ref() {
            Some(b) => bandwidth_from_record(b).map_err(at)?,
            None => None,
        },
    })
}

fn non_empty(text: &str) -> Option<String> {
    (!text.is_empty()).then(|| text.to_owned())
}

fn path_text(path: Option<&std::path::Path>) -> String {
    path.map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn tap_to_record(t: &TapInfo) -> TapRecord {
    TapRecord {
        name: t.name.clone(),
        queue_pairs: t.queue_pairs,
        multi_queue: t.multi_queue,
        vnet_hdr: t.vnet_hdr,
        no_pi: t.no_pi,
        vhost_net_ok: t.vhost_net_ok,
        owner_uid: t.owner_uid,
        owner_gid: t.owner_gid,
        dan: t.dan,
        ..Default::default()
    }
}

/// A pod tap lives in the attachment's netns and is redirected to its interface; a DAN tap is
/// in the host netns, redirected to nothing.
fn tap_from_record(t: &TapRecord, rec: &AttachmentRecord) -> TapInfo {
    let in_pod = !t.dan;
    TapInfo {
        name: t.name.clone(),
        netns_path: in_pod.then(|| PathBuf::from(&rec.netns_path)),
        queue_pairs: t.queue_pairs,
        multi_queue: t.multi_queue,
        vnet_hdr: t.vnet_hdr,
        no_pi: t.no_pi,
        vhost_net_ok: t.vhost_net_ok,
        owner_uid: t.owner_uid,
        owner_gid: t.owner_gid,
        redirect_peer: if in_pod {
            rec.ifname.clone()
        } else {
            String::new()
        },
        dan: t.dan,
    }
}

/// Record of a sandbox (its interfaces are separate records).
pub fn sandbox_to_record(sandbox: &Sandbox) -> SandboxRecord {
    SandboxRecord {
        id: sandbox.id.as_str().to_owned(),
        netns_path: sandbox.netns_path.to_string_lossy().into_owned(),
        netns_dev: sandbox.netns_dev,
        netns_ino: sandbox.netns_inode,
        generation: sandbox.generation,
        pod: MessageField::some(PodRecord {
            name: sandbox.pod.name.clone(),
            namespace: sandbox.pod.namespace.clone(),
            uid: sandbox.pod.uid.clone(),
            ..Default::default()
        }),
        dns: MessageField::some(DnsRecord {
            servers: sandbox
                .dns
                .servers
                .iter()
                .map(ToString::to_string)
                .collect(),
            searches: sandbox.dns.searches.clone(),
            options: sandbox.dns.options.clone(),
            domain: sandbox.dns.domain.clone(),
            ..Default::default()
        }),
        port_mappings: sandbox
            .port_mappings
            .iter()
            .map(|p| PortMappingRecord {
                host_port: u32::from(p.host_port),
                container_port: u32::from(p.container_port),
                protocol: p.protocol.clone(),
                host_ip: p.host_ip.map(|a| a.to_string()).unwrap_or_default(),
                ..Default::default()
            })
            .collect(),
        labels: sandbox.labels.clone().into_iter().collect(),
        annotations: sandbox.annotations.clone().into_iter().collect(),
        created_at_ms: sandbox.created_at_ms,
        updated_at_ms: sandbox.updated_at_ms,
        ..Default::default()
    }
}

/// Domain form of a sandbox with its attachments (sorted into request order).
pub fn sandbox_from_records(
    rec: &SandboxRecord,
    mut attachments: Vec<AttachmentRecord>,
) -> Result<Sandbox> {
    let bad = |what: &str| corrupt(&rec.id, format!("invalid {what}"));
    attachments.sort_by_key(|a| a.position);
    let pod = rec.pod.as_ref().cloned().unwrap_or_default();
    let dns = rec.dns.as_ref().cloned().unwrap_or_default();
    Ok(Sandbox {
        id: SandboxId::parse(&rec.id).map_err(|_| bad("id"))?,
        netns_path: PathBuf::from(&rec.netns_path),
        netns_inode: rec.netns_ino,
        netns_dev: rec.netns_dev,
        generation: rec.generation,
        pod: PodRef {
            name: pod.name,
            namespace: pod.namespace,
            uid: pod.uid,
        },
        interfaces: attachments
            .iter()
            .map(attachment_from_record)
            .collect::<Result<_>>()?,
        dns: Dns {
            servers: dns
                .servers
                .iter()
                .map(|s| s.parse().map_err(|_| bad("dns server")))
                .collect::<Result<_>>()?,
            searches: dns.searches,
            options: dns.options,
            domain: dns.domain,
        },
        port_mappings: rec
            .port_mappings
            .iter()
            .map(|p| {
                Ok(PortMapping {
                    host_port: u16::try_from(p.host_port).map_err(|_| bad("host_port"))?,
                    container_port: u16::try_from(p.container_port)
                        .map_err(|_| bad("container_port"))?,
                    protocol: p.protocol.clone(),
                    host_ip: opt_ip(&p.host_ip),
                })
            })
            .collect::<Result<_>>()?,
        labels: rec.labels.clone().into_iter().collect(),
        annotations: rec.annotations.clone().into_iter().collect(),
        created_at_ms: rec.created_at_ms,
        updated_at_ms: rec.updated_at_ms,
    })
}

/// Whether `rec` is a cni interface, whose plugins hold its addresses and remove it (DEL).
pub(crate) fn is_cni(rec: &AttachmentRecord) -> bool {
    InterfaceKind::parse(&rec.kind) == Ok(InterfaceKind::Cni)
}

/// Addresses an attachment record holds in knid's IPAM (none for a cni interface: its plugins'
/// IPAM holds them).
pub(crate) fn addresses(rec: &AttachmentRecord) -> Result<Vec<IpAddr>> {
    if is_cni(rec) {
        return Ok(Vec::new());
    }
    rec.ips
        .iter()
        .map(|ip| {
            ip.address
                .parse::<IpNet>()
                .map(|n| n.addr())
                .map_err(|_| Error::Corrupt {
                    key: attachment_key(rec),
                    detail: format!("invalid address {:?}", ip.address),
                })
        })
        .collect()
}

#[cfg(test)]
mod tests;
