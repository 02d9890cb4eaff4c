//! One function per CNI verb, each making only the knid calls it needs on one connection.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use ipnet::IpNet;
use knid_core::cni::error::{
    INCOMPATIBLE_VERSION, INTERNAL, INVALID_CONFIG, NOT_AVAILABLE, UNKNOWN_CONTAINER,
};
use knid_core::cni::{version, CniError, CniResult, Version};
use protobuf::MessageField;
use serde_json::{json, Value};

use super::codes::{CHECK_MISMATCH, GC_INCOMPLETE};
use super::config::PluginConf;
use super::env::Attachment;
use super::result::{call_error, from_sandbox, CallKind};
use crate::client::oneshot::{OneshotClient, OneshotError};
use crate::pb;

/// Deadline of ADD, DEL, CHECK and GC (sent to knid too). An Attach may wait for the reaper
/// to free an address, so it gets far more than it usually takes.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Deadline of STATUS: a readiness probe must answer quickly or count as "not available".
const STATUS_TIMEOUT: Duration = Duration::from_secs(5);

/// VERSION: the requested version when knid speaks it, else the newest.
pub fn version(requested: Option<&str>) -> Value {
    let answer = requested
        .and_then(|v| Version::parse(v).ok())
        .unwrap_or(Version::LATEST);
    json!({
        "cniVersion": answer.as_str(),
        "supportedVersions": version::SUPPORTED.map(Version::as_str),
    })
}

fn connect(socket: &Path, timeout: Duration, kind: CallKind) -> Result<OneshotClient, CniError> {
    OneshotClient::connect(socket, timeout).map_err(|e| call_error(&e, socket, kind))
}

fn failed(conf: &PluginConf) -> impl Fn(OneshotError) -> CniError + '_ {
    move |e| call_error(&e, &conf.socket, CallKind::Operation)
}

/// ADD → Attach. knid's Attach is idempotent: the same request again returns the same result.
pub fn add(conf: &PluginConf, att: &Attachment) -> Result<Value, CniError> {
    let netns = att.netns.clone().unwrap_or_default();
    let rc = &conf.runtime;
    let pod = &att.pod;
    let bandwidth = bandwidth(rc)?;
    let req = pb::AttachRequest {
        sandbox_id: att.container_id.clone(),
        pod: if pod.name.is_empty() && pod.namespace.is_empty() && pod.uid.is_empty() {
            MessageField::none()
        } else {
            MessageField::some(pb::PodRef {
                name: pod.name.clone(),
                namespace: pod.namespace.clone(),
                uid: pod.uid.clone(),
                ..Default::default()
            })
        },
        netns_path: netns.clone(),
        interfaces: vec![pb::InterfaceRequest {
            name: att.ifname.clone(),
            network: conf.network.clone(),
            mac: rc.mac.clone(),
            static_ips: rc.ips.clone(),
            bandwidth: MessageField::from_option(bandwidth),
            ..Default::default()
        }],
        dns: MessageField::from_option(rc.dns.clone()),
        port_mappings: rc.port_mappings.clone(),
        annotations: forwarded_annotations(&rc.annotations),
        ..Default::default()
    };
    let mut client = connect(&conf.socket, CALL_TIMEOUT, CallKind::Operation)?;
    let sandbox = client.attach(&req, CALL_TIMEOUT).map_err(failed(conf))?;
    let iface = interface_of(&sandbox, &att.ifname).ok_or_else(|| {
        CniError::new(
            INTERNAL,
            format!("knid's answer lacks interface {}", att.ifname),
        )
    })?;
    Ok(from_sandbox(&sandbox, iface, &netns)?.to_json(conf.version))
}

/// The limits of the interface: the `bandwidth` capability's when it sets a rate, else the
/// pod's `kubernetes.io/ingress-bandwidth` / `egress-bandwidth` annotations' (with the
/// dockershim's burst, [`knid_core::ANNOTATION_BURST`]). The runtime that fills the capability
/// reads the same annotations, so the two agree unless the capability is not declared. knid
/// validates the capability's values; an annotation that is no quantity fails the ADD.
fn bandwidth(rc: &super::config::RuntimeConfig) -> Result<Option<pb::Bandwidth>, CniError> {
    if let Some(bw) = rc
        .bandwidth
        .filter(|b| b.ingress_rate != 0 || b.egress_rate != 0)
    {
        let mut out = pb::Bandwidth::new();
        out.ingress_rate = bw.ingress_rate;
        out.ingress_burst = bw.ingress_burst;
        out.egress_rate = bw.egress_rate;
        out.egress_burst = bw.egress_burst;
        return Ok(Some(out));
    }
    let annotation = |key: &str| rc.annotations.get(key).map(String::as_str);
    let limits = knid_core::Bandwidth::from_annotations(annotation).map_err(|(key, e)| {
        CniError::new(
            INVALID_CONFIG,
            format!("invalid pod annotation {key}: {}", e.rule),
        )
    })?;
    Ok(limits.as_ref().map(crate::convert::response::bandwidth))
}

/// The pod annotations knid acts on, recorded on the sandbox. Not all of them: a pod's
/// annotations may be many and large (`kubectl.kubernetes.io/last-applied-configuration`), and
/// knid's limits on annotations must never fail an ADD.
fn forwarded_annotations(
    annotations: &std::collections::HashMap<String, String>,
) -> std::collections::HashMap<String, String> {
    const USED: [&str; 2] = [
        "kubernetes.io/ingress-bandwidth",
        "kubernetes.io/egress-bandwidth",
    ];
    annotations
        .iter()
        .filter(|(k, _)| USED.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// DEL → Detach of the one interface. An unknown container is success (knid's rule and the
/// spec's); an unreachable knid is an error, never success, or the attachment would leak.
pub fn del(conf: &PluginConf, att: &Attachment) -> Result<(), CniError> {
    let req = pb::DetachRequest {
        sandbox_id: att.container_id.clone(),
        ifname: att.ifname.clone(),
        ..Default::default()
    };
    let mut client = connect(&conf.socket, CALL_TIMEOUT, CallKind::Operation)?;
    client.detach(&req, CALL_TIMEOUT).map_err(failed(conf))?;
    Ok(())
}

/// CHECK → Inspect, then the interface is verified against `prevResult` and in the kernel.
pub fn check(conf: &PluginConf, att: &Attachment) -> Result<(), CniError> {
    if !conf.version.has_check() {
        return Err(too_old("CHECK", "0.4.0", conf.version));
    }
    let req = pb::InspectRequest {
        sandbox_id: att.container_id.clone(),
        ..Default::default()
    };
    let mut client = connect(&conf.socket, CALL_TIMEOUT, CallKind::Operation)?;
    let sandbox = client.inspect(&req, CALL_TIMEOUT).map_err(|e| {
        let mut err = call_error(&e, &conf.socket, CallKind::Operation);
        if err.code == UNKNOWN_CONTAINER {
            err.msg = format!("container {} is unknown to knid", att.container_id);
        }
        err
    })?;
    let mismatch = |what: String| CniError::new(CHECK_MISMATCH, what);
    let iface = interface_of(&sandbox, &att.ifname).ok_or_else(|| {
        mismatch(format!(
            "interface {} of container {} is not attached",
            att.ifname, att.container_id
        ))
    })?;
    if iface.state != "attached" {
        return Err(mismatch(format!(
            "interface {} is {}, not attached",
            att.ifname, iface.state
        )));
    }
    let netns = att.netns.as_deref().unwrap_or_default();
    if sandbox.netns_path != netns {
        return Err(mismatch(format!(
            "CNI_NETNS {netns} is not the netns knid attached, {}",
            sandbox.netns_path
        )));
    }
    let ours = from_sandbox(&sandbox, iface, netns)?;
    if let Some(prev) = &conf.prev_result {
        check_prev_result(prev, &att.ifname, &ours)?;
    }
    // knid looks into the netns itself (and runs a cni network's CHECK chain), on the
    // sandbox's shard: the shim stays without threads and never races an ADD or DEL.
    // The reference plugins check the kernel against the prevResult: a later plugin of the
    // chain (tuning) may have changed the MAC, and the prevResult says so.
    let expected_mac = conf
        .prev_result
        .as_ref()
        .and_then(|prev| prev.pod_interface(&att.ifname))
        .map(|(_, iface)| iface.mac.clone())
        .unwrap_or_default();
    let req = pb::CheckRequest {
        sandbox_id: att.container_id.clone(),
        ifname: att.ifname.clone(),
        expected_mac,
        ..Default::default()
    };
    match client.check(&req, CALL_TIMEOUT) {
        Ok(_) => Ok(()),
        Err(OneshotError::Rpc {
            code: ttrpc::Code::FAILED_PRECONDITION,
            message,
        }) => Err(mismatch(message)),
        Err(e) => Err(call_error(&e, &conf.socket, CallKind::Operation)),
    }
}

/// The addresses `prevResult` gives the pod interface must be knid's. Its MAC is not compared
/// with knid's record: a later plugin may have changed it, and knid's Check verifies the kernel
/// against the prevResult's MAC instead.
fn check_prev_result(prev: &CniResult, ifname: &str, ours: &CniResult) -> Result<(), CniError> {
    let pod = prev.pod_interface(ifname);
    let theirs: BTreeSet<IpNet> = prev
        .ips
        .iter()
        // Addresses of other interfaces (another plugin's) are not knid's to check.
        .filter(|ip| ip.interface.is_none() || ip.interface == pod.map(|(i, _)| i))
        .map(|ip| ip.address)
        .collect();
    let knids: BTreeSet<IpNet> = ours.ips.iter().map(|ip| ip.address).collect();
    if theirs != knids {
        return Err(CniError::new(
            CHECK_MISMATCH,
            format!(
                "prevResult ips {} differ from knid's {}",
                list(&theirs),
                list(&knids)
            ),
        ));
    }
    Ok(())
}

fn list(set: &BTreeSet<IpNet>) -> String {
    let items: Vec<String> = set.iter().map(ToString::to_string).collect();
    format!("[{}]", items.join(", "))
}

/// STATUS → Status: not available (50) when knid is unreachable, when the network's
/// `PluginsAvailable/<network>` condition is false (its plugins fail) or its
/// `NetworkSchedulable/<network>` is (its pool is exhausted: the CNI spec's "cannot service
/// ADD"), or when knid is not ready for any reason other than another network's plugins.
pub fn status(conf: &PluginConf) -> Result<(), CniError> {
    if !conf.version.has_status_and_gc() {
        return Err(too_old("STATUS", "1.1.0", conf.version));
    }
    let unavailable = |e: OneshotError| call_error(&e, &conf.socket, CallKind::Status);
    let mut client = connect(&conf.socket, STATUS_TIMEOUT, CallKind::Status)?;
    let status = client.status(STATUS_TIMEOUT).map_err(unavailable)?;
    let plugins = format!("PluginsAvailable/{}", conf.network);
    let describe = |c: &pb::Condition| {
        format!(
            "condition {} is false: {} ({})",
            c.type_, c.reason, c.message
        )
    };
    match status.conditions.iter().find(|c| c.type_ == plugins) {
        None => {
            return Err(CniError::new(
                NOT_AVAILABLE,
                format!("knid has no network {:?}", conf.network),
            ))
        }
        Some(c) if !c.status => return Err(CniError::new(NOT_AVAILABLE, describe(c))),
        Some(_) => {}
    }
    // This network's full pool: no ADD can succeed (knid's own readiness does not count it).
    let schedulable = format!("NetworkSchedulable/{}", conf.network);
    if let Some(c) = status
        .conditions
        .iter()
        .find(|c| c.type_ == schedulable && !c.status)
    {
        return Err(CniError::new(NOT_AVAILABLE, describe(c)));
    }
    if !status.ready {
        // A network's failing plugins make knid "not ready" without stopping ADDs here.
        let others_plugins =
            |c: &pb::Condition| c.type_.starts_with("PluginsAvailable/") && c.type_ != plugins;
        let failing: Vec<&pb::Condition> = status.conditions.iter().filter(|c| !c.status).collect();
        match failing.iter().find(|c| !others_plugins(c)) {
            Some(c) => {
                return Err(CniError::new(
                    NOT_AVAILABLE,
                    format!("knid is not ready: {}", describe(c)),
                ))
            }
            // Not ready with every condition holding: knid is shutting down.
            None if failing.is_empty() => {
                return Err(CniError::new(
                    NOT_AVAILABLE,
                    "knid is not ready: it is shutting down",
                ))
            }
            None => {}
        }
    }
    Ok(())
}

/// GC → GarbageCollect of this network: every attachment of it not in the valid list is
/// detached; attachments of other networks are kept. What knid could not remove fails the
/// call, listed.
pub fn gc(conf: &PluginConf) -> Result<(), CniError> {
    if !conf.version.has_status_and_gc() {
        return Err(too_old("GC", "1.1.0", conf.version));
    }
    // Without the list every attachment would count as stale: refuse rather than guess.
    let valid = conf.valid_attachments.as_ref().ok_or_else(|| {
        CniError::new(INVALID_CONFIG, "invalid cni.dev/valid-attachments: missing")
    })?;
    let req = pb::GarbageCollectRequest {
        valid_attachments: valid
            .iter()
            .map(|(id, ifname)| pb::AttachmentRef {
                sandbox_id: id.clone(),
                ifname: ifname.clone(),
                ..Default::default()
            })
            .collect(),
        network: conf.network.clone(),
        // CNI 1.1: the runtime's list is its explicit statement, an empty one included.
        allow_detach_all: true,
        ..Default::default()
    };
    let mut client = connect(&conf.socket, CALL_TIMEOUT, CallKind::Operation)?;
    let response = client
        .garbage_collect(&req, CALL_TIMEOUT)
        .map_err(failed(conf))?;
    if !response.errors.is_empty() {
        return Err(CniError::new(
            GC_INCOMPLETE,
            format!(
                "knid could not remove {} object(s): {}",
                response.errors.len(),
                response.errors.join("; ")
            ),
        ));
    }
    Ok(())
}

fn interface_of<'a>(sandbox: &'a pb::Sandbox, ifname: &str) -> Option<&'a pb::InterfaceResult> {
    sandbox.interfaces.iter().find(|i| i.name == ifname)
}

fn too_old(verb: &str, since: &str, got: Version) -> CniError {
    CniError::new(
        INCOMPATIBLE_VERSION,
        format!("{verb} needs cniVersion {since} or later, the configuration has {got}"),
    )
}
