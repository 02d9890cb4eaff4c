//! Golden bytes of the neighbour requests we build, checked field by field against
//! include/uapi/linux/{netlink,rtnetlink,neighbour}.h; the same builders run against the
//! kernel in tests/kernel/devices.rs. Sequence number 1, port 0.

use super::*;
use crate::rtnl::{encode_for_test, hex};
use netlink_packet_core::{NLM_F_ACK, NLM_F_DUMP};

fn bytes(msg: RouteNetlinkMessage, flags: u16) -> String {
    hex(&encode_for_test(msg, flags))
}

fn ip(s: &str) -> IpAddr {
    s.parse().expect("ip")
}

const MAC: Mac = [0x02, 0x42, 0x0a, 0x58, 0x00, 0x07];

#[test]
fn add_v4_is_a_permanent_replace() {
    // nlmsghdr(48, RTM_NEWNEIGH, REQUEST|ACK|REPLACE|CREATE, seq 1)
    // | ndmsg(AF_INET, pad, ifindex 5, state NUD_PERMANENT 0x80, flags 0, type 0)
    // | NDA_DST 10.88.0.7 | NDA_LLADDR 02:42:0a:58:00:07 (+2 pad)
    assert_eq!(
        bytes(
            RouteNetlinkMessage::NewNeighbour(add_message(5, ip("10.88.0.7"), MAC)),
            NLM_F_CREATE | NLM_F_REPLACE | NLM_F_ACK
        ),
        "30 00 00 00 1c 00 05 05 01 00 00 00 00 00 00 00\n\
         02 00 00 00 05 00 00 00 80 00 00 00 08 00 01 00\n\
         0a 58 00 07 0a 00 02 00 02 42 0a 58 00 07 00 00"
    );
}

#[test]
fn add_v6_is_a_permanent_replace() {
    // nlmsghdr(60, RTM_NEWNEIGH, REQUEST|ACK|REPLACE|CREATE)
    // | ndmsg(AF_INET6, ifindex 5, NUD_PERMANENT) | NDA_DST fd00:88::7 | NDA_LLADDR
    assert_eq!(
        bytes(
            RouteNetlinkMessage::NewNeighbour(add_message(5, ip("fd00:88::7"), MAC)),
            NLM_F_CREATE | NLM_F_REPLACE | NLM_F_ACK
        ),
        "3c 00 00 00 1c 00 05 05 01 00 00 00 00 00 00 00\n\
         0a 00 00 00 05 00 00 00 80 00 00 00 14 00 01 00\n\
         fd 00 00 88 00 00 00 00 00 00 00 00 00 00 00 07\n\
         0a 00 02 00 02 42 0a 58 00 07 00 00"
    );
}

#[test]
fn delete_names_only_family_link_and_address() {
    // nlmsghdr(48, RTM_DELNEIGH, REQUEST|ACK) | ndmsg(AF_INET6, ifindex 5, state 0)
    // | NDA_DST fd00:88::7
    assert_eq!(
        bytes(
            RouteNetlinkMessage::DelNeighbour(delete_message(5, ip("fd00:88::7"))),
            NLM_F_ACK
        ),
        "30 00 00 00 1d 00 05 00 01 00 00 00 00 00 00 00\n\
         0a 00 00 00 05 00 00 00 00 00 00 00 14 00 01 00\n\
         fd 00 00 88 00 00 00 00 00 00 00 00 00 00 00 07"
    );
}

#[test]
fn dump_filters_by_nda_ifindex_not_the_header() {
    // nlmsghdr(36, RTM_GETNEIGH, REQUEST|DUMP) | ndmsg(AF_INET6, ifindex 0) | NDA_IFINDEX 5
    assert_eq!(
        bytes(
            RouteNetlinkMessage::GetNeighbour(dump_message(5, true)),
            NLM_F_DUMP
        ),
        "24 00 00 00 1e 00 01 03 01 00 00 00 00 00 00 00\n\
         0a 00 00 00 00 00 00 00 00 00 00 00 08 00 08 00\n\
         05 00 00 00"
    );
}

fn reply(state: NeighbourState, attributes: Vec<NeighbourAttribute>) -> NeighbourMessage {
    let mut msg = NeighbourMessage::default();
    msg.header.family = AddressFamily::Inet;
    msg.header.ifindex = 5;
    msg.header.state = state;
    msg.attributes = attributes;
    msg
}

#[test]
fn parse_reads_static_and_unresolved_entries() {
    let v4 = std::net::Ipv4Addr::new(10, 88, 0, 7);
    let dst = NeighbourAttribute::Destination(NeighbourAddress::Inet(v4));
    let lladdr = NeighbourAttribute::LinkLayerAddress(MAC.to_vec());
    assert_eq!(
        parse_neighbour(&reply(
            NeighbourState::Permanent,
            vec![dst.clone(), lladdr.clone()]
        )),
        Some(Neighbour {
            index: 5,
            ip: v4.into(),
            mac: Some(MAC),
            permanent: true,
        })
    );
    let learned = parse_neighbour(&reply(NeighbourState::Stale, vec![dst.clone(), lladdr]));
    assert_eq!(learned.map(|n| n.permanent), Some(false));
    let incomplete = parse_neighbour(&reply(NeighbourState::Incomplete, vec![dst]));
    assert_eq!(incomplete.map(|n| n.mac), Some(None));
    assert_eq!(
        parse_neighbour(&reply(NeighbourState::Permanent, vec![])),
        None
    );
}
