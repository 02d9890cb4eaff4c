//! macvlan and ipvlan interfaces: a child of the network's parent device, created in the host
//! netns under the attachment's deterministic host name (so an interrupted attach leaves
//! something recovery finds by name), then moved into the sandbox netns and renamed in one
//! request.

use knid_netops::link::{ChildKind, ChildSpec};
use knid_netops::{NetnsHandle, Rtnl};

use crate::config::Driver;
use crate::drivers::plan::Plan;
use crate::error::{Error, Result};
use crate::failpoint;
use crate::model::InterfaceResult;

/// Creates the child of `plan`, marks it with `mark` ([`super::mark`]) while it is in the host
/// netns, and moves it into `pod_ns` as its pod-side name. Returns its index there.
pub(crate) fn create(
    host: &mut Rtnl,
    pod: &mut Rtnl,
    pod_ns: &NetnsHandle,
    plan: &Plan,
    mark: &str,
) -> Result<u32> {
    let ifname = plan.ifname();
    let temp = plan.host_ifname();
    crate::drivers::check_free(pod, pod_ns, ifname)?;
    let (parent, kind) = match &plan.network.driver {
        Driver::Macvlan { parent, mode } => (parent, ChildKind::Macvlan(*mode)),
        Driver::Ipvlan { parent, mode } => (parent, ChildKind::Ipvlan(*mode)),
        _ => {
            return Err(Error::FailedPrecondition(format!(
                "network {} has no parent device",
                plan.network.name
            )))
        }
    };
    let parent_index = crate::drivers::index_of(host, parent, "the host netns")?;
    // A leftover under the temporary name is an interrupted attach of this very interface
    // (unless another knid's mark claims it).
    if super::mark::remove_leftover(host, temp, mark)? {
        log::warn!("replaced a stale {temp} left by an interrupted attach");
    }
    let spec = ChildSpec {
        name: temp.to_owned(),
        parent: parent_index,
        kind,
        mtu: Some(plan.result.mtu),
        // ipvlan and passthru macvlan children carry the parent's MAC.
        mac: (!plan.network.shares_parent_mac()).then_some(plan.result.mac.0),
    };
    host.create_child(&spec).map_err(|e| {
        let kind = plan.result.kind.as_str();
        if e.errno() == Some(libc::EOPNOTSUPP) {
            // "Unknown device type": the kernel was built without the driver.
            return Error::FailedPrecondition(format!(
                "this kernel has no {kind} support (CONFIG_{}); network {} cannot attach",
                kind.to_uppercase(),
                plan.network.name
            ));
        }
        if e.errno() == Some(libc::EINVAL)
            && spec.kind == ChildKind::Macvlan(knid_netops::MacvlanMode::Passthru)
        {
            // The kernel refuses a passthru child on a parent that has any macvlan already.
            return Error::FailedPrecondition(format!(
                "parent {parent} already has a macvlan; a passthru one must be alone on it \
                 (network {})",
                plan.network.name
            ));
        }
        Error::kernel(format!("create {kind} {temp} on {parent} for {ifname}"), e)
    })?;
    super::mark::set(host, temp, mark)?;
    failpoint::hit("attach.veth_created")?;
    let index = crate::drivers::index_of(host, temp, "the host netns")?;
    host.move_to_netns(index, pod_ns, Some(ifname))
        .map_err(|e| Error::kernel(format!("move {temp} into the netns as {ifname}"), e))?;
    crate::drivers::index_of(pod, ifname, "the sandbox netns")
}

/// Deletes the child from the sandbox netns, if it is there and is one (by kind).
pub(crate) fn remove(pod: &mut Rtnl, iface: &InterfaceResult) -> Result<()> {
    let ifname = iface.name.as_str();
    let kind = iface.kind.as_str();
    let Some(link) = pod
        .link_by_name(ifname)
        .map_err(|e| Error::kernel(format!("look up {ifname} in netns"), e))?
    else {
        return Ok(());
    };
    if link.kind.as_deref() != Some(kind) {
        log::warn!("{ifname} in the netns is not a {kind}; left alone");
        return Ok(());
    }
    pod.delete_link(link.index)
        .map(|_| ())
        .map_err(|e| Error::kernel(format!("delete {kind} {ifname} in netns"), e))
}
