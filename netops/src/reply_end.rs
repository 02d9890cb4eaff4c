//! The end of a netlink reply as the socket reads it: an ack, the NLMSG_DONE of a dump, or the
//! kernel's error with its extended-ack text. Below both the socket ([`crate::rtnl`]) and the
//! reader of whole replies ([`crate::decode`]), which the fuzz target runs.

use netlink_packet_core::{NetlinkMessage, NetlinkPayload};
use netlink_packet_route::RouteNetlinkMessage;

use crate::extack;

/// A message that is not data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// The end of a request that succeeded: an ack, or the NLMSG_DONE of a dump.
    Done,
    /// The end of a request the kernel refused.
    Refused {
        /// The errno (positive for a kernel error code).
        errno: i32,
        /// The kernel's extended-ack text, when it sent one.
        extack: Option<String>,
    },
    /// NLMSG_NOOP.
    Noop,
    /// NLMSG_OVERRUN.
    Overrun,
    /// A payload kind knid does not handle (data included: the caller reads that).
    Unknown,
}

/// Reads a message that ends (or interrupts) a reply.
pub(crate) fn read(msg: &NetlinkMessage<RouteNetlinkMessage>) -> End {
    let flags = msg.header.flags;
    match &msg.payload {
        NetlinkPayload::Error(e) => match e.code {
            None => End::Done,
            Some(code) => End::Refused {
                errno: code.get().saturating_neg(),
                extack: extack::from_error(flags, &e.header),
            },
        },
        // An error during a dump arrives as a negative code in NLMSG_DONE.
        NetlinkPayload::Done(d) => match d.code {
            0 => End::Done,
            code => End::Refused {
                errno: code.saturating_neg(),
                extack: extack::from_done(flags, &d.extended_ack),
            },
        },
        NetlinkPayload::Noop => End::Noop,
        NetlinkPayload::Overrun(_) => End::Overrun,
        _ => End::Unknown,
    }
}
