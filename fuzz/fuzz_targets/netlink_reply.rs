//! One received rtnetlink message: netlink-packet-route's deserialization, then knid's reading
//! of it (`knid_netops::decode::reply`: links, addresses, routes, neighbours, qdiscs, redirect
//! filters, acks and errors with their extack text). Neither may panic, and what knid reads
//! holds together: a link is not its own parent, an error has an errno, extack text is clean.
#![no_main]

use knid_netops::decode::{reply, End, Reply};
use libfuzzer_sys::fuzz_target;
use netlink_packet_core::NetlinkMessage;
use netlink_packet_route::RouteNetlinkMessage;

fuzz_target!(|data: &[u8]| {
    let Ok(msg) = NetlinkMessage::<RouteNetlinkMessage>::deserialize(data) else {
        return;
    };
    match reply(&msg) {
        Reply::Link(link) => assert_ne!(link.parent, Some(link.index), "{link:?}"),
        Reply::End(End::Refused { errno, extack }) => {
            assert_ne!(errno, 0);
            if let Some(text) = extack {
                assert!(!text.is_empty() && !text.contains('\0') && text.trim() == text);
            }
        }
        Reply::Redirect(r) => assert!(r.filter_kind == "u32" || r.filter_kind == "matchall"),
        _ => {}
    }
});
