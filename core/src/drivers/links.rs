//! Looking up the links a driver works on, by name, in the host or the sandbox netns.

use knid_netops::{NetnsHandle, Rtnl};

use crate::error::{Error, Result};

/// Fails when `ifname` already exists in the sandbox netns.
pub(crate) fn check_free(pod: &mut Rtnl, pod_ns: &NetnsHandle, ifname: &str) -> Result<()> {
    let taken = pod
        .link_by_name(ifname)
        .map_err(|e| Error::kernel(format!("look up {ifname} in netns"), e))?
        .is_some();
    if taken {
        return Err(Error::FailedPrecondition(format!(
            "interface {ifname} already exists in netns {}",
            pod_ns.path().display()
        )));
    }
    Ok(())
}

/// The index of link `name`, which must exist (`place` names the netns for the message).
pub(crate) fn index_of(rtnl: &mut Rtnl, name: &str, place: &str) -> Result<u32> {
    rtnl.link_index_by_name(name)
        .map_err(|e| Error::kernel(format!("look up {name} in {place}"), e))?
        .ok_or_else(|| Error::FailedPrecondition(format!("{name} vanished from {place}")))
}

/// The outcome of a change to link `name` that must find it (an RTM_SETLINK by name answering
/// whether the link was there): a kernel error says it was `doing`, and a link gone by now is
/// an error, "`name` vanished `when`".
pub(crate) fn found_or_vanished(
    found: knid_netops::Result<bool>,
    name: &str,
    doing: impl FnOnce() -> String,
    when: &str,
) -> Result<()> {
    if found.map_err(|e| Error::kernel(doing(), e))? {
        Ok(())
    } else {
        Err(Error::FailedPrecondition(format!("{name} vanished {when}")))
    }
}
