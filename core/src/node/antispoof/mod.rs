//! Source-address guards of the pods' host links (`netdev knid-NN`, see [`knid_netops::nft::Guard`]
//! and docs/architecture.md#source-address-guards): installed by an attach before the link
//! exists, removed with the link where an operation deletes it at once, and by the reaper once
//! it deleted a detached one (a Detach leaves the guard on the retired link), rebuilt from the
//! records with the
//! networks (start-up, reload, SetupNodeNetwork), compared with the records by Check and the
//! reconciler, and counted in the metrics.

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

use ipnet::IpNet;
use knid_netops::nft::{DropReason, Guard, GuardChain, Nft};
use knid_store::{AttachmentRecord, Store};

use super::nat::host_nft;
use crate::config::Network;
use crate::error::{Error, Result};
use crate::lifecycle;
use crate::locks::LockExt;
use crate::model::{AttachmentState, InterfaceKind, InterfaceResult, MacAddr};
use crate::records::{attachment_from_record, corrupt};
pub(crate) use ahead::Listing;
use shared_commit::SharedCommit;

mod ahead;
mod shared_commit;

/// The prefix of knid's guard tables, family `netdev`: `knid-00` to `knid-63`
/// ([`knid_netops::nft::guard_table`]; the `inet knid` table is NAT's).
pub const TABLE: &str = "knid";

thread_local! {
    /// The calling thread's socket to nf_tables (knid's threads stay in the host netns), kept
    /// open: the kernel makes the close of one that just deleted a chain wait for an RCU grace
    /// period (NETLINK_URELEASE flushes nf_tables' destroy work), ~10 ms that every detach paid
    /// with a socket per guard (benches/antispoof.rs).
    static NFT: RefCell<Option<Nft>> = const { RefCell::new(None) };
}

/// Runs `op` on the calling thread's nf_tables socket. A thread that has none opens one, and
/// keeps it for its next operations ([`Socket::Keep`]: an attach's or a detach's, whose close
/// would wait) or closes it again ([`Socket::Pass`]: a read, or a rare rebuild), so a thread that
/// lives on (knid's main thread, which answers metrics scrapes, runs the reconciler and starts
/// knid) holds no socket for them. A socket an operation failed on is closed (its answers may
/// be out of step).
fn with_nft<T>(
    socket: Socket,
    context: impl FnOnce() -> String,
    op: impl FnOnce(&mut Nft) -> knid_netops::Result<T>,
) -> Result<T> {
    NFT.with(|cell| {
        let mut slot = cell.borrow_mut();
        let result = match (slot.as_mut(), socket) {
            (Some(nft), _) => op(nft),
            (None, Socket::Keep) => op(slot.insert(host_nft()?)),
            (None, Socket::Pass) => op(&mut host_nft()?),
        };
        if result.is_err() {
            *slot = None;
        }
        result.map_err(|e| Error::kernel(context(), e))
    })
}

/// Whether a thread keeps the socket [`with_nft`] opened for it.
#[derive(Clone, Copy)]
enum Socket {
    Keep,
    Pass,
}

/// The guard an interface gets on `network`: for the veth and tap kinds (their host link is
/// knid's, and every frame of the pod enters the node through it) when the network guards.
pub(crate) fn guard_of(network: &Network, iface: &InterfaceResult) -> Option<Guard> {
    guard(
        network,
        iface.kind,
        iface.mac,
        &iface.host_ifname,
        iface.ips.iter().map(|ip| ip.address.addr()),
    )
}

/// [`guard_of`] the interface of `rec`, a usable record (one [`attachment_from_record`]
/// converts), read from the few fields a guard needs: start-up's rebuild builds thousands, and
/// a whole conversion of each cost more than reading and comparing all the chains.
fn guard_of_usable(network: &Network, rec: &AttachmentRecord) -> Option<Guard> {
    let kind = InterfaceKind::parse(&rec.kind).ok()?;
    // A usable record lacks its MAC only for a cni interface, which is never guarded.
    let mac = MacAddr::parse(&rec.mac).ok()?;
    let addresses = rec
        .ips
        .iter()
        .map(|ip| ip.address.parse::<IpNet>().map(|n| n.addr()));
    guard(network, kind, mac, &rec.host_ifname, addresses.flatten())
}

fn guard(
    network: &Network,
    kind: InterfaceKind,
    mac: MacAddr,
    host_ifname: &str,
    addresses: impl Iterator<Item = IpAddr>,
) -> Option<Guard> {
    let guarded = matches!(kind, InterfaceKind::Veth | InterfaceKind::Tap);
    if !guarded || !network.antispoof || mac == MacAddr::UNKNOWN {
        return None;
    }
    Some(Guard {
        device: host_ifname.to_owned(),
        mac: mac.0,
        addresses: addresses.collect(),
    })
}

/// The guard the record `rec` calls for on its `network` (as configured now), if any.
pub(crate) fn expected(network: Option<&Network>, rec: &AttachmentRecord) -> Result<Option<Guard>> {
    let Some(network) = network else {
        return Ok(None);
    };
    Ok(guard_of(network, &attachment_from_record(rec)?))
}

/// A device name no link has, for [`hooks_by_name`]'s probe.
const PROBE_DEVICE: &str = "kn-hookprobe";

/// Whether this kernel hooks a netdev chain on a device name no link has yet (Linux 6.16 on),
/// probed once: a guard for a missing device installed and removed. Where it does, an attach
/// installs the guard before the host link exists; where it does not (the kernel refuses the
/// chain), right after the link is created, while the pod's end is still down and no frame
/// can have passed (`drivers::create`). Failpoint `antispoof.probe` (error) plays an older
/// kernel.
pub(crate) fn hooks_by_name() -> bool {
    static HOOKS_BY_NAME: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HOOKS_BY_NAME.get_or_init(|| {
        let by_name = probe();
        if by_name {
            log::info!("antispoof: the kernel hooks a guard before its link exists");
        } else {
            log::warn!(
                "antispoof: this kernel does not hook a netdev chain on a device that does not \
                 exist yet (Linux 6.16 does): each guard goes in right after its link is \
                 created, before the pod's end comes up"
            );
        }
        by_name
    })
}

fn probe() -> bool {
    if crate::failpoint::hit("antispoof.probe").is_err() {
        return false;
    }
    let guard = Guard {
        device: PROBE_DEVICE.to_owned(),
        mac: [0x02, 0, 0, 0, 0, 1],
        addresses: Vec::new(),
    };
    match install(&guard) {
        Ok(()) => {
            if let Err(e) = with_nft(
                Socket::Keep,
                || "remove the probe guard".to_owned(),
                |nft| nft.remove_guards(TABLE, &[PROBE_DEVICE]),
            ) {
                log::warn!("antispoof: {}", e.chain());
            }
            true
        }
        Err(e) => {
            log::debug!("antispoof: probe: {}", e.chain());
            false
        }
    }
}

/// Held while a guard is installed ([`install`]), the table rebuilt ([`apply`]) or a reaped
/// attachment's guard removed ([`remove_reaped`]): a chain is named after its host link, which
/// a re-attach of the same sandbox and interface names again, so the reaper's removal of the
/// old attachment's chain must see whether the new one's record is there and act before its
/// guard goes in or after, never between.
static GUARDING: Mutex<()> = Mutex::new(());

/// Installs `guard` in one transaction (before its link exists where the kernel allows it,
/// [`hooks_by_name`]). The attachment's record is written before: [`remove_reaped`] and
/// [`apply`] find it.
/// Guards that wait for [`GUARDING`] together are installed in one transaction
/// ([`shared_commit`]).
pub(crate) fn install(guard: &Guard) -> Result<()> {
    static INSTALLS: SharedCommit<Guard> = SharedCommit::new();
    INSTALLS.run(&GUARDING, guard.clone(), |guards| {
        with_nft(
            Socket::Keep,
            || {
                let names: Vec<&str> = guards.iter().map(|g| g.device.as_str()).collect();
                format!("guard {}", names.join(", "))
            },
            |nft| nft.add_guards(TABLE, guards),
        )
    })
}

/// Removes, in one transaction, the guards of `atts`, attachments the reaper has deleted the
/// links of: once its link is gone a chain is taken out without unhooking a device (~0.01 ms
/// against ~0.15 ms with its link there, docs/performance.md#source-address-guards), so a
/// Detach leaves a retired link's guard for this. A guard whose name a newer attachment of the
/// same sandbox and interface holds (a re-attach that took the old one over) stays: it is that
/// attachment's. One whose record cannot be read stays too, until the next rebuild.
pub(crate) fn remove_reaped(
    store: &Store,
    networks: &HashMap<String, Network>,
    atts: &[AttachmentRecord],
) -> Result<()> {
    let _guarding = GUARDING.acquire();
    let mut names = Vec::new();
    for att in atts.iter().filter(|a| may_be_guarded(networks, a)) {
        let held = match store.attachment(&att.sandbox_id, &att.ifname) {
            Ok(Some(now)) => now.host_ifname == att.host_ifname && is_live(&now),
            Ok(None) => false,
            Err(e) => {
                log::warn!(
                    "{}: guard {} kept, the record cannot be read: {e}",
                    att.sandbox_id,
                    att.host_ifname
                );
                true
            }
        };
        if !held {
            names.push(att.host_ifname.as_str());
        }
    }
    remove_chains(&names)
}

/// Whether `rec` is an attachment that keeps a guard: Pending, Provisioning or Attached.
fn is_live(rec: &AttachmentRecord) -> bool {
    matches!(
        lifecycle::state_of(rec),
        Ok(AttachmentState::Pending | AttachmentState::Provisioning | AttachmentState::Attached)
    )
}

/// Removes the guards of `atts` (any there is; none is fine) in one transaction.
pub(crate) fn remove(networks: &HashMap<String, Network>, atts: &[AttachmentRecord]) -> Result<()> {
    let names: Vec<&str> = atts
        .iter()
        .filter(|a| may_be_guarded(networks, a))
        .map(|a| a.host_ifname.as_str())
        .collect();
    remove_chains(&names)
}

/// Whether `att` may have a guard: not a cni interface, on a network that guards as configured
/// now (`networks`). The guards of a network configured not to, or not at all, went with the
/// rebuild of the reload that made it so ([`apply`]), so asking the kernel to remove them again
/// would only be refused for a table that no guard ever needed.
fn may_be_guarded(networks: &HashMap<String, Network>, att: &AttachmentRecord) -> bool {
    !crate::records::is_cni(att) && networks.get(&att.network).is_some_and(|n| n.antispoof)
}

/// Removes the guard chains `names` in one transaction; none asks nothing of the kernel.
fn remove_chains(names: &[&str]) -> Result<()> {
    if names.is_empty() {
        return Ok(());
    }
    log::debug!("antispoof: removing the guards of {}", names.join(", "));
    with_nft(
        Socket::Keep,
        || format!("remove the source guards {}", names.join(", ")),
        |nft| nft.remove_guards(TABLE, names),
    )
}

/// Rebuilds the table: a guard for every live attachment (Pending, Provisioning, Attached) on
/// `networks` that calls for one, and no other chain; a chain already as wanted is left as it
/// is (a restart with every pod guarded changes nothing). The chains are listed before the
/// records are read, so a guard an attach installs meanwhile (after writing its record) is
/// never taken for a stale one; `recorded`, the usable records read earlier, and `listed`,
/// the chains [`Listing`] took meanwhile, are given only at start-up, before anything can
/// attach, when recovery changed nothing.
pub(crate) fn apply(
    nft: &mut Nft,
    store: &Store,
    networks: &HashMap<String, Network>,
    recorded: Option<Vec<AttachmentRecord>>,
    listed: Option<Listing>,
) -> Result<()> {
    let _guarding = GUARDING.acquire();
    let found = match listed.and_then(Listing::join) {
        Some(found) => found,
        None => nft
            .guard_chains(TABLE)
            .map_err(|e| Error::kernel(read_context(), e))?
            .unwrap_or_default(),
    };
    let mut guards = Vec::new();
    let records = match recorded {
        Some(records) => records,
        None => corrupt::all_attachments(store)?.usable,
    };
    // Every record here is usable (`usable` of a read, or recovery's, which are).
    for rec in &records {
        if let Some(network) = networks.get(&rec.network).filter(|_| is_live(rec)) {
            guards.extend(guard_of_usable(network, rec));
        }
    }
    nft.replace_guards(TABLE, &found, &guards)
        .map_err(|e| Error::kernel(format!("set up nf_tables tables netdev {TABLE}-*"), e))?;
    log::info!(
        "nf_tables tables netdev {TABLE}-*: {} pod link(s) guarded",
        guards.len()
    );
    Ok(())
}

/// The guard chains as the kernel has them now; `None` when the table does not exist.
pub(crate) fn read() -> Result<Option<Vec<GuardChain>>> {
    with_nft(Socket::Pass, read_context, |nft| nft.guard_chains(TABLE))
}

/// What a failed [`read`] (or the rebuild's own listing) says it was doing.
fn read_context() -> String {
    format!("read nf_tables tables netdev {TABLE}-*")
}

/// The first difference between the guard `want` and the chains `have`, or `None`.
pub(crate) fn difference(want: &Guard, have: Option<&[GuardChain]>) -> Option<String> {
    let Some(chain) = have.and_then(|h| h.iter().find(|c| c.name == want.device)) else {
        return Some(format!("{} has no source guard", want.device));
    };
    if chain.device != want.device {
        return Some(format!(
            "the source guard of {} hooks {:?}",
            want.device, chain.device
        ));
    }
    if chain.summary != want.summary() {
        return Some(format!(
            "the source guard of {} allows {:?}, not {:?}",
            want.device,
            chain.summary,
            want.summary()
        ));
    }
    None
}

/// The frames dropped so far, per reason (empty when the table is missing or unreadable).
pub fn drops() -> Vec<(DropReason, u64)> {
    match with_nft(
        Socket::Pass,
        || "read source guard counters".to_owned(),
        |nft| nft.guard_drops(TABLE),
    ) {
        Ok(drops) => drops,
        Err(e) => {
            log::debug!("{}", e.chain());
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests;
