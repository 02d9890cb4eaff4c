//! What knid makes of one received rtnetlink message: the conversions the dumps and gets run
//! (links, addresses, routes, neighbours, qdiscs, redirect filters) and the reading of a reply's
//! end (ack, NLMSG_DONE, the kernel's error with its extack text), as one pure function of a
//! message netlink-packet-route has deserialized. A reply's end is read by the same function
//! that [`Rtnl`](crate::Rtnl) ends its replies with (`reply_end::read`), its data by the
//! parsers the object reads run; the fuzz target of netlink replies and its seed replay
//! (`tests/fuzz_seeds.rs`) call it.
//! The only public item of this crate that takes a netlink type: it exists for those callers.

use netlink_packet_core::{NetlinkMessage, NetlinkPayload};
use netlink_packet_route::RouteNetlinkMessage;

use crate::reply_end;
pub use crate::reply_end::End;
use crate::{Address, Link, Neighbour, Qdisc, Redirect, Route};

/// One received message, in knid's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// RTM_NEWLINK, as link gets and dumps keep it.
    Link(Link),
    /// RTM_NEWADDR with an address.
    Address(Address),
    /// RTM_NEWROUTE of a unicast route.
    Route(Route),
    /// RTM_NEWNEIGH with an IP address.
    Neighbour(Neighbour),
    /// RTM_NEWQDISC.
    Qdisc(Qdisc),
    /// RTM_NEWTFILTER of a match-all, every-protocol mirred filter, from the interface the
    /// message names.
    Redirect(Redirect),
    /// A data message knid takes nothing from: another type, or one its reader skips (an
    /// address message without an address, a route that is not unicast, a filter that is no
    /// redirect, ...).
    Skipped,
    /// A message that ends (or interrupts) a reply: an ack, NLMSG_DONE, the kernel's error,
    /// NLMSG_NOOP, NLMSG_OVERRUN, or a payload kind knid does not handle.
    End(End),
}

/// Reads one received message.
pub fn reply(msg: &NetlinkMessage<RouteNetlinkMessage>) -> Reply {
    use RouteNetlinkMessage as M;
    match &msg.payload {
        NetlinkPayload::InnerMessage(inner) => match inner {
            M::NewLink(_) => {
                crate::link::parse_link_reply(inner).map_or(Reply::Skipped, Reply::Link)
            }
            M::NewAddress(a) => {
                crate::address::parse_address(a).map_or(Reply::Skipped, Reply::Address)
            }
            M::NewRoute(r) => crate::route::parse_route(r).map_or(Reply::Skipped, Reply::Route),
            M::NewNeighbour(n) => {
                crate::neigh::parse_neighbour(n).map_or(Reply::Skipped, Reply::Neighbour)
            }
            M::NewQueueDiscipline(q) => Reply::Qdisc(crate::tc::parse_qdisc(q)),
            // tcm_ifindex is a C int, as `parse_qdisc` reads it.
            M::NewTrafficFilter(f) => crate::tc::parse_filter(f)
                .redirect(f.header.index as u32)
                .map_or(Reply::Skipped, Reply::Redirect),
            _ => Reply::Skipped,
        },
        _ => Reply::End(reply_end::read(msg)),
    }
}
