//! Rate limits: a token bucket filter (`tbf`) as a link's root qdisc, and the IFB device that
//! lets a tbf shape what arrives on a link (its ingress is redirected out of the IFB, whose root
//! tbf then queues it; [`Rtnl::add_redirect`] builds that redirect).
//!
//! netlink-packet-route has no tbf types, so its options are built and read here as raw
//! attributes (include/uapi/linux/pkt_sched.h: `struct tc_tbf_qopt`, TCA_TBF_*). The burst goes
//! as TCA_TBF_BURST in bytes, not only as `buffer` in scheduler ticks: the kernel caps a
//! `buffer` at ~4.3 s of transmission, a burst in bytes it takes as it is.

use netlink_packet_core::{DefaultNla, Nla, NlasIterator, NLM_F_CREATE, NLM_F_EXCL, NLM_F_REPLACE};
use netlink_packet_route::link::InfoKind;
use netlink_packet_route::tc::{TcAttribute, TcHandle, TcMessage, TcOption};
use netlink_packet_route::RouteNetlinkMessage;

use crate::error::Result;
use crate::rtnl::Rtnl;

const TBF_KIND: &str = "tbf";
const TCA_TBF_PARMS: u16 = 1;
const TCA_TBF_RATE64: u16 = 4;
const TCA_TBF_BURST: u16 = 6;
/// `struct tc_tbf_qopt`: rate and peakrate `tc_ratespec` (12 bytes each), limit, buffer, mtu.
const TBF_QOPT_LEN: usize = 36;
/// TC_LINKLAYER_ETHERNET: says the rate needs no rate table (one marked "unaware" makes the
/// kernel look for one).
const LINKLAYER_ETHERNET: u8 = 1;
/// PSCHED_SHIFT: a scheduler tick is 64 ns.
const NS_PER_TICK: u64 = 64;
/// How long a full queue takes to drain at the rate, beyond the burst: the queue's length.
/// 25 ms is what the CNI bandwidth plugin uses.
pub const QUEUE_LATENCY_MS: u64 = 25;

/// A token bucket: what [`Rtnl::set_tbf`] installs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tbf {
    /// Rate in bytes per second (above 0).
    pub rate: u64,
    /// Bucket size in bytes (above 0): what may pass at line rate after a pause.
    pub burst: u32,
}

impl Tbf {
    /// The queue's length in bytes: [`QUEUE_LATENCY_MS`] at the rate, plus the burst.
    pub fn limit(&self) -> u32 {
        let queued = self.rate.saturating_mul(QUEUE_LATENCY_MS) / 1000;
        u32::try_from(queued.saturating_add(u64::from(self.burst))).unwrap_or(u32::MAX)
    }

    /// The time to send `burst` bytes at the rate, in scheduler ticks (saturating).
    fn buffer_ticks(&self) -> u32 {
        let ns = u128::from(self.burst) * 1_000_000_000 / u128::from(self.rate.max(1));
        u32::try_from(ns / u128::from(NS_PER_TICK)).unwrap_or(u32::MAX)
    }
}

/// A tbf qdisc as the kernel reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TbfFound {
    /// Rate in bytes per second.
    pub rate: u64,
    /// Queue length in bytes.
    pub limit: u32,
}

impl Rtnl {
    /// Makes a tbf of `tbf` the root qdisc of link `index`, replacing whatever root qdisc it
    /// has (a repeated call changes the tbf in place).
    pub fn set_tbf(&mut self, index: u32, tbf: &Tbf) -> Result<()> {
        let msg = RouteNetlinkMessage::NewQueueDiscipline(tbf_message(index, tbf));
        let target = format_args!("index {index}");
        self.ack(msg, NLM_F_CREATE | NLM_F_REPLACE, "set tbf qdisc", &target)
    }

    /// The tbf at the root of link `index`, if its root qdisc is one.
    pub fn root_tbf(&mut self, index: u32) -> Result<Option<TbfFound>> {
        let msg = RouteNetlinkMessage::GetQueueDiscipline(TcMessage::default());
        let target = format_args!("of index {index}");
        Ok(self
            .dump(msg, "dump qdiscs", &target)?
            .iter()
            .find_map(|m| match m {
                RouteNetlinkMessage::NewQueueDiscipline(q)
                    if q.header.index == index as i32 && q.header.parent == TcHandle::ROOT =>
                {
                    Some(parse_tbf(q))
                }
                _ => None,
            })
            .flatten())
    }

    /// Creates an IFB device (down) of MTU `mtu`: the place a tbf shapes what another link
    /// receives.
    pub fn create_ifb(&mut self, name: &str, mtu: Option<u32>) -> Result<()> {
        let msg =
            RouteNetlinkMessage::NewLink(crate::link::new_kind_message(name, mtu, InfoKind::Ifb));
        self.ack(msg, NLM_F_CREATE | NLM_F_EXCL, "create ifb", &name)
    }
}

/// `struct tc_ratespec` (12 bytes): cell_log u8, linklayer u8, overhead u16, cell_align i16,
/// mpu u16, rate u32 (bytes/s; all ones when the rate needs TCA_TBF_RATE64).
fn ratespec(rate: u64) -> [u8; 12] {
    let mut out = [0u8; 12];
    out[1] = LINKLAYER_ETHERNET;
    let rate32 = u32::try_from(rate).unwrap_or(u32::MAX);
    out[8..12].copy_from_slice(&rate32.to_ne_bytes());
    out
}

/// The root tbf request for link `index`.
pub(crate) fn tbf_message(index: u32, tbf: &Tbf) -> TcMessage {
    let mut msg = TcMessage::with_index(index as i32);
    msg.header.parent = TcHandle::ROOT;
    let mut qopt = Vec::with_capacity(TBF_QOPT_LEN);
    qopt.extend_from_slice(&ratespec(tbf.rate));
    qopt.extend_from_slice(&[0u8; 12]); // no peak rate
    qopt.extend_from_slice(&tbf.limit().to_ne_bytes());
    qopt.extend_from_slice(&tbf.buffer_ticks().to_ne_bytes());
    qopt.extend_from_slice(&0u32.to_ne_bytes()); // mtu: only used with a peak rate
    let mut options = vec![TcOption::Other(DefaultNla::new(TCA_TBF_PARMS, qopt))];
    if tbf.rate > u64::from(u32::MAX) {
        options.push(TcOption::Other(DefaultNla::new(
            TCA_TBF_RATE64,
            tbf.rate.to_ne_bytes().to_vec(),
        )));
    }
    options.push(TcOption::Other(DefaultNla::new(
        TCA_TBF_BURST,
        tbf.burst.to_ne_bytes().to_vec(),
    )));
    msg.attributes = vec![
        TcAttribute::Kind(TBF_KIND.into()),
        TcAttribute::Options(options),
    ];
    msg
}

/// The tbf of a qdisc dump entry; `None` for another kind or options that do not parse.
pub(crate) fn parse_tbf(msg: &TcMessage) -> Option<TbfFound> {
    let is_tbf = msg
        .attributes
        .iter()
        .any(|a| matches!(a, TcAttribute::Kind(k) if k == TBF_KIND));
    if !is_tbf {
        return None;
    }
    // An unknown kind's TCA_OPTIONS arrives whole, as one attribute holding the nested ones.
    let nested = msg.attributes.iter().find_map(|a| match a {
        TcAttribute::Options(o) => o.iter().find_map(|o| match o {
            TcOption::Other(nla) => {
                let mut value = vec![0u8; nla.value_len()];
                nla.emit_value(&mut value);
                Some(value)
            }
            _ => None,
        }),
        _ => None,
    })?;
    let mut found: Option<TbfFound> = None;
    let mut rate64 = None;
    for nla in NlasIterator::new(&nested[..]) {
        let nla = nla.ok()?;
        let value = nla.value();
        match nla.kind() {
            TCA_TBF_PARMS if value.len() >= TBF_QOPT_LEN => {
                let word = |at: usize| {
                    u32::from_ne_bytes([value[at], value[at + 1], value[at + 2], value[at + 3]])
                };
                found = Some(TbfFound {
                    rate: u64::from(word(8)),
                    limit: word(24),
                });
            }
            TCA_TBF_RATE64 if value.len() == 8 => {
                let mut bytes = [0u8; 8];
                bytes.copy_from_slice(value);
                rate64 = Some(u64::from_ne_bytes(bytes));
            }
            _ => {}
        }
    }
    let mut found = found?;
    if let Some(rate) = rate64 {
        found.rate = rate;
    }
    Some(found)
}

#[cfg(test)]
mod tests;
