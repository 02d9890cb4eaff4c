//! The bridge of a `bridge` network: created with its gateway addresses, its ports reconnected,
//! its ifindex cached for attaches.
//!
//! A bridge is created at start-up and when a reload adds its network, and re-created by
//! SetupNodeNetwork (or a restart) if it was deleted behind knid's back — never by an attach:
//! the pods attached to it lost their ports with it, and only [`reconnect_ports`] brings them
//! back, so an attach that finds its bridge broken fails and says how to repair it.

use ipnet::IpNet;
use knid_netops::{sysctl, Link, Rtnl};

use crate::config::Network;
use crate::error::{Error, Result};
use crate::locks::LockExt;
use crate::model::BridgePorts;

/// Bridge ifindexes as last seen, so an attach does not look its bridge up every time. Only a
/// hint: attach retries a veth once with a fresh look-up when its creation fails on one, and
/// every failed attach and every network set-up drops them all.
#[derive(Debug, Default)]
pub(crate) struct BridgeIndexes(std::sync::Mutex<std::collections::HashMap<String, u32>>);

impl BridgeIndexes {
    fn map(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, u32>> {
        self.0.acquire()
    }

    pub(crate) fn get(&self, bridge: &str) -> Option<u32> {
        self.map().get(bridge).copied()
    }

    pub(crate) fn remember(&self, bridge: &str, index: u32) {
        self.map().insert(bridge.to_owned(), index);
    }

    pub(crate) fn clear(&self) {
        self.map().clear();
    }
}

/// What an attach's error on `network`'s bridge means: the kernel's EXFULL is the bridge's port
/// limit, a limit like a full pool's (ResourceExhausted), not a failure.
pub(crate) fn explain(network: &Network, e: Error) -> Error {
    match (&e, network.bridge()) {
        (Error::Kernel { source, .. }, Some(bridge)) if source.is_bridge_full() => {
            Error::BridgeFull {
                network: network.name.clone(),
                bridge: bridge.to_owned(),
                limit: BridgePorts::LIMIT,
            }
        }
        _ => e,
    }
}

/// A network's bridge as [`setup`] left it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BridgeSetUp {
    /// Its ifindex.
    pub index: u32,
    /// Whether it was missing when [`setup`] looked (and so has no port yet).
    pub created: bool,
}

/// Creates or validates the bridge of `network`, puts its gateway addresses on it and brings it
/// up. Idempotent.
pub(super) fn setup_bridge(rtnl: &mut Rtnl, network: &Network) -> Result<BridgeSetUp> {
    let Some(name) = network.bridge() else {
        return Err(Error::FailedPrecondition(format!(
            "network {} has no bridge",
            network.name
        )));
    };
    let mut created = false;
    let link = match rtnl
        .link_by_name(name)
        .map_err(|e| Error::kernel(format!("look up bridge {name}"), e))?
    {
        Some(link) => link,
        None => {
            let made_here = match rtnl.create_bridge(name, Some(network.mtu)) {
                Ok(()) => true,
                // Another knid thread or the admin created it in between: validated below.
                Err(e) if e.is_exists() => false,
                Err(e) => return Err(Error::kernel(format!("create bridge {name}"), e)),
            };
            let link = rtnl
                .link_by_name(name)
                .map_err(|e| Error::kernel(format!("look up bridge {name}"), e))?
                .ok_or_else(|| {
                    Error::FailedPrecondition(format!("bridge {name} vanished after creation"))
                })?;
            if made_here {
                // Without a fixed address the bridge takes its lowest port's MAC, which changes as
                // pods come and go and leaves neighbours with stale ARP entries (netavark#844).
                rtnl.set_mac(link.index, bridge_mac(name))
                    .map_err(|e| Error::kernel(format!("set bridge {name} mac"), e))?;
                // Likewise its MTU follows its lowest port's unless set after creation: the
                // kernel stops adjusting it only once its MTU is changed, so change it twice.
                // No port can notice: it has none yet.
                let dip = if network.mtu > 68 {
                    network.mtu - 1
                } else {
                    network.mtu + 1
                };
                for mtu in [dip, network.mtu] {
                    rtnl.set_mtu(link.index, mtu)
                        .map_err(|e| Error::kernel(format!("set bridge {name} mtu {mtu}"), e))?;
                }
            }
            created = true;
            link
        }
    };
    if link.kind.as_deref() != Some("bridge") {
        return Err(Error::FailedPrecondition(format!(
            "network {}: {name} exists but is a {} device, not a bridge",
            network.name,
            link.kind.as_deref().unwrap_or("plain")
        )));
    }
    if network
        .subnets
        .iter()
        .any(|(subnet, _)| subnet.addr().is_ipv6())
    {
        // The bridge's link-local address is the source of the neighbour solicitations for what
        // it forwards to its pods. While DAD holds it tentative (a second or two after the
        // first port comes up, longer on a loaded machine) the kernel sends none, and a first
        // contact from another node fails with EHOSTUNREACH once its three probes are spent.
        // No other host shares the bridge's segment to collide with; its gateways get NODAD
        // for the same reason.
        sysctl::skip_dad(name)
            .map_err(|e| Error::kernel(format!("turn off DAD on bridge {name}"), e))?;
    }
    if !created && link.mtu != network.mtu {
        // A bridge made before, whose MTU followed a port: back to the network's, for good.
        pin_mtu(rtnl, link.index, network)?;
    }
    for (subnet, gateway) in &network.subnets {
        let addr = IpNet::new(*gateway, subnet.prefix_len())
            .map_err(|e| Error::Config(format!("network {}: {e}", network.name)))?;
        rtnl.add_address(link.index, addr)
            .map_err(|e| Error::kernel(format!("add gateway {addr} to bridge {name}"), e))?;
    }
    if !link.up {
        rtnl.set_up(link.index)
            .map_err(|e| Error::kernel(format!("set bridge {name} up"), e))?;
    }
    Ok(BridgeSetUp {
        index: link.index,
        created,
    })
}

/// Sets bridge `index` of `network` to the network's MTU, which also stops the kernel from
/// lowering it to its smallest port's: a pod of a smaller MTU must not shrink everyone's. A no-op
/// when it already has it.
pub(crate) fn pin_mtu(rtnl: &mut Rtnl, index: u32, network: &Network) -> Result<()> {
    let name = network.bridge().unwrap_or_default();
    rtnl.set_mtu(index, network.mtu)
        .map_err(|e| Error::kernel(format!("keep bridge {name} at mtu {}", network.mtu), e))
}

/// Makes the host ends named `ports` ports of bridge `bridge` (ifindex `index`) again: the pods
/// attached to a bridge deleted behind knid's back lost their ports with it. A link gone, already
/// its port, or retired into the reaper's `reaper_group` (being detached) is left alone. Returns
/// how many went back.
pub(crate) fn reconnect_ports(
    rtnl: &mut Rtnl,
    bridge: &str,
    index: u32,
    ports: &[String],
    reaper_group: u32,
) -> Result<usize> {
    let mut reconnected = 0;
    for name in ports {
        let Some(link) = rtnl
            .link_by_name(name)
            .map_err(|e| Error::kernel(format!("look up {name}"), e))?
        else {
            continue;
        };
        if link.controller == Some(index) || link.group == reaper_group {
            continue;
        }
        match rtnl.set_controller(link.index, Some(index)) {
            Ok(()) => reconnected += 1,
            // Deleted in between (a rollback, the reaper).
            Err(e) if e.errno() == Some(libc::ENODEV) => {}
            Err(e) => {
                return Err(Error::kernel(
                    format!("put {name} back on bridge {bridge}"),
                    e,
                ))
            }
        }
    }
    Ok(reconnected)
}

/// The bridge `name` as found (`link`), if it can take ports; else why not: missing, not a
/// bridge, or down.
pub(super) fn usable_bridge(name: &str, link: Option<Link>) -> std::result::Result<Link, String> {
    match link {
        None => Err(format!("bridge {name} is missing")),
        Some(link) if link.kind.as_deref() != Some("bridge") => {
            Err(format!("{name} is not a bridge"))
        }
        Some(link) if !link.up => Err(format!("bridge {name} is down")),
        Some(link) => Ok(link),
    }
}

/// The ifindex of `network`'s bridge, for an attach: a bridge missing, not a bridge, or down is
/// [`Error::NodeNetwork`], never set up here (see the module docs).
pub(crate) fn bridge_for_attach(rtnl: &mut Rtnl, network: &Network) -> Result<u32> {
    let name = network.bridge().unwrap_or_default();
    let link = rtnl
        .link_by_name(name)
        .map_err(|e| Error::kernel(format!("look up bridge {name}"), e))?;
    usable_bridge(name, link)
        .map(|link| link.index)
        .map_err(|problem| Error::NodeNetwork {
            network: network.name.clone(),
            problem,
        })
}

/// A stable, locally administered unicast MAC for a bridge, derived from its name.
pub fn bridge_mac(name: &str) -> [u8; 6] {
    let hash = crate::drivers::names::stable_hash(&["bridge", name]).to_be_bytes();
    [0x02, hash[0], hash[1], hash[2], hash[3], hash[4]]
}
