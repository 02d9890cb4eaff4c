//! Traffic control for VM sandboxes: the ingress qdisc and "redirect everything" filters that
//! tie a pod's veth to its VM's tap (the Kata tcfilter model).
//!
//! The redirect filter is a u32 filter with an empty selector (no keys, TERMINAL: it matches
//! every frame), not matchall: CONFIG_NET_CLS_MATCHALL is missing from some kernels (our
//! Firecracker CI kernel among them) where u32 is built in, and an empty u32 selector is what
//! Kata itself installs. [`Rtnl::redirects`] reads both kinds.
//!
//! Filters hang off parent `ffff:fff2` (TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS), what
//! `tc filter ... ingress` uses), the ingress hook of an `ingress` and of a `clsact` qdisc
//! alike, so a clsact someone else installed serves as well.

use netlink_packet_core::{NLM_F_CREATE, NLM_F_EXCL, NLM_F_REPLACE};
use netlink_packet_route::tc::{
    TcAction, TcActionAttribute, TcActionMirror, TcActionMirrorOption, TcActionOption,
    TcActionType, TcAttribute, TcFilterMatchAllOption, TcFilterU32Option, TcHandle, TcMessage,
    TcMirror, TcMirrorActionType, TcOption, TcU32Selector, TcU32SelectorFlags,
};
use netlink_packet_route::RouteNetlinkMessage;

use crate::error::Result;
use crate::rtnl::Rtnl;

/// The ingress qdisc's handle, `ffff:`.
const INGRESS_HANDLE: u32 = 0xffff_0000;
/// Parent of redirect filters: the ingress hook of an ingress or clsact qdisc.
const INGRESS_FILTER_PARENT: u32 = 0xffff_fff2;
/// The priority our redirect filter owns on a device. Lowest number: it runs first.
const REDIRECT_PRIO: u16 = 1;
/// linux/if_ether.h ETH_P_ALL: every protocol.
const ETH_P_ALL: u16 = 0x0003;
const U32_KIND: &str = "u32";
const MATCHALL_KIND: &str = "matchall";

/// A queueing discipline as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Qdisc {
    /// Interface index.
    pub index: u32,
    /// Kind (`ingress`, `clsact`, `noqueue`, `fq_codel`, …).
    pub kind: String,
    /// Handle (`ffff:` is 0xffff0000).
    pub handle: u32,
    /// Parent (TC_H_INGRESS 0xfffffff1 for ingress and clsact, TC_H_ROOT 0xffffffff for root).
    pub parent: u32,
}

/// A filter that sends every frame arriving on `from` elsewhere with a mirred action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    /// Interface whose ingress the filter sits on.
    pub from: u32,
    /// Interface the frames go to.
    pub to: u32,
    /// Out of `to` (egress) rather than into it (ingress).
    pub egress: bool,
    /// Redirected (stolen) rather than mirrored (copied).
    pub redirect: bool,
    /// The classifier: `u32` (empty selector) or `matchall`.
    pub filter_kind: String,
}

/// One entry of a filter dump, with what [`Rtnl::add_redirect`] needs to decide.
#[derive(Debug)]
pub(crate) struct FilterEntry {
    prio: u16,
    protocol: u16,
    handle: u32,
    kind: String,
    /// A classifying entry: not the per-priority header or a u32 hash table.
    node: bool,
    /// Matches every frame of every protocol.
    matches_all: bool,
    /// The mirred actions, in order, and how many actions there are in all.
    mirreds: Vec<TcMirror>,
    actions: usize,
}

impl FilterEntry {
    /// What [`Rtnl::redirects`] reports for this entry.
    pub(crate) fn redirect(&self, from: u32) -> Option<Redirect> {
        if !self.node || !self.matches_all || self.protocol != ETH_P_ALL {
            return None;
        }
        let mirred = self.mirreds.first()?;
        let (egress, redirect) = match mirred.eaction {
            TcMirrorActionType::EgressRedir => (true, true),
            TcMirrorActionType::EgressMirror => (true, false),
            TcMirrorActionType::IngressRedir => (false, true),
            TcMirrorActionType::IngressMirror => (false, false),
            _ => return None,
        };
        Some(Redirect {
            from,
            to: mirred.ifindex,
            egress,
            redirect,
            filter_kind: self.kind.clone(),
        })
    }

    /// Exactly the filter [`redirect_filter_message`] builds, to `to`.
    fn is_our_redirect_to(&self, to: u32) -> bool {
        self.kind == U32_KIND
            && self.node
            && self.matches_all
            && self.protocol == ETH_P_ALL
            && self.actions == 1
            && self.mirreds.first().is_some_and(|m| {
                m.eaction == TcMirrorActionType::EgressRedir
                    && m.generic.action == TcActionType::Stolen
                    && m.ifindex == to
            })
    }
}

impl Rtnl {
    /// Adds the ingress qdisc (`ffff:`, parent TC_H_INGRESS) to link `index`. Ok when the
    /// ingress slot is already taken (the kernel answers EEXIST for an ingress or a clsact
    /// qdisc there; either serves [`Rtnl::add_redirect`]).
    pub fn add_ingress_qdisc(&mut self, index: u32) -> Result<()> {
        let msg = RouteNetlinkMessage::NewQueueDiscipline(ingress_qdisc_message(index));
        let target = format_args!("index {index}");
        match self.ack(msg, NLM_F_CREATE | NLM_F_EXCL, "add ingress qdisc", &target) {
            Err(e) if e.is_exists() => Ok(()),
            other => other,
        }
    }

    /// Redirects every frame arriving on `from` out of `to` (u32 match-all, protocol all,
    /// priority 1, one mirred egress redirect action, TC_ACT_STOLEN). Needs the ingress qdisc
    /// on `from` ([`Rtnl::add_ingress_qdisc`]).
    ///
    /// Idempotent, and owns priority 1 of `from`'s ingress: the filter already there is left
    /// alone, one redirecting elsewhere is replaced in place (atomically), and anything else at
    /// that priority is deleted first.
    pub fn add_redirect(&mut self, from: u32, to: u32) -> Result<()> {
        let op = "add redirect";
        let target = format_args!("index {from} to index {to}");
        let ours: Vec<FilterEntry> = self
            .ingress_filters(from)?
            .into_iter()
            .filter(|f| f.prio == REDIRECT_PRIO)
            .collect();
        let nodes: Vec<&FilterEntry> = ours.iter().filter(|f| f.node).collect();
        let replaceable = ours
            .iter()
            .all(|f| f.kind == U32_KIND && f.protocol == ETH_P_ALL);
        let handle = match nodes.as_slice() {
            [one] if one.is_our_redirect_to(to) => return Ok(()),
            // Replaced in place under the handle the kernel gave it. Never a fixed handle: u32
            // hash tables are shared by all u32 priorities of a device, so `800::800` can name
            // another priority's filter. A replace keeps the old selector, hence matches_all.
            [one] if replaceable && one.matches_all => one.handle,
            [] if replaceable => 0,
            _ => {
                let msg =
                    RouteNetlinkMessage::DelTrafficFilter(delete_prio_message(from, REDIRECT_PRIO));
                match self.ack(
                    msg,
                    0,
                    "delete filters",
                    &format_args!("index {from} prio {REDIRECT_PRIO}"),
                ) {
                    Err(e) if !e.is_not_found() => return Err(e),
                    _ => 0,
                }
            }
        };
        let msg = RouteNetlinkMessage::NewTrafficFilter(redirect_filter_message(from, to, handle));
        // Without NLM_F_EXCL an existing handle is changed in place; 0 lets the kernel pick one.
        self.ack(msg, NLM_F_CREATE | NLM_F_REPLACE, op, &target)
    }

    /// The qdiscs of link `index` that the kernel shows (not the invisible default ones such as
    /// a veth's noqueue). The kernel dumps every link's; they are filtered here.
    pub fn qdiscs(&mut self, index: u32) -> Result<Vec<Qdisc>> {
        let msg = RouteNetlinkMessage::GetQueueDiscipline(TcMessage::default());
        let target = format_args!("of index {index}");
        Ok(self
            .dump(msg, "dump qdiscs", &target)?
            .iter()
            .filter_map(|m| match m {
                RouteNetlinkMessage::NewQueueDiscipline(q) => Some(parse_qdisc(q)),
                _ => None,
            })
            .filter(|q| q.index == index)
            .collect())
    }

    /// The match-all, every-protocol mirred filters on the ingress of link `index`; empty when
    /// it has no ingress qdisc.
    pub fn redirects(&mut self, index: u32) -> Result<Vec<Redirect>> {
        Ok(self
            .ingress_filters(index)?
            .iter()
            .filter_map(|f| f.redirect(index))
            .collect())
    }

    fn ingress_filters(&mut self, index: u32) -> Result<Vec<FilterEntry>> {
        let msg = RouteNetlinkMessage::GetTrafficFilter(filter_dump_message(index));
        let target = format_args!("of index {index} ingress");
        Ok(self
            .dump(msg, "dump filters", &target)?
            .iter()
            .filter_map(|m| match m {
                RouteNetlinkMessage::NewTrafficFilter(f) => Some(parse_filter(f)),
                _ => None,
            })
            .collect())
    }
}

/// tcm_ifindex is a C int; a u32 beyond i32::MAX is no interface and the kernel says ENODEV.
fn tc_index(index: u32) -> i32 {
    index as i32
}

/// tcm_info of a filter: TC_H_MAKE(prio << 16, htons(protocol)).
fn filter_info(prio: u16, protocol: u16) -> u32 {
    (u32::from(prio) << 16) | u32::from(protocol.to_be())
}

pub(crate) fn ingress_qdisc_message(index: u32) -> TcMessage {
    let mut msg = TcMessage::with_index(tc_index(index));
    msg.header.handle = INGRESS_HANDLE.into();
    msg.header.parent = TcHandle::INGRESS;
    msg.attributes.push(TcAttribute::Kind("ingress".into()));
    msg
}

pub(crate) fn filter_dump_message(index: u32) -> TcMessage {
    let mut msg = TcMessage::with_index(tc_index(index));
    msg.header.parent = INGRESS_FILTER_PARENT.into();
    msg
}

/// Handle 0 with a priority and no protocol: the whole priority goes.
pub(crate) fn delete_prio_message(index: u32, prio: u16) -> TcMessage {
    let mut msg = filter_dump_message(index);
    msg.header.info = filter_info(prio, 0);
    msg
}

/// The redirect filter on `from`'s ingress: u32, empty TERMINAL selector, one mirred egress
/// redirect to `to` (TC_ACT_STOLEN). `handle` 0 asks the kernel to choose one.
pub(crate) fn redirect_filter_message(from: u32, to: u32, handle: u32) -> TcMessage {
    let mut msg = filter_dump_message(from);
    msg.header.handle = handle.into();
    msg.header.info = filter_info(REDIRECT_PRIO, ETH_P_ALL);

    let mut selector = TcU32Selector::default();
    selector.flags = TcU32SelectorFlags::Terminal;
    let mut mirror = TcMirror::default();
    mirror.generic.action = TcActionType::Stolen;
    mirror.eaction = TcMirrorActionType::EgressRedir;
    mirror.ifindex = to;
    let mut action = TcAction::default();
    action.attributes = vec![
        TcActionAttribute::Kind(TcActionMirror::KIND.into()),
        TcActionAttribute::Options(vec![TcActionOption::Mirror(TcActionMirrorOption::Parms(
            mirror,
        ))]),
    ];
    msg.attributes = vec![
        TcAttribute::Kind(U32_KIND.into()),
        TcAttribute::Options(vec![
            TcOption::U32(TcFilterU32Option::Selector(selector)),
            TcOption::U32(TcFilterU32Option::Action(vec![action])),
        ]),
    ];
    msg
}

pub(crate) fn parse_qdisc(msg: &TcMessage) -> Qdisc {
    Qdisc {
        index: msg.header.index as u32,
        kind: kind_of(msg).unwrap_or_default(),
        handle: msg.header.handle.into(),
        parent: msg.header.parent.into(),
    }
}

fn kind_of(msg: &TcMessage) -> Option<String> {
    msg.attributes.iter().find_map(|a| match a {
        TcAttribute::Kind(k) => Some(k.clone()),
        _ => None,
    })
}

pub(crate) fn parse_filter(msg: &TcMessage) -> FilterEntry {
    let info = msg.header.info;
    let mut entry = FilterEntry {
        prio: (info >> 16) as u16,
        protocol: u16::from_be((info & 0xffff) as u16),
        handle: msg.header.handle.into(),
        kind: kind_of(msg).unwrap_or_default(),
        node: false,
        matches_all: false,
        mirreds: Vec::new(),
        actions: 0,
    };
    let options = msg.attributes.iter().find_map(|a| match a {
        TcAttribute::Options(o) => Some(o),
        _ => None,
    });
    for option in options.into_iter().flatten() {
        let actions = match option {
            // The per-priority header and u32 hash tables have no selector.
            TcOption::U32(TcFilterU32Option::Selector(s)) => {
                entry.node = true;
                entry.matches_all = s.keys.iter().all(|k| k.mask == 0);
                continue;
            }
            TcOption::U32(TcFilterU32Option::Action(actions)) => actions,
            TcOption::MatchAll(TcFilterMatchAllOption::Action(actions)) => actions,
            _ => continue,
        };
        entry.actions += actions.len();
        entry.mirreds.extend(actions.iter().filter_map(mirred_of));
    }
    if entry.kind == MATCHALL_KIND && entry.handle != 0 {
        entry.node = true;
        entry.matches_all = true;
    }
    entry
}

fn mirred_of(action: &TcAction) -> Option<TcMirror> {
    action.attributes.iter().find_map(|a| match a {
        TcActionAttribute::Options(options) => options.iter().find_map(|o| match o {
            TcActionOption::Mirror(TcActionMirrorOption::Parms(p)) => Some(p.clone()),
            _ => None,
        }),
        _ => None,
    })
}

#[cfg(test)]
mod tests;
