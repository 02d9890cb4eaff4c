//! knid's answers in CNI terms: a `Sandbox` as a CNI result (written by
//! [`CniResult::to_json`] in the requested version), and a failed call as a CNI error code.

use std::net::IpAddr;
use std::path::Path;

use ipnet::IpNet;
use knid_core::cni::error::{
    INTERNAL, INVALID_CONFIG, NOT_AVAILABLE, TRY_AGAIN, UNKNOWN_CONTAINER,
};
use knid_core::cni::result::{Dns, Interface, IpConfig, Route};
use knid_core::cni::{CniError, CniResult};
use knid_core::error::chain;
use knid_core::MAIN_TABLE;
use ttrpc::Code;

use super::codes::{ALREADY_EXISTS, FAILED_PRECONDITION, RESOURCE_EXHAUSTED};
use crate::client::oneshot::OneshotError;
use crate::errors::code_name;
use crate::pb;

/// Kinds whose `host_ifname` names the parent device rather than a link knid created.
const PARENT_KINDS: [&str; 2] = ["macvlan", "ipvlan"];

/// The CNI result of interface `iface` of `sandbox`: the host end (when knid created one: the
/// `bandwidth` plugin finds the pod's veth peer among the sandbox-less interfaces), then the pod
/// interface in `netns`, its addresses and routes, and the sandbox's DNS. An interface of a
/// `cni` network answers with its plugins' own result (every interface they reported).
pub fn from_sandbox(
    sandbox: &pb::Sandbox,
    iface: &pb::InterfaceResult,
    netns: &str,
) -> Result<CniResult, CniError> {
    if iface.kind == "cni" && !iface.cni_result.is_empty() {
        let value: serde_json::Value = serde_json::from_str(&iface.cni_result)
            .map_err(|_| bad_answer("cni_result", &iface.cni_result))?;
        return CniResult::parse(&value);
    }
    let mut interfaces = Vec::with_capacity(2);
    if !iface.host_ifname.is_empty() && !PARENT_KINDS.contains(&iface.kind.as_str()) {
        // Its MAC is not in knid's answer, and looking it up would cost a netlink round trip
        // on every ADD for a field no consumer needs.
        interfaces.push(Interface {
            name: iface.host_ifname.clone(),
            ..Default::default()
        });
    }
    let pod_index = interfaces.len();
    interfaces.push(Interface {
        name: iface.name.clone(),
        mac: iface.mac.clone(),
        mtu: (iface.mtu != 0).then_some(iface.mtu),
        sandbox: netns.to_owned(),
        ..Default::default()
    });
    let ips = iface
        .ips
        .iter()
        .enumerate()
        .map(|(k, ip)| {
            Ok(IpConfig {
                address: cidr(&format!("ips[{k}].address"), &ip.address)?,
                gateway: address(&format!("ips[{k}].gateway"), &ip.gateway)?,
                interface: Some(pod_index),
            })
        })
        .collect::<Result<Vec<_>, CniError>>()?;
    let routes = iface
        .routes
        .iter()
        .enumerate()
        .map(|(k, r)| {
            Ok(Route {
                dst: cidr(&format!("routes[{k}].dst"), &r.dst)?,
                gw: address(&format!("routes[{k}].gateway"), &r.gateway)?,
                mtu: (r.mtu != 0).then_some(r.mtu),
                advmss: None,
                priority: (r.metric != 0).then_some(r.metric),
                // The main table is what a route without `table` means.
                table: (r.table != 0 && r.table != MAIN_TABLE).then_some(r.table),
                scope: match r.scope.as_str() {
                    "link" => Some(253),
                    "host" => Some(254),
                    _ => None,
                },
            })
        })
        .collect::<Result<Vec<_>, CniError>>()?;
    let dns = sandbox
        .dns
        .as_ref()
        .map(|d| Dns {
            nameservers: d.servers.clone(),
            domain: d.domain.clone(),
            search: d.searches.clone(),
            options: d.options.clone(),
        })
        .unwrap_or_default();
    Ok(CniResult {
        interfaces,
        ips,
        routes,
        dns,
    })
}

fn bad_answer(field: &str, text: &str) -> CniError {
    CniError::new(
        INTERNAL,
        format!("knid answered an invalid {field}: {text:?}"),
    )
}

fn cidr(field: &str, text: &str) -> Result<IpNet, CniError> {
    text.parse().map_err(|_| bad_answer(field, text))
}

fn address(field: &str, text: &str) -> Result<Option<IpAddr>, CniError> {
    if text.is_empty() {
        return Ok(None);
    }
    text.parse().map(Some).map_err(|_| bad_answer(field, text))
}

/// Which call failed, for the code of an unreachable knid: STATUS reports "not available"
/// (50); every other verb "try again later" (11), never success.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallKind {
    /// ADD, DEL, CHECK, GC.
    Operation,
    /// STATUS.
    Status,
}

/// A failed call to knid as a CNI error (mapping in the module doc of `cni_plugin`).
pub fn call_error(err: &OneshotError, socket: &Path, kind: CallKind) -> CniError {
    let unavailable = if kind == CallKind::Status {
        NOT_AVAILABLE
    } else {
        TRY_AGAIN
    };
    if err.is_unreachable() {
        return CniError::new(
            unavailable,
            format!(
                "knid is unreachable at {}: {}",
                socket.display(),
                chain(err)
            ),
        );
    }
    let OneshotError::Rpc { code, message } = err else {
        return CniError::new(INTERNAL, format!("knid call failed: {}", chain(err)));
    };
    let cni_code = match *code {
        Code::UNAVAILABLE | Code::DEADLINE_EXCEEDED => unavailable,
        Code::INVALID_ARGUMENT => INVALID_CONFIG,
        Code::NOT_FOUND => UNKNOWN_CONTAINER,
        Code::FAILED_PRECONDITION => FAILED_PRECONDITION,
        Code::RESOURCE_EXHAUSTED => RESOURCE_EXHAUSTED,
        Code::ALREADY_EXISTS => ALREADY_EXISTS,
        _ => INTERNAL,
    };
    CniError::new(cni_code, format!("knid: {}: {message}", code_name(*code)))
}

#[cfg(test)]
mod tests;
