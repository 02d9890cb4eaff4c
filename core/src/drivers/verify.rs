//! Verification of a pod interface as the kernel sees it, for Check (CNI CHECK): what knid recorded
//! must really be in the netns, since anything with CAP_NET_ADMIN there can change it.

use std::net::IpAddr;
use std::path::Path;

use ipnet::IpNet;
use knid_netops::{NetnsHandle, Rtnl};

use crate::model::MacAddr;

/// Checks that `ifname` exists in the netns at `netns_path`, is up, has `mac` (when given) and
/// holds every address of `addresses` with its prefix length. Other addresses are allowed: a
/// chained plugin may add some. The error names the first difference found.
pub(crate) fn pod_interface(
    netns_path: &Path,
    ifname: &str,
    mac: Option<[u8; 6]>,
    addresses: &[IpNet],
) -> Result<(), String> {
    let shown = netns_path.display();
    let ns = NetnsHandle::open(netns_path).map_err(|e| format!("netns {shown}: {e}"))?;
    let mut rtnl = Rtnl::open_in(&ns).map_err(|e| format!("netns {shown}: {e}"))?;
    let link = rtnl
        .link_by_name(ifname)
        .map_err(|e| format!("look up {ifname} in {shown}: {e}"))?
        .ok_or_else(|| format!("interface {ifname} does not exist in netns {shown}"))?;
    if let Some(want) = mac {
        if link.mac != Some(want) {
            return Err(format!(
                "mac of {ifname} is {}, not {}",
                link.mac
                    .map_or_else(|| "none".to_owned(), |m| MacAddr(m).to_string()),
                MacAddr(want)
            ));
        }
    }
    if !link.up {
        return Err(format!("interface {ifname} is down"));
    }
    let present: Vec<IpNet> = rtnl
        .addresses(Some(link.index))
        .map_err(|e| format!("list addresses of {ifname} in {shown}: {e}"))?
        .into_iter()
        .map(|a| a.net)
        .collect();
    if let Some(missing) = addresses.iter().find(|a| !present.contains(a)) {
        let global: Vec<String> = present
            .iter()
            .filter(|a| !is_link_local(a.addr()))
            .map(ToString::to_string)
            .collect();
        return Err(format!(
            "address {missing} is missing from {ifname} (it has [{}])",
            global.join(", ")
        ));
    }
    Ok(())
}

fn is_link_local(addr: IpAddr) -> bool {
    matches!(addr, IpAddr::V6(v6) if v6.segments()[0] & 0xffc0 == 0xfe80)
}

#[cfg(test)]
mod tests;
