//! Native bandwidth limits on a host link (a veth's host end, or a DAN tap), shaped as the CNI
//! `bandwidth` plugin shapes them:
//!
//! - ingress (into the pod) is the host link's egress: a tbf as its root qdisc;
//! - egress (out of the pod) arrives on the host link's ingress, where no qdisc can queue: an
//!   ingress qdisc redirects every frame out of an IFB device ([`names::ifb_ifname`]), whose
//!   root tbf queues it. A tc police action on the ingress would need no extra device, but it
//!   drops what exceeds the rate instead of queueing it (TCP then runs below the limit, in a
//!   sawtooth), and `act_police` is missing from some kernels (CONFIG_NET_ACT_POLICE, not set
//!   on our Firecracker CI kernel) where IFB and tbf are built in.
//!
//! The host link's qdiscs go with it. The IFB is a host link of knid's own: marked
//! ([`super::mark`]), of the host-link name form the link sweeps recognise, deleted by
//! [`remove_ifb`] wherever the attachment's pod side is released, and known to the sweeps
//! through its attachment's record.

use knid_netops::{Rtnl, Tbf};
use knid_store::AttachmentRecord;

use super::names;
use super::verify::Difference;
use crate::error::{Error, Result};
use crate::model::{Bandwidth, RateLimit};

/// The tbf of a limit: bits to bytes (a rate of at least a byte a second, a burst of at most
/// u32::MAX bytes, which validation keeps it under).
pub(crate) fn tbf(limit: &RateLimit) -> Tbf {
    Tbf {
        rate: (limit.rate / 8).max(1),
        burst: u32::try_from(limit.burst / 8).unwrap_or(u32::MAX).max(1),
    }
}

/// Shapes the host link `host_name` of (sandbox, ifname) as `bw` says: its root tbf for
/// ingress; for egress the IFB (created with `mtu`, marked with `mark`, up, with its root tbf)
/// and the redirect of the host link's ingress to it. An IFB left by an interrupted attach of
/// this very interface is replaced.
pub(crate) fn apply(
    host: &mut Rtnl,
    host_name: &str,
    (sandbox_id, ifname): (&str, &str),
    bw: &Bandwidth,
    mtu: u32,
    mark: &str,
) -> Result<()> {
    let host_index = super::index_of(host, host_name, "the host netns")?;
    if let Some(limit) = &bw.ingress {
        host.set_tbf(host_index, &tbf(limit))
            .map_err(|e| Error::kernel(format!("shape what {host_name} sends to the pod"), e))?;
    }
    let Some(limit) = &bw.egress else {
        return Ok(());
    };
    let ifb = names::ifb_ifname(sandbox_id, ifname);
    let create = |host: &mut Rtnl| {
        host.create_ifb(&ifb, Some(mtu))
            .map_err(|e| (e.is_exists(), Error::kernel(format!("create ifb {ifb}"), e)))
    };
    if let Err((exists, err)) = create(host) {
        if !exists || !super::mark::remove_leftover(host, &ifb, mark)? {
            return Err(err);
        }
        log::warn!("replaced a stale {ifb} left by an interrupted attach");
        create(host).map_err(|(_, e)| e)?;
    }
    super::mark::set(host, &ifb, mark)?;
    let ifb_index = super::index_of(host, &ifb, "the host netns")?;
    host.set_up(ifb_index)
        .map_err(|e| Error::kernel(format!("set {ifb} up"), e))?;
    host.set_tbf(ifb_index, &tbf(limit))
        .map_err(|e| Error::kernel(format!("shape what the pod sends, on {ifb}"), e))?;
    host.add_ingress_qdisc(host_index)
        .map_err(|e| Error::kernel(format!("add the ingress qdisc of {host_name}"), e))?;
    host.add_redirect(host_index, ifb_index)
        .map_err(|e| Error::kernel(format!("redirect {host_name} to {ifb}"), e))
}

/// The IFB of `rec` when it limits what the pod sends: a host link its record owns. Read from
/// the record's limits as they are, so a record whose other fields do not decode still names it.
pub(crate) fn ifb_of(rec: &AttachmentRecord) -> Option<String> {
    rec.bandwidth
        .as_ref()
        .filter(|b| b.egress_rate != 0)
        .map(|_| names::ifb_ifname(&rec.sandbox_id, &rec.ifname))
}

/// Deletes the IFB of `rec`, if it has one (gone already is fine).
pub(crate) fn remove_ifb(host: &mut Rtnl, rec: &AttachmentRecord) -> Result<()> {
    if let Some(ifb) = ifb_of(rec) {
        let existed = host
            .delete_link_by_name(&ifb)
            .map_err(|e| Error::kernel(format!("delete ifb {ifb}"), e))?;
        log::debug!(
            "{}/{}: ifb {ifb} {}",
            rec.sandbox_id,
            rec.ifname,
            if existed { "deleted" } else { "already gone" }
        );
    }
    Ok(())
}

/// Checks the limits `bw` on the host link `host_name` (index `host_index`): the root tbf at
/// the recorded ingress rate; the IFB there and up with its tbf at the egress rate, and the
/// host link's ingress redirected to it. Bursts are not compared: the kernel reports them as a
/// time in 32-bit ticks, which large bursts overflow.
///
/// Cost: a qdisc dump per limit, a link request and a filter dump for egress.
pub(crate) fn check(
    host: &mut Rtnl,
    rec: &AttachmentRecord,
    host_index: u32,
    bw: &Bandwidth,
) -> std::result::Result<(), Difference> {
    let host_name = rec.host_ifname.as_str();
    let differs = |ifname: &str, detail: String| Difference::Bandwidth {
        ifname: ifname.to_owned(),
        detail,
    };
    let unreadable =
        |e: &dyn std::fmt::Display| Difference::Unreadable(format!("the host netns: {e}"));
    let rate_on = |host: &mut Rtnl, name: &str, index: u32, limit: &RateLimit| {
        let want = tbf(limit).rate;
        match host.root_tbf(index) {
            Err(e) => Err(unreadable(&format_args!("list the qdiscs of {name}: {e}"))),
            Ok(None) => Err(differs(name, "its tbf qdisc is gone".into())),
            Ok(Some(found)) if found.rate != want => Err(differs(
                name,
                format!(
                    "its tbf rate is {} bit/s, not {} bit/s",
                    found.rate * 8,
                    want * 8
                ),
            )),
            Ok(Some(_)) => Ok(()),
        }
    };
    if let Some(limit) = &bw.ingress {
        rate_on(host, host_name, host_index, limit)?;
    }
    let Some(limit) = &bw.egress else {
        return Ok(());
    };
    let ifb = names::ifb_ifname(&rec.sandbox_id, &rec.ifname);
    let link = host
        .link_by_name(&ifb)
        .map_err(|e| unreadable(&format_args!("look up {ifb}: {e}")))?;
    let Some(link) = link.filter(|l| l.up) else {
        return Err(differs(host_name, format!("its ifb {ifb} is gone or down")));
    };
    rate_on(host, &ifb, link.index, limit)?;
    let redirects = host
        .redirects(host_index)
        .map_err(|e| unreadable(&format_args!("list the tc filters of {host_name}: {e}")))?;
    if !redirects.iter().any(|r| r.to == link.index && r.redirect) {
        return Err(differs(
            host_name,
            format!("the redirect of what it receives to {ifb} is gone"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
