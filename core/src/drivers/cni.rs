//! The `cni` driver (docs/architecture.md#networks-and-device-kinds, README.md#cni-compatibility-both-directions): an attachment on a `cni` network runs the network's
//! plugin chain with libcni's semantics. ADD runs the plugins in order, each getting the
//! previous result as `prevResult`; DEL runs them in reverse with the cached final result; GC
//! and STATUS run the 1.1.0 verbs. Everything DEL needs — the configuration list ADD ran, its
//! CNI_ARGS and capability args, the final result — is cached in the attachment record, in the
//! same store as the record's state, so a crash, a reload or a power cut never loses it.

use std::net::IpAddr;

use knid_store::{AttachmentRecord, CniRecord, IpRecord, RouteRecord};
use serde_json::{json, Map, Value};

use crate::cni::error::{CniError, DECODE};
use crate::cni::exec::{Invocation, Verb};
use crate::cni::{CniResult, ConfList};
use crate::config::{CniNetwork, Network};
use crate::drivers::plan::MAIN_TABLE;
use crate::error::{Error, Result};
use crate::lifecycle::attachment_key;
use crate::model::{AttachRequest, Bandwidth, InterfaceSpec, RouteScope};
use crate::shared::Context;

/// What the chain of interface `spec` of `req` is run with, recorded with the intent.
pub(crate) fn call_record(
    cni: &CniNetwork,
    req: &AttachRequest,
    spec: &InterfaceSpec,
) -> CniRecord {
    let mut args = vec![
        "IgnoreUnknown=1".to_owned(),
        format!("K8S_POD_INFRA_CONTAINER_ID={}", req.sandbox_id.as_str()),
    ];
    for (key, value) in [
        ("K8S_POD_NAMESPACE", &req.pod.namespace),
        ("K8S_POD_NAME", &req.pod.name),
        ("K8S_POD_UID", &req.pod.uid),
    ] {
        if !value.is_empty() {
            args.push(format!("{key}={value}"));
        }
    }
    CniRecord {
        conflist: cni.text.clone(),
        args: args.join(";"),
        capability_args: Value::Object(capability_args(req, spec)).to_string(),
        ..Default::default()
    }
}

/// The runtime's capability args (CONVENTIONS.md): `portMappings`, `dns`, `ips`, `mac` and
/// `bandwidth` (the interface's limits, else the `kubernetes.io/{ingress,egress}-bandwidth`
/// annotations with [`crate::model::ANNOTATION_BURST`]). Each plugin
/// gets those it declares in `capabilities`.
fn capability_args(req: &AttachRequest, spec: &InterfaceSpec) -> Map<String, Value> {
    let mut caps = Map::new();
    if !req.port_mappings.is_empty() {
        let maps: Vec<Value> = req
            .port_mappings
            .iter()
            .map(|p| {
                let mut m = json!({
                    "hostPort": p.host_port,
                    "containerPort": p.container_port,
                    "protocol": p.protocol.as_str().to_ascii_lowercase(),
                });
                if let Some(ip) = p.host_ip {
                    m["hostIP"] = json!(ip.to_string());
                }
                m
            })
            .collect();
        caps.insert("portMappings".into(), Value::Array(maps));
    }
    let dns = &req.dns;
    if !(dns.servers.is_empty() && dns.searches.is_empty() && dns.options.is_empty()) {
        let servers: Vec<String> = dns.servers.iter().map(IpAddr::to_string).collect();
        caps.insert(
            "dns".into(),
            json!({ "servers": servers, "searches": dns.searches, "options": dns.options }),
        );
    }
    if !spec.static_ips.is_empty() {
        let ips: Vec<String> = spec.static_ips.iter().map(IpAddr::to_string).collect();
        caps.insert("ips".into(), json!(ips));
    }
    if let Some(mac) = spec.mac {
        caps.insert("mac".into(), json!(mac.to_string()));
    }
    // The interface's own limits (knid-cni's `bandwidth` capability), else the annotations'.
    let limits = spec.bandwidth.or_else(|| {
        Bandwidth::from_annotations(|key| req.annotations.get(key).map(String::as_str))
            .ok()
            .flatten()
    });
    if let Some(limits) = limits {
        let mut bandwidth = Map::new();
        for (limit, rate, burst) in [
            (limits.ingress, "ingressRate", "ingressBurst"),
            (limits.egress, "egressRate", "egressBurst"),
        ] {
            if let Some(limit) = limit {
                bandwidth.insert(rate.into(), json!(limit.rate));
                bandwidth.insert(burst.into(), json!(limit.burst));
            }
        }
        caps.insert("bandwidth".into(), Value::Object(bandwidth));
    }
    caps
}

fn cni_of(rec: &AttachmentRecord) -> Result<&CniRecord> {
    rec.cni.as_ref().ok_or_else(|| Error::Corrupt {
        key: attachment_key(rec),
        detail: "cni attachment without its cni record".into(),
    })
}

fn list_of(rec: &AttachmentRecord, cni: &CniRecord) -> Result<ConfList> {
    ConfList::parse(cni.conflist.as_bytes()).map_err(|e| Error::Corrupt {
        key: attachment_key(rec),
        detail: format!("recorded configuration list: {e}"),
    })
}

fn caps_of(rec: &AttachmentRecord, cni: &CniRecord) -> Result<Map<String, Value>> {
    if cni.capability_args.is_empty() {
        return Ok(Map::new());
    }
    serde_json::from_str(&cni.capability_args).map_err(|e| Error::Corrupt {
        key: attachment_key(rec),
        detail: format!("recorded capability args: {e}"),
    })
}

/// A plugin's failure as a core error of `network` (its API class: see [`Error::kind`]).
fn plugin_error(network: &str, err: CniError) -> Error {
    Error::Cni {
        network: network.to_owned(),
        source: err,
    }
}

/// Runs the ADD chain of `rec`; the final result as JSON text. When a plugin fails, DEL runs
/// (the spec's rule) on the plugins that were started, in reverse; when that succeeds `rec` is
/// marked released, so the rollback that follows has nothing left to DEL — not even a plugin
/// that was never there.
pub(crate) fn add(ctx: &Context, rec: &mut AttachmentRecord) -> Result<Value> {
    let cni = cni_of(rec)?;
    let list = list_of(rec, cni)?;
    let caps = caps_of(rec, cni)?;
    let inv = Invocation {
        verb: Verb::Add,
        container_id: &rec.sandbox_id,
        netns: &rec.netns_path,
        ifname: &rec.ifname,
        args: &cni.args,
    };
    let mut prev: Option<Value> = None;
    let mut failure = None;
    for i in 0..list.plugins.len() {
        let plugin = list.plugin_type(i);
        // A plugin that cannot be found never ran: only those before it are undone.
        let exe = match ctx.cni.find(plugin) {
            Ok(exe) => exe,
            Err(e) => {
                failure = Some((i, e));
                break;
            }
        };
        let conf = list.plugin_config(i, &caps, prev.as_ref());
        let out = match ctx.cni.run_found(&exe, plugin, &inv, &conf) {
            Ok(out) => out,
            Err(e) => {
                failure = Some((i + 1, e));
                break;
            }
        };
        match serde_json::from_slice(&out) {
            Ok(result) => prev = Some(result),
            Err(e) => {
                let msg = format!("plugin {plugin} ADD printed no result: {e}");
                failure = Some((i + 1, CniError::new(DECODE, msg)));
                break;
            }
        }
    }
    let Some((started, err)) = failure else {
        let result = prev.unwrap_or_else(|| json!({ "cniVersion": list.version.as_str() }));
        return Ok(result);
    };
    let netns = rec.netns_path.clone();
    match run_del(ctx, rec, &list, &caps, started, None, &netns) {
        Ok(()) => rec.cni.mut_or_insert_default().released = true,
        Err(e) => log::warn!(
            "{}: DEL after the failed ADD: {}",
            attachment_key(rec),
            e.chain()
        ),
    }
    Err(plugin_error(&rec.network, err))
}

/// Fills `rec` from the chain's final result: the pod interface's MAC and MTU, its addresses
/// and routes, the host-side interface, and the cached result itself.
pub(crate) fn record_result(rec: &mut AttachmentRecord, value: &Value) -> Result<()> {
    let result = CniResult::parse(value).map_err(|e| plugin_error(&rec.network, e))?;
    let pod = result.pod_interface(&rec.ifname);
    if let Some((_, iface)) = pod {
        if crate::model::MacAddr::parse(&iface.mac).is_ok() {
            rec.mac = iface.mac.to_ascii_lowercase();
        }
        if let Some(mtu) = iface.mtu {
            rec.mtu = mtu;
        }
    }
    let pod_index = pod.map(|(i, _)| i);
    rec.ips = result
        .ips
        .iter()
        .filter(|ip| ip.interface.is_none() || ip.interface == pod_index)
        .map(|ip| IpRecord {
            address: ip.address.to_string(),
            gateway: ip.gateway.map(|g| g.to_string()).unwrap_or_default(),
            ..Default::default()
        })
        .collect();
    rec.routes = result
        .routes
        .iter()
        .map(|r| RouteRecord {
            dst: r.dst.to_string(),
            gateway: r.gw.map(|g| g.to_string()).unwrap_or_default(),
            mtu: r.mtu.unwrap_or(0),
            scope: match r.scope {
                Some(253) => RouteScope::Link,
                Some(254) => RouteScope::Host,
                _ => RouteScope::Universe,
            }
            .as_str()
            .to_owned(),
            table: r.table.unwrap_or(MAIN_TABLE),
            metric: r.priority.unwrap_or(0),
            ..Default::default()
        })
        .collect();
    let host_interface = result
        .interfaces
        .iter()
        .rev()
        .find(|i| i.sandbox.is_empty())
        .map(|i| i.name.clone())
        .unwrap_or_default();
    let cni = rec.cni.mut_or_insert_default();
    cni.host_interface = host_interface;
    cni.result = value.to_string();
    Ok(())
}

/// Runs the DEL chain of `rec` in reverse, each plugin getting the cached result (0.4.0 and
/// later) — or none when ADD never finished; CNI_NETNS is left empty when the recorded netns is
/// gone, as the spec allows. The first failure stops it, so a retry starts from the same state.
/// Nothing runs when a failed ADD's DEL already did.
pub(crate) fn del(ctx: &Context, rec: &AttachmentRecord) -> Result<()> {
    let cni = cni_of(rec)?;
    if cni.released {
        return Ok(());
    }
    let list = list_of(rec, cni)?;
    let caps = caps_of(rec, cni)?;
    let prev: Option<Value> = if list.version.has_check() && !cni.result.is_empty() {
        serde_json::from_str(&cni.result).ok()
    } else {
        None
    };
    let netns_alive =
        crate::netns::recorded::still_there(&rec.netns_path, rec.netns_dev, rec.netns_ino)
            .is_some();
    let netns = if netns_alive {
        rec.netns_path.as_str()
    } else {
        ""
    };
    run_del(
        ctx,
        rec,
        &list,
        &caps,
        list.plugins.len(),
        prev.as_ref(),
        netns,
    )?;
    log::debug!("{}: cni DEL chain ran", attachment_key(rec));
    Ok(())
}

/// DEL on the first `count` plugins of `list`, last first; the first failure stops it.
fn run_del(
    ctx: &Context,
    rec: &AttachmentRecord,
    list: &ConfList,
    caps: &Map<String, Value>,
    count: usize,
    prev: Option<&Value>,
    netns: &str,
) -> Result<()> {
    let cni = cni_of(rec)?;
    let inv = Invocation {
        verb: Verb::Del,
        container_id: &rec.sandbox_id,
        netns,
        ifname: &rec.ifname,
        args: &cni.args,
    };
    for i in (0..count.min(list.plugins.len())).rev() {
        let conf = list.plugin_config(i, caps, prev);
        ctx.cni
            .run(list.plugin_type(i), &inv, &conf)
            .map_err(|e| plugin_error(&rec.network, e))?;
    }
    Ok(())
}

/// The CHECK verb (0.4.0 lists and later, unless `disableCheck`) on every plugin in order,
/// with ADD's environment and the cached result; the first failure is returned.
pub(crate) fn check(ctx: &Context, rec: &AttachmentRecord) -> Result<()> {
    let cni = cni_of(rec)?;
    let list = list_of(rec, cni)?;
    if !list.version.has_check() || list.disable_check {
        return Ok(());
    }
    let caps = caps_of(rec, cni)?;
    let prev: Option<Value> = serde_json::from_str(&cni.result).ok();
    let inv = Invocation {
        verb: Verb::Check,
        container_id: &rec.sandbox_id,
        netns: &rec.netns_path,
        ifname: &rec.ifname,
        args: &cni.args,
    };
    for i in 0..list.plugins.len() {
        let conf = list.plugin_config(i, &caps, prev.as_ref());
        ctx.cni
            .run(list.plugin_type(i), &inv, &conf)
            .map_err(|e| plugin_error(&rec.network, e))?;
    }
    Ok(())
}

/// The GC verb (1.1.0 lists without `disableGC`) on every plugin of `network`, with the
/// attachments still valid; every plugin runs, failures are returned.
pub(crate) fn gc(ctx: &Context, network: &Network, valid: &[(String, String)]) -> Vec<String> {
    let Some(cni) = network.cni() else {
        return Vec::new();
    };
    let list = &cni.list;
    if list.disable_gc || !list.version.has_status_and_gc() {
        return Vec::new();
    }
    let inv = Invocation::node_wide(Verb::Gc);
    let mut errors = Vec::new();
    for i in 0..list.plugins.len() {
        let conf = list.gc_config(i, valid);
        if let Err(e) = ctx.cni.run(list.plugin_type(i), &inv, &conf) {
            errors.push(format!("network {}: {e}", network.name));
        }
    }
    errors
}

/// Whether `network`'s plugins can service ADDs: STATUS on each (1.1.0 lists, stopping at the
/// first failure); for older lists, whether every plugin binary is there.
pub(crate) fn status(ctx: &Context, network: &Network) -> std::result::Result<(), CniError> {
    let Some(cni) = network.cni() else {
        return Ok(());
    };
    let list = &cni.list;
    let inv = Invocation::node_wide(Verb::Status);
    for i in 0..list.plugins.len() {
        let plugin = list.plugin_type(i);
        if !list.version.has_status_and_gc() {
            ctx.cni.find(plugin)?;
            continue;
        }
        ctx.cni
            .run(plugin, &inv, &list.plugin_config(i, &Map::new(), None))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
