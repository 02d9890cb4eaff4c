//! Taps for VM sandboxes (docs/architecture.md#networks-and-device-kinds).
//!
//! Beside a veth (Kata's tcfilter model): the veth end in the sandbox netns keeps the addresses
//! and routes; a persistent tap next to it gets the same MTU, and tc moves every frame between
//! them (ingress qdisc on both, matchall mirred egress redirect each way). The VMM opens the tap
//! by name inside the netns.
//!
//! DAN (Kata runtime-rs): the tap is the host link itself, in the host netns on the bridge;
//! [`crate::drivers::dan`] describes it to Kata.

use knid_netops::tap::{create_persistent_tap, TapSpec};
use knid_netops::{NetnsHandle, Rtnl};

use crate::drivers::plan::Plan;
use crate::error::{Error, Result};
use crate::failpoint;
use crate::model::TapInfo;

fn spec(tap: &TapInfo) -> TapSpec {
    TapSpec {
        name: tap.name.clone(),
        multi_queue: tap.multi_queue,
        vnet_hdr: tap.vnet_hdr,
        no_pi: tap.no_pi,
        owner: tap.owner_uid,
        group: tap.owner_gid,
    }
}

fn tap_of(plan: &Plan) -> Result<&TapInfo> {
    plan.result.tap.as_ref().ok_or_else(|| Error::Corrupt {
        key: plan.ifname().to_owned(),
        detail: "kind tap without tap settings".to_owned(),
    })
}

/// Creates the tap beside the pod's veth end (`veth_index`) and the redirects both ways.
pub(crate) fn create_in_pod(
    pod: &mut Rtnl,
    ns: &NetnsHandle,
    plan: &Plan,
    veth_index: u32,
) -> Result<()> {
    let tap = tap_of(plan)?;
    let name = &tap.name;
    create_persistent_tap(Some(ns), &spec(tap))
        .map_err(|e| Error::kernel(format!("create tap {name} in netns"), e))?;
    failpoint::hit("attach.tap_created")?;
    let index = crate::drivers::index_of(pod, name, "the sandbox netns")?;
    pod.set_mtu(index, plan.result.mtu)
        .map_err(|e| Error::kernel(format!("set {name} mtu"), e))?;
    pod.set_up(index)
        .map_err(|e| Error::kernel(format!("set {name} up"), e))?;
    for (from, to) in [(veth_index, index), (index, veth_index)] {
        pod.add_ingress_qdisc(from)
            .map_err(|e| Error::kernel(format!("add ingress qdisc on index {from}"), e))?;
        pod.add_redirect(from, to).map_err(|e| {
            Error::kernel(format!("redirect index {from} to {to} for tap {name}"), e)
        })?;
    }
    Ok(())
}

/// Creates the DAN tap: the host link, marked with `mark` ([`super::mark`]), on the bridge
/// (`bridge_index`), MTU set, up.
pub(crate) fn create_on_host(
    host: &mut Rtnl,
    plan: &Plan,
    bridge_index: u32,
    mark: &str,
) -> Result<()> {
    let tap = tap_of(plan)?;
    let name = &tap.name;
    create_persistent_tap(None, &spec(tap))
        .map_err(|e| Error::kernel(format!("create tap {name}"), e))?;
    super::mark::set(host, name, mark)?;
    failpoint::hit("attach.tap_created")?;
    let index = crate::drivers::index_of(host, name, "the host netns")?;
    host.set_mtu(index, plan.result.mtu)
        .map_err(|e| Error::kernel(format!("set {name} mtu"), e))?;
    host.set_controller(index, Some(bridge_index))
        .map_err(|e| Error::kernel(format!("put {name} on its bridge"), e))?;
    if plan.network.hairpin() {
        host.set_hairpin_by_name(name, true, None)
            .map_err(|e| Error::kernel(format!("set hairpin on {name}"), e))?;
    }
    host.set_up(index)
        .map_err(|e| Error::kernel(format!("set {name} up"), e))?;
    Ok(())
}

/// Deletes the tap beside a pod's veth (its qdiscs and filters go with it). Absent is fine.
pub(crate) fn remove_pod_tap(pod: &mut Rtnl, name: &str) -> Result<()> {
    pod.delete_link_by_name(name)
        .map(|_| ())
        .map_err(|e| Error::kernel(format!("delete tap {name} in netns"), e))
}
