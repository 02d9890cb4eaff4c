//! Golden bytes of the route requests we build (checked against include/uapi/linux/rtnetlink.h;
//! the same builders run against the kernel in tests/kernel/routes.rs). Sequence 1, port 0.

use super::*;
use crate::rtnl::{encode_for_test, hex};
use netlink_packet_core::{NLM_F_ACK, NLM_F_DUMP};

fn bytes(msg: RouteNetlinkMessage, flags: u16) -> String {
    hex(&encode_for_test(msg, flags))
}

fn gw(s: &str) -> IpAddr {
    s.parse().expect("ip")
}

#[test]
fn default_route_v4_with_mtu() {
    let mut route = Route::default_via(gw("10.88.0.1"), 5);
    route.mtu = Some(1400);
    // nlmsghdr(56, RTM_NEWROUTE, REQUEST|ACK|REPLACE|CREATE) | rtmsg(AF_INET, dst_len 0,
    // table main, RTPROT_STATIC, RT_SCOPE_UNIVERSE, RTN_UNICAST) | RTA_GATEWAY 10.88.0.1
    // | RTA_OIF 5 | RTA_METRICS { RTAX_MTU 1400 }
    assert_eq!(
        bytes(
            RouteNetlinkMessage::NewRoute(add_message(&route)),
            NLM_F_CREATE | NLM_F_REPLACE | NLM_F_ACK
        ),
        "38 00 00 00 18 00 05 05 01 00 00 00 00 00 00 00\n\
         02 00 00 00 fe 04 00 01 00 00 00 00 08 00 05 00\n\
         0a 58 00 01 08 00 04 00 05 00 00 00 0c 00 08 00\n\
         08 00 02 00 78 05 00 00"
    );
}

#[test]
fn default_route_v6() {
    let route = Route::default_via(gw("fd00:88::1"), 5);
    assert_eq!(route.dst, "::/0".parse::<IpNet>().expect("net"));
    // rtmsg(AF_INET6, dst_len 0, main, static, universe, unicast) | RTA_GATEWAY | RTA_OIF 5
    assert_eq!(
        bytes(
            RouteNetlinkMessage::NewRoute(add_message(&route)),
            NLM_F_CREATE | NLM_F_REPLACE | NLM_F_ACK
        ),
        "38 00 00 00 18 00 05 05 01 00 00 00 00 00 00 00\n\
         0a 00 00 00 fe 04 00 01 00 00 00 00 14 00 05 00\n\
         fd 00 00 88 00 00 00 00 00 00 00 00 00 00 00 01\n\
         08 00 04 00 05 00 00 00"
    );
}

#[test]
fn delete_matches_any_scope() {
    let route = Route::default_via(gw("fd00:88::1"), 5);
    // RTM_DELROUTE, REQUEST|ACK, rtmsg scope RT_SCOPE_NOWHERE (255)
    assert_eq!(
        bytes(
            RouteNetlinkMessage::DelRoute(delete_message(&route)),
            NLM_F_ACK
        ),
        "38 00 00 00 19 00 05 00 01 00 00 00 00 00 00 00\n\
         0a 00 00 00 fe 04 ff 01 00 00 00 00 14 00 05 00\n\
         fd 00 00 88 00 00 00 00 00 00 00 00 00 00 00 01\n\
         08 00 04 00 05 00 00 00"
    );
}

#[test]
fn dump_of_main_table_leaves_filter_fields_zero() {
    // RTM_GETROUTE, REQUEST|DUMP, rtmsg(AF_INET6, table main, everything else 0)
    assert_eq!(
        bytes(
            RouteNetlinkMessage::GetRoute(dump_message(true)),
            NLM_F_DUMP
        ),
        "1c 00 00 00 1a 00 01 03 01 00 00 00 00 00 00 00\n\
         0a 00 00 00 fe 00 00 00 00 00 00 00"
    );
}

#[test]
fn tables_above_255_go_in_rta_table_with_unspec_header() {
    let mut route = Route::default_via(gw("10.0.0.1"), 2);
    route.table = 1000;
    route.dst = "10.9.0.0/16".parse().expect("net");
    route.metric = Some(20);
    let msg = add_message(&route);
    assert_eq!(msg.header.table, RouteHeader::RT_TABLE_UNSPEC);
    assert_eq!(msg.header.destination_prefix_length, 16);
    assert!(msg.attributes.contains(&RouteAttribute::Table(1000)));
    assert!(msg.attributes.contains(&RouteAttribute::Priority(20)));
    assert!(msg
        .attributes
        .contains(&RouteAttribute::Destination(RouteAddress::Inet(
            "10.9.0.0".parse().expect("ip")
        ))));
}

#[test]
fn parse_round_trips_what_we_send() {
    let mut route = Route::default_via(gw("10.88.0.1"), 5);
    route.mtu = Some(1400);
    route.metric = Some(100);
    route.dst = "10.1.0.0/16".parse().expect("net");
    assert_eq!(parse_route(&add_message(&route)), Some(route.clone()));
    route.table = 4242;
    assert_eq!(parse_route(&add_message(&route)), Some(route));
}

#[test]
fn non_unicast_routes_are_not_reported() {
    let mut msg = add_message(&Route::default_via(gw("10.88.0.1"), 5));
    msg.header.kind = RouteType::Local;
    assert_eq!(parse_route(&msg), None);
}
