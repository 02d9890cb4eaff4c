//! Verification of an attached interface as the kernel sees it: what knid recorded must really
//! be there, since anything with CAP_NET_ADMIN in the pod's netns (or the host's) can change it.
//! Check (CNI CHECK) and the reconciler's look at every attached interface share it, and both
//! name a [`Difference`] the same way.

use std::net::IpAddr;
use std::path::Path;

use ipnet::IpNet;
use knid_netops::nft::{PortMap, TableContents};
use knid_netops::{Link, NetnsHandle, Rtnl};

use crate::model::MacAddr;
use crate::node::nat::TABLE;

/// The first difference found between an attached interface's record and the kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Difference {
    /// The sandbox netns could not be opened or read.
    Unreadable(String),
    /// The link `ifname` is not in `place`; `renamed_to` names the link that now has its
    /// recorded MAC there, if one does.
    Missing {
        ifname: String,
        place: String,
        renamed_to: Option<String>,
    },
    /// The link `ifname` in `place` is administratively down.
    Down { ifname: String, place: String },
    /// The link `ifname` has another MAC than recorded (`found`, `None` for none).
    Mac {
        ifname: String,
        found: Option<[u8; 6]>,
        want: [u8; 6],
    },
    /// The recorded address `missing` is not on `ifname`, which has the global ones `present`.
    Address {
        ifname: String,
        missing: IpNet,
        present: Vec<IpNet>,
    },
    /// The tc redirect that moves every frame from `from` to `to` in `place` is gone (with its
    /// ingress qdisc, or on its own).
    Redirect {
        from: String,
        to: String,
        place: String,
    },
    /// A recorded bandwidth limit on the host link `ifname` is not in force: `detail` says
    /// which part (a tbf gone or at another rate, the IFB or its redirect gone).
    Bandwidth { ifname: String, detail: String },
    /// A host-port element of the sandbox's mappings, towards this (its first) interface, is
    /// not in knid's nf_tables table; `table_gone` when the table itself does not exist.
    HostPort { element: PortMap, table_gone: bool },
    /// The source guard of the host link `ifname` is missing or not the one its record calls
    /// for (`detail` says how).
    Antispoof { ifname: String, detail: String },
}

impl Difference {
    /// What kind of difference, for a metric label and a short report: `unreadable`,
    /// `missing`, `renamed`, `down`, `mac`, `address`, `redirect`, `bandwidth`, `hostport` or
    /// `antispoof`.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Self::Unreadable(_) => "unreadable",
            Self::Missing {
                renamed_to: None, ..
            } => "missing",
            Self::Missing { .. } => "renamed",
            Self::Down { .. } => "down",
            Self::Mac { .. } => "mac",
            Self::Address { .. } => "address",
            Self::Redirect { .. } => "redirect",
            Self::Bandwidth { .. } => "bandwidth",
            Self::HostPort { .. } => "hostport",
            Self::Antispoof { .. } => "antispoof",
        }
    }
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unreadable(why) => f.write_str(why),
            Self::Missing {
                ifname,
                place,
                renamed_to: None,
            } => write!(f, "interface {ifname} does not exist in {place}"),
            Self::Missing {
                ifname,
                place,
                renamed_to: Some(now),
            } => write!(
                f,
                "interface {ifname} does not exist in {place}: it was renamed to {now}"
            ),
            Self::Down { ifname, place } => write!(f, "interface {ifname} in {place} is down"),
            Self::Mac {
                ifname,
                found,
                want,
            } => write!(
                f,
                "mac of {ifname} is {}, not {}",
                found.map_or_else(|| "none".to_owned(), |m| MacAddr(m).to_string()),
                MacAddr(*want)
            ),
            Self::Address {
                ifname,
                missing,
                present,
            } => {
                let present: Vec<String> = present.iter().map(ToString::to_string).collect();
                write!(
                    f,
                    "address {missing} is missing from {ifname} (it has [{}])",
                    present.join(", ")
                )
            }
            Self::Redirect { from, to, place } => write!(
                f,
                "the tc redirect of every frame from {from} to {to} in {place} is gone"
            ),
            Self::Bandwidth { ifname, detail } => {
                write!(
                    f,
                    "the bandwidth limit on {ifname} is not in force: {detail}"
                )
            }
            Self::Antispoof { ifname, detail } => write!(
                f,
                "{detail} in nf_tables table netdev {}",
                knid_netops::nft::guard_table(crate::node::antispoof::TABLE, ifname)
            ),
            Self::HostPort {
                element,
                table_gone: false,
            } => write!(
                f,
                "host port {element} is missing from nf_tables table inet {TABLE}"
            ),
            Self::HostPort {
                element,
                table_gone: true,
            } => write!(
                f,
                "host port {element} is missing: nf_tables table inet {TABLE} does not exist"
            ),
        }
    }
}

/// The MAC [`pod_interface`] compares (`want`, none: any) and the one it looks for among the
/// other links when the interface is missing (`recorded`, to report it renamed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct MacCheck {
    pub(crate) want: Option<[u8; 6]>,
    pub(crate) recorded: Option<[u8; 6]>,
}

/// Checks that `ifname` exists in the netns at `netns_path`, is up, has `mac.want` (when given)
/// and holds every address of `addresses` with its prefix length. Other addresses are allowed:
/// a chained plugin may add some. Names the first difference found; a missing link whose
/// recorded MAC another link of the netns now has is reported renamed.
///
/// Cost: opening the netns and a socket in it, one link request and one address dump of the
/// link (a link dump more only when the link is missing).
pub(crate) fn pod_interface(
    netns_path: &Path,
    ifname: &str,
    mac: MacCheck,
    addresses: &[IpNet],
) -> Result<(), Difference> {
    let shown = netns_path.display();
    let unreadable =
        |e: &dyn std::fmt::Display| Difference::Unreadable(format!("netns {shown}: {e}"));
    let ns = NetnsHandle::open(netns_path).map_err(|e| unreadable(&e))?;
    let mut rtnl = Rtnl::open_in(&ns).map_err(|e| unreadable(&e))?;
    let place = || format!("netns {shown}");
    let Some(link) = rtnl
        .link_by_name(ifname)
        .map_err(|e| unreadable(&format_args!("look up {ifname}: {e}")))?
    else {
        let renamed_to = match mac.recorded {
            Some(want) => rtnl
                .links()
                .map_err(|e| unreadable(&format_args!("list links: {e}")))?
                .into_iter()
                .find(|l| l.mac == Some(want))
                .map(|l| l.name),
            None => None,
        };
        return Err(Difference::Missing {
            ifname: ifname.to_owned(),
            place: place(),
            renamed_to,
        });
    };
    if let Some(want) = mac.want {
        if link.mac != Some(want) {
            return Err(Difference::Mac {
                ifname: ifname.to_owned(),
                found: link.mac,
                want,
            });
        }
    }
    if !link.up {
        return Err(Difference::Down {
            ifname: ifname.to_owned(),
            place: place(),
        });
    }
    let present: Vec<IpNet> = rtnl
        .addresses(Some(link.index))
        .map_err(|e| unreadable(&format_args!("list addresses of {ifname}: {e}")))?
        .into_iter()
        .map(|a| a.net)
        .collect();
    if let Some(missing) = addresses.iter().find(|a| !present.contains(a)) {
        return Err(Difference::Address {
            ifname: ifname.to_owned(),
            missing: *missing,
            present: present
                .into_iter()
                .filter(|a| !is_link_local(a.addr()))
                .collect(),
        });
    }
    Ok(())
}

/// Checks a tap beside a pod's veth end (the tcfilter model): `tap` exists in the netns at
/// `netns_path` and is up, and the tc redirects move every frame from `veth` to `tap` and back.
/// Without them the guest is cut off while the netns answers in its place.
///
/// Cost: opening the netns and a socket in it, two link requests and two filter dumps.
pub(crate) fn pod_tap(netns_path: &Path, veth: &str, tap: &str) -> Result<(), Difference> {
    let shown = netns_path.display();
    let unreadable =
        |e: &dyn std::fmt::Display| Difference::Unreadable(format!("netns {shown}: {e}"));
    let ns = NetnsHandle::open(netns_path).map_err(|e| unreadable(&e))?;
    let mut rtnl = Rtnl::open_in(&ns).map_err(|e| unreadable(&e))?;
    let place = || format!("netns {shown}");
    let mut link = |name: &str| -> Result<Link, Difference> {
        rtnl.link_by_name(name)
            .map_err(|e| unreadable(&format_args!("look up {name}: {e}")))?
            .ok_or_else(|| Difference::Missing {
                ifname: name.to_owned(),
                place: place(),
                renamed_to: None,
            })
    };
    let (veth_link, tap_link) = (link(veth)?, link(tap)?);
    if !tap_link.up {
        return Err(Difference::Down {
            ifname: tap.to_owned(),
            place: place(),
        });
    }
    for ((from, from_index), (to, to_index)) in [
        ((veth, veth_link.index), (tap, tap_link.index)),
        ((tap, tap_link.index), (veth, veth_link.index)),
    ] {
        let redirects = rtnl
            .redirects(from_index)
            .map_err(|e| unreadable(&format_args!("list the tc filters of {from}: {e}")))?;
        if !redirects.iter().any(|r| r.to == to_index && r.redirect) {
            return Err(Difference::Redirect {
                from: from.to_owned(),
                to: to.to_owned(),
                place: place(),
            });
        }
    }
    Ok(())
}

/// Checks that the host link `name`, as the caller found it in the host netns (`link`, `None`
/// when there is none), is there and up.
pub(crate) fn host_link(name: &str, link: Option<&Link>) -> Result<(), Difference> {
    let place = || "the host netns".to_owned();
    match link {
        None => Err(Difference::Missing {
            ifname: name.to_owned(),
            place: place(),
            renamed_to: None,
        }),
        Some(link) if !link.up => Err(Difference::Down {
            ifname: name.to_owned(),
            place: place(),
        }),
        Some(_) => Ok(()),
    }
}

/// Checks that every element of `expected` (a sandbox's host ports) is in knid's table as read
/// back (`table`, `None` when it does not exist); names the first one missing.
pub(crate) fn host_ports(
    expected: &[PortMap],
    table: Option<&TableContents>,
) -> Result<(), Difference> {
    let missing = expected
        .iter()
        .find(|e| table.is_none_or(|t| !t.port_maps.contains(e)));
    match missing {
        Some(element) => Err(Difference::HostPort {
            element: *element,
            table_gone: table.is_none(),
        }),
        None => Ok(()),
    }
}

fn is_link_local(addr: IpAddr) -> bool {
    matches!(addr, IpAddr::V6(v6) if v6.segments()[0] & 0xffc0 == 0xfe80)
}

#[cfg(test)]
mod tests;

/// The source guard `want` (an attached interface's, see [`crate::node::antispoof`]) against the
/// guard chains `have` (`None`: the table does not exist).
pub(crate) fn antispoof(
    want: &knid_netops::nft::Guard,
    have: Option<&[knid_netops::nft::GuardChain]>,
) -> Result<(), Difference> {
    match crate::node::antispoof::difference(want, have) {
        Some(detail) => Err(Difference::Antispoof {
            ifname: want.device.clone(),
            detail,
        }),
        None => Ok(()),
    }
}
