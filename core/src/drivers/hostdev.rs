//! Host devices moved into a sandbox: found by name or PCI address at plan time (its name, MTU,
//! state and MAC recorded with the intent), moved in and renamed in one request; on detach,
//! rollback, GC or recovery moved back with its original name, MTU and state.

use knid_netops::{NetnsHandle, Rtnl};

use crate::drivers::plan::Plan;
use crate::error::{Error, Result};
use crate::failpoint;
use crate::model::InterfaceResult;

/// Moves the device of `plan` into `pod_ns` under its pod-side name, with the planned MTU.
/// Returns its index there.
pub(crate) fn move_in(
    host: &mut Rtnl,
    pod: &mut Rtnl,
    pod_ns: &NetnsHandle,
    plan: &Plan,
) -> Result<u32> {
    let ifname = plan.ifname();
    let device = plan.result.device.as_ref().ok_or_else(|| Error::Corrupt {
        key: ifname.to_owned(),
        detail: "kind host-device without a device".to_owned(),
    })?;
    let name = &device.original_name;
    crate::drivers::check_free(pod, pod_ns, ifname)?;
    let link = host
        .link_by_name(name)
        .map_err(|e| Error::kernel(format!("look up device {name}"), e))?
        .filter(|l| l.mac == Some(plan.result.mac.0))
        .ok_or_else(|| {
            Error::FailedPrecondition(format!(
                "device {name} left the host netns (or changed) since it was chosen"
            ))
        })?;
    host.move_to_netns(link.index, pod_ns, Some(ifname))
        .map_err(|e| Error::kernel(format!("move device {name} into the netns as {ifname}"), e))?;
    failpoint::hit("attach.device_moved")?;
    let index = crate::drivers::index_of(pod, ifname, "the sandbox netns")?;
    if plan.result.mtu != device.original_mtu {
        pod.set_mtu(index, plan.result.mtu)
            .map_err(|e| Error::kernel(format!("set {ifname} mtu"), e))?;
    }
    Ok(index)
}

/// Gives the device of `iface` back to the host: from the sandbox netns (`pod`, when it still
/// exists) under its original name, with its original MTU and state. When the netns is gone
/// the kernel returned a physical device to the host under its pod name; it is found by MAC and
/// renamed. Idempotent: a device already back only gets its MTU and state restored.
pub(crate) fn give_back(
    host: &mut Rtnl,
    pod: Option<&mut Rtnl>,
    iface: &InterfaceResult,
) -> Result<()> {
    let Some(device) = &iface.device else {
        return Ok(());
    };
    let name = &device.original_name;
    let mac = iface.mac.0;
    if let Some(pod) = pod {
        let inside = pod
            .link_by_name(iface.name.as_str())
            .map_err(|e| Error::kernel(format!("look up {} in netns", iface.name), e))?
            .filter(|l| l.mac == Some(mac));
        if let Some(link) = inside {
            let host_ns = NetnsHandle::current_thread()
                .map_err(|e| Error::kernel("open the host netns", e))?;
            pod.move_to_netns(link.index, &host_ns, Some(name))
                .map_err(|e| {
                    Error::kernel(format!("move {} back to the host as {name}", iface.name), e)
                })?;
        }
    }
    let link = match host
        .link_by_name(name)
        .map_err(|e| Error::kernel(format!("look up device {name}"), e))?
    {
        Some(link) => Some(link),
        None => {
            // Returned by the kernel when its netns died, under whatever name it had there.
            let found = host
                .links()
                .map_err(|e| Error::kernel("list host links", e))?
                .into_iter()
                .find(|l| l.mac == Some(mac) && l.kind.is_none());
            if let Some(link) = &found {
                host.set_down(link.index)
                    .and_then(|()| host.rename(link.index, name))
                    .map_err(|e| {
                        Error::kernel(format!("rename {} back to {name}", link.name), e)
                    })?;
            }
            found
        }
    };
    let Some(link) = link else {
        log::warn!(
            "device {name} of {} is gone (it went with its netns); nothing to give back",
            iface.name
        );
        return Ok(());
    };
    if link.mtu != device.original_mtu {
        host.set_mtu(link.index, device.original_mtu)
            .map_err(|e| Error::kernel(format!("restore {name} mtu"), e))?;
    }
    if device.was_up {
        host.set_up(link.index)
    } else {
        host.set_down(link.index)
    }
    .map_err(|e| Error::kernel(format!("restore {name} state"), e))?;
    log::debug!(
        "device {name} back on the host (mtu {})",
        device.original_mtu
    );
    Ok(())
}
