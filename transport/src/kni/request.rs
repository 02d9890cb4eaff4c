//! KNI requests → validated core requests. An AttachInterface is rebuilt as a knid.v1 Attach
//! and validated by [`convert::attach_request`], so both APIs share one validation path; the
//! field paths in its errors (and in the core's) are then renamed to the KNI fields they came
//! from ([`kni_error`]).

use std::collections::HashMap;
use std::path::Path;

use knid_core::validate::{self, Invalid};
use knid_core::{
    kni_netns_owner, AttachRequest, Bandwidth, Error, NetnsLookup, NetnsRequest, PodRef, SandboxId,
};

use crate::convert::{self, request::DEFAULT_IFNAME};
use crate::pb::{self, kni};

/// Request extradata key: the netns path when `isolation.path` is empty.
pub const NETNS_KEY: &str = "netns";
/// Request extradata key: the pod UID (AttachInterface has no uid field).
pub const UID_KEY: &str = "uid";
/// Request extradata key: the pod's interfaces, `network[@ifname],...`.
pub const NETWORKS_KEY: &str = "knid.io/networks";

/// A request's extradata entry, `None` when absent or empty.
pub(super) fn extradata<'a>(map: &'a HashMap<String, String>, key: &str) -> Option<&'a str> {
    map.get(key).map(String::as_str).filter(|v| !v.is_empty())
}

/// The field errors about the interfaces name: the extradata entry they are parsed from.
const NETWORKS_FIELD: &str = "extradata[knid.io/networks]";
/// The field an AttachInterface's netns path is read from first.
const ISOLATION_PATH: &str = "isolation.path";
/// The field it falls back to.
const NETNS_FIELD: &str = "extradata[netns]";

/// A validated AttachInterface.
#[derive(Debug)]
pub struct Attach {
    /// The core request; `pod.uid` is empty when the request carries none.
    pub request: AttachRequest,
    /// The KNI field the netns path came from, named in the errors the core raises about it.
    pub netns_field: &'static str,
}

/// The sandbox id of a KNI request, from its field `id`.
pub fn sandbox_id(value: &str) -> Result<SandboxId, Error> {
    SandboxId::parse(value).map_err(|e| e.at("id"))
}

/// Validates a CreateNetwork: the netns of the pod, keyed by [`kni_netns_owner`] and named after
/// that key, in `netns_dir` (the only directory `netns_path_prefix` may name).
pub fn create_network(
    req: &kni::CreateNetworkRequest,
    netns_dir: &Path,
) -> Result<NetnsRequest, Error> {
    // Path equality compares components, so "/run/netns/" is "/run/netns".
    if !req.netns_path_prefix.is_empty() && Path::new(&req.netns_path_prefix) != netns_dir {
        return Err(Invalid::new(format!(
            "must be empty or knid's netns_dir {}",
            netns_dir.display()
        ))
        .at("netns_path_prefix"));
    }
    let owner = kni_netns_owner(&req.uid, &req.namespace, &req.name)?;
    let pod = pod(&req.name, &req.namespace, &req.uid)?;
    Ok(NetnsRequest {
        name: Some(owner.to_string()),
        owner,
        pod: Some(pod),
        labels: convert::request::string_map(&req.labels, "labels")?,
        annotations: convert::request::string_map(&req.annotations, "annotations")?,
    })
}

/// Validates a DeleteNetwork: the sandbox to detach first (`id`, when set) and how to find the
/// netns. At least `id`, `netns_path`, or both `namespace` and `name` must be set.
pub fn delete_network(
    req: &kni::DeleteNetworkRequest,
) -> Result<(Option<SandboxId>, NetnsLookup), Error> {
    let id = match req.id.as_str() {
        "" => None,
        id => Some(sandbox_id(id)?),
    };
    let path = match req.netns_path.as_str() {
        "" => None,
        path => Some(convert::request::netns_path(path)?),
    };
    let pod = if req.namespace.is_empty() || req.name.is_empty() {
        None
    } else {
        let pod = pod(&req.name, &req.namespace, "")?;
        Some((pod.namespace, pod.name))
    };
    if id.is_none() && path.is_none() && pod.is_none() {
        return Err(
            Invalid::new("must be set, or netns_path, or both namespace and name").at("id"),
        );
    }
    let lookup = NetnsLookup {
        sandbox_id: id.as_ref().map(SandboxId::to_string),
        path,
        pod,
    };
    Ok((id, lookup))
}

/// Validates an AttachInterface by way of the knid.v1 Attach it amounts to.
pub fn attach_interface(req: &kni::AttachInterfaceRequest) -> Result<Attach, Error> {
    let (netns_path, netns_field) = match (
        req.isolation.path.as_str(),
        extradata(&req.extradata, NETNS_KEY),
    ) {
        ("", None) => {
            return Err(Invalid::new(format!("must be set (or {NETNS_FIELD})")).at(ISOLATION_PATH))
        }
        ("", Some(path)) => (path, NETNS_FIELD),
        (path, _) => (path, ISOLATION_PATH),
    };
    let dns = req.dns_config.get_or_default();
    let mut interfaces = interfaces(req.extradata.get(NETWORKS_KEY).map(String::as_str))?;
    // The pod's bandwidth annotations limit its first interface (eth0 unless knid.io/networks
    // says otherwise), as they limit the primary network's interface under CNI.
    let annotation = |key: &str| req.annotations.get(key).map(String::as_str);
    let limits = Bandwidth::from_annotations(annotation)
        .map_err(|(key, e)| e.at(format!("annotations[{key}]")))?;
    if let (Some(limits), Some(first)) = (limits, interfaces.first_mut()) {
        first.bandwidth = Some(convert::response::bandwidth(&limits)).into();
    }
    let attach = pb::AttachRequest {
        sandbox_id: req.id.clone(),
        pod: Some(pb::PodRef {
            name: req.name.clone(),
            namespace: req.namespace.clone(),
            uid: extradata(&req.extradata, UID_KEY)
                .unwrap_or_default()
                .to_owned(),
            ..Default::default()
        })
        .into(),
        netns_path: netns_path.to_owned(),
        interfaces,
        dns: Some(pb::Dns {
            servers: dns.servers.clone(),
            searches: dns.searches.clone(),
            options: dns.options.clone(),
            ..Default::default()
        })
        .into(),
        port_mappings: req.port_mappings.iter().map(port_mapping).collect(),
        labels: req.labels.clone(),
        annotations: req.annotations.clone(),
        ..Default::default()
    };
    let request = convert::attach_request(&attach).map_err(|e| kni_error(e, netns_field))?;
    Ok(Attach {
        request,
        netns_field,
    })
}

/// The interfaces `knid.io/networks` asks for: `network[@ifname],...`, an unnamed entry taking
/// `eth<position>`; without the key, one `eth0` on the default network. Only the list's shape is
/// checked here; names and networks are the knid.v1 validation's.
fn interfaces(value: Option<&str>) -> Result<Vec<pb::InterfaceRequest>, Error> {
    let Some(value) = value else {
        return Ok(vec![pb::InterfaceRequest {
            name: DEFAULT_IFNAME.to_owned(),
            ..Default::default()
        }]);
    };
    value
        .split(',')
        // One past the limit, so the knid.v1 count check still sees an over-long list.
        .take(validate::MAX_INTERFACES + 1)
        .enumerate()
        .map(|(i, entry)| {
            let (network, ifname) = match entry.split_once('@') {
                Some((network, ifname)) => (network.trim(), ifname.trim()),
                None => (entry.trim(), ""),
            };
            if network.is_empty() {
                return Err(
                    Invalid::new(format!("entry {i} must name a network")).at(NETWORKS_FIELD)
                );
            }
            Ok(pb::InterfaceRequest {
                name: match ifname {
                    "" => format!("eth{i}"),
                    name => name.to_owned(),
                },
                network: network.to_owned(),
                ..Default::default()
            })
        })
        .collect()
}

/// A KNI port mapping as knid.v1 spells it; the knid.v1 validation judges the values.
fn port_mapping(m: &kni::PortMapping) -> pb::PortMapping {
    let protocol = match m.protocol.enum_value() {
        Ok(kni::Protocol::TCP) => "tcp".to_owned(),
        Ok(kni::Protocol::UDP) => "udp".to_owned(),
        Ok(kni::Protocol::SCTP) => "sctp".to_owned(),
        // An unknown enum number: passed on so that it is refused naming the field.
        Err(number) => number.to_string(),
    };
    pb::PortMapping {
        // A negative port is as out of range as 0.
        host_port: u32::try_from(m.host_port).unwrap_or(0),
        container_port: u32::try_from(m.container_port).unwrap_or(0),
        protocol,
        host_ip: m.host_ip.clone(),
        ..Default::default()
    }
}

/// A pod validated as knid.v1 validates one, errors naming CreateNetwork's and DeleteNetwork's
/// top-level `name`, `namespace` and `uid`.
fn pod(name: &str, namespace: &str, uid: &str) -> Result<PodRef, Error> {
    let pod = pb::PodRef {
        name: name.to_owned(),
        namespace: namespace.to_owned(),
        uid: uid.to_owned(),
        ..Default::default()
    };
    convert::request::pod(&pod).map_err(|e| match e {
        Error::InvalidArgument { field, rule } => Error::InvalidArgument {
            field: field.strip_prefix("pod.").unwrap_or(&field).to_owned(),
            rule,
        },
        other => other,
    })
}

/// `err` with the knid.v1 field path it names (from the knid.v1 validation or the core's checks
/// of an Attach) renamed to the AttachInterface field it came from; `netns_field` is where the
/// netns path was read. Other errors pass unchanged.
pub fn kni_error(err: Error, netns_field: &str) -> Error {
    let Error::InvalidArgument { field, rule } = err else {
        return err;
    };
    let (field, rule) = match field.as_str() {
        "sandbox_id" => ("id".to_owned(), rule),
        "pod.name" => ("name".to_owned(), rule),
        "pod.namespace" => ("namespace".to_owned(), rule),
        "pod.uid" => (format!("extradata[{UID_KEY}]"), rule),
        "netns_path" => (netns_field.to_owned(), rule),
        f if f.starts_with("interfaces") => {
            let rule = entries_in(&rule);
            match entry(f) {
                Some(entry) => (NETWORKS_FIELD.to_owned(), format!("{entry}: {rule}")),
                None => (NETWORKS_FIELD.to_owned(), rule),
            }
        }
        f => match f.strip_prefix("dns.") {
            Some(rest) => (format!("dns_config.{rest}"), rule),
            None => (field, rule),
        },
    };
    Error::InvalidArgument { field, rule }
}

/// `interfaces[2].name` → `entry 2 (ifname)`, `interfaces[2]` → `entry 2`: the knid.v1 path of an
/// interface as the position in `knid.io/networks` it was parsed from.
fn entry(path: &str) -> Option<String> {
    let (index, sub) = path.strip_prefix("interfaces[")?.split_once(']')?;
    Some(match sub.strip_prefix('.') {
        None => format!("entry {index}"),
        Some("name") => format!("entry {index} (ifname)"),
        Some(sub) => format!("entry {index} ({sub})"),
    })
}

/// `rule` with the knid.v1 interface paths it mentions (`duplicates interfaces[0].name`)
/// rewritten as [`entry`] does.
fn entries_in(rule: &str) -> String {
    rule.split(' ')
        .map(|word| entry(word).unwrap_or_else(|| word.to_owned()))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests;
