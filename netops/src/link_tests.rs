//! Golden bytes of every link request we build. Each was checked field by field against
//! include/uapi/linux/{netlink,rtnetlink,if_link,veth}.h, and the same builders run against
//! the kernel in tests/kernel/links.rs. Sequence number 1, port 0.

use super::*;
use crate::rtnl::{encode_for_test, hex};
use netlink_packet_core::{NLM_F_ACK, NLM_F_DUMP};

fn bytes(msg: RouteNetlinkMessage, flags: u16) -> String {
    hex(&encode_for_test(msg, flags))
}

#[test]
fn veth_create_with_peer_netns_fd_and_controller() {
    let spec = VethSpec {
        host: VethEnd {
            name: "kn0a1b2c3d4e".into(),
            mtu: Some(1400),
            mac: None,
        },
        peer: VethEnd {
            name: "eth0".into(),
            mtu: Some(1400),
            mac: Some([0x02, 0x42, 0x0a, 0x58, 0x00, 0x05]),
        },
        peer_netns: None,
        host_controller: Some(3),
    };
    let msg = RouteNetlinkMessage::NewLink(veth_message(&spec, Some(9)));
    // nlmsghdr(148, RTM_NEWLINK, REQUEST|ACK|EXCL|CREATE, seq 1) | ifinfomsg 0
    // | IFLA_IFNAME "kn0a1b2c3d4e" | IFLA_MTU 1400 | IFLA_MASTER 3
    // | IFLA_LINKINFO { IFLA_INFO_KIND "veth" | IFLA_INFO_DATA { VETH_INFO_PEER { ifinfomsg 0
    //   | IFLA_IFNAME "eth0" | IFLA_MTU 1400 | IFLA_ADDRESS 02:42:0a:58:00:05 | IFLA_NET_NS_FD 9 }}}
    assert_eq!(
        bytes(msg, NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK),
        "94 00 00 00 10 00 05 06 01 00 00 00 00 00 00 00\n\
         00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00\n\
         11 00 03 00 6b 6e 30 61 31 62 32 63 33 64 34 65\n\
         00 00 00 00 08 00 04 00 78 05 00 00 08 00 0a 00\n\
         03 00 00 00 50 00 12 00 09 00 01 00 76 65 74 68\n\
         00 00 00 00 40 00 02 00 3c 00 01 00 00 00 00 00\n\
         00 00 00 00 00 00 00 00 00 00 00 00 09 00 03 00\n\
         65 74 68 30 00 00 00 00 08 00 04 00 78 05 00 00\n\
         0a 00 01 00 02 42 0a 58 00 05 00 00 08 00 1c 00\n\
         09 00 00 00"
    );
}

#[test]
fn bridge_create() {
    let msg = RouteNetlinkMessage::NewLink(bridge_message("knid0", Some(1400)));
    // nlmsghdr(68, RTM_NEWLINK, REQUEST|ACK|EXCL|CREATE) | ifinfomsg 0 | IFLA_IFNAME "knid0"
    // | IFLA_MTU 1400 | IFLA_LINKINFO { IFLA_INFO_KIND "bridge" }
    assert_eq!(
        bytes(msg, NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK),
        "44 00 00 00 10 00 05 06 01 00 00 00 00 00 00 00\n\
         00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00\n\
         0a 00 03 00 6b 6e 69 64 30 00 00 00 08 00 04 00\n\
         78 05 00 00 10 00 12 00 0b 00 01 00 62 72 69 64\n\
         67 65 00 00"
    );
}

#[test]
fn set_up_and_down_touch_only_iff_up() {
    // nlmsghdr(32, RTM_SETLINK, REQUEST|ACK) | ifinfomsg(index 5, flags IFF_UP or 0, change IFF_UP)
    assert_eq!(
        bytes(
            RouteNetlinkMessage::SetLink(set_up_message(5, true)),
            NLM_F_ACK
        ),
        "20 00 00 00 13 00 05 00 01 00 00 00 00 00 00 00\n\
         00 00 00 00 05 00 00 00 01 00 00 00 01 00 00 00"
    );
    assert_eq!(
        bytes(
            RouteNetlinkMessage::SetLink(set_up_message(5, false)),
            NLM_F_ACK
        ),
        "20 00 00 00 13 00 05 00 01 00 00 00 00 00 00 00\n\
         00 00 00 00 05 00 00 00 00 00 00 00 01 00 00 00"
    );
}

#[test]
fn set_controller_and_nomaster() {
    let set =
        |c| RouteNetlinkMessage::SetLink(set_attribute_message(5, LinkAttribute::Controller(c)));
    // nlmsghdr(40, RTM_SETLINK, REQUEST|ACK) | ifinfomsg(index 5) | IFLA_MASTER 3, then 0
    assert_eq!(
        bytes(set(3), NLM_F_ACK),
        "28 00 00 00 13 00 05 00 01 00 00 00 00 00 00 00\n\
         00 00 00 00 05 00 00 00 00 00 00 00 00 00 00 00\n\
         08 00 0a 00 03 00 00 00"
    );
    assert_eq!(
        bytes(set(0), NLM_F_ACK),
        "28 00 00 00 13 00 05 00 01 00 00 00 00 00 00 00\n\
         00 00 00 00 05 00 00 00 00 00 00 00 00 00 00 00\n\
         08 00 0a 00 00 00 00 00"
    );
}

#[test]
fn retire_sets_down_nomaster_and_group_in_one_request() {
    // nlmsghdr(48, RTM_SETLINK, REQUEST|ACK) | ifinfomsg(index 5, flags 0, change IFF_UP)
    // | IFLA_MASTER 0 | IFLA_GROUP 0x6b6e6964
    assert_eq!(
        bytes(
            RouteNetlinkMessage::SetLink(retire_message(by_index(5), 0x6b6e_6964)),
            NLM_F_ACK
        ),
        "30 00 00 00 13 00 05 00 01 00 00 00 00 00 00 00\n\
         00 00 00 00 05 00 00 00 00 00 00 00 01 00 00 00\n\
         08 00 0a 00 00 00 00 00 08 00 1b 00 64 69 6e 6b"
    );
    // By name: ifinfomsg(index 0) | IFLA_IFNAME "kn0a1b2c3d4e" | IFLA_MASTER 0 | IFLA_GROUP 9
    assert_eq!(
        bytes(
            RouteNetlinkMessage::SetLink(retire_message(by_name("kn0a1b2c3d4e"), 9)),
            NLM_F_ACK
        ),
        "44 00 00 00 13 00 05 00 01 00 00 00 00 00 00 00\n\
         00 00 00 00 00 00 00 00 00 00 00 00 01 00 00 00\n\
         11 00 03 00 6b 6e 30 61 31 62 32 63 33 64 34 65\n\
         00 00 00 00 08 00 0a 00 00 00 00 00 08 00 1b 00\n\
         09 00 00 00"
    );
}

#[test]
fn delete_group_has_no_index_and_no_name() {
    // nlmsghdr(40, RTM_DELLINK, REQUEST|ACK) | ifinfomsg(index 0) | IFLA_GROUP 77
    assert_eq!(
        bytes(
            RouteNetlinkMessage::DelLink(delete_group_message(77)),
            NLM_F_ACK
        ),
        "28 00 00 00 11 00 05 00 01 00 00 00 00 00 00 00\n\
         00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00\n\
         08 00 1b 00 4d 00 00 00"
    );
}

#[test]
fn port_dump_is_filtered_by_controller_and_skips_stats() {
    // nlmsghdr(48, RTM_GETLINK, REQUEST|DUMP) | ifinfomsg 0 | IFLA_EXT_MASK SKIP_STATS
    // | IFLA_MASTER 3
    assert_eq!(
        bytes(
            RouteNetlinkMessage::GetLink(dump_message(Some(3))),
            NLM_F_DUMP
        ),
        "30 00 00 00 12 00 01 03 01 00 00 00 00 00 00 00\n\
         00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00\n\
         08 00 1d 00 08 00 00 00 08 00 0a 00 03 00 00 00"
    );
}

#[test]
fn get_by_name_is_a_plain_get() {
    // nlmsghdr(52, RTM_GETLINK, REQUEST) | ifinfomsg 0 | IFLA_IFNAME "eth0" | IFLA_EXT_MASK 8
    assert_eq!(
        bytes(RouteNetlinkMessage::GetLink(get_by_name_message("eth0")), 0),
        "34 00 00 00 12 00 01 00 01 00 00 00 00 00 00 00\n\
         00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00\n\
         09 00 03 00 65 74 68 30 00 00 00 00 08 00 1d 00\n\
         08 00 00 00"
    );
}

#[test]
fn parse_reads_every_field_we_expose() {
    let mut msg = set_up_message(9, true);
    msg.attributes = vec![
        LinkAttribute::IfName("kn1".into()),
        LinkAttribute::Mtu(1450),
        LinkAttribute::Controller(4),
        LinkAttribute::Group(7),
        LinkAttribute::Address(vec![2, 0, 0, 0, 0, 1]),
        LinkAttribute::LinkInfo(vec![LinkInfo::Kind(InfoKind::Veth)]),
    ];
    let link = parse_link(&msg);
    assert_eq!(
        link,
        Link {
            index: 9,
            name: "kn1".into(),
            kind: Some("veth".into()),
            mac: Some([2, 0, 0, 0, 0, 1]),
            mtu: 1450,
            controller: Some(4),
            up: true,
            group: 7,
        }
    );
    // IFLA_MASTER 0 is "no controller"; a non-Ethernet address is no MAC.
    msg.attributes = vec![
        LinkAttribute::Controller(0),
        LinkAttribute::Address(vec![1, 2, 3, 4]),
    ];
    let link = parse_link(&msg);
    assert_eq!((link.controller, link.mac), (None, None));
}
