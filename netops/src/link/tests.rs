//! Golden bytes of every link request we build. Each was checked field by field against
//! include/uapi/linux/{netlink,rtnetlink,if_link,veth}.h, and the same builders run against
//! the kernel in tests/kernel/links.rs. Sequence number 1, port 0.

use super::*;
use crate::rtnl::{data_message_for_test, encode_for_test, hex};
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
    // nlmsghdr(180, RTM_NEWLINK, REQUEST|ACK|EXCL|CREATE, seq 1) | ifinfomsg 0
    // | IFLA_IFNAME "kn0a1b2c3d4e" | IFLA_NUM_TX_QUEUES 1 | IFLA_NUM_RX_QUEUES 1 | IFLA_MTU 1400
    // | IFLA_MASTER 3 | IFLA_LINKINFO { IFLA_INFO_KIND "veth" | IFLA_INFO_DATA { VETH_INFO_PEER {
    //   ifinfomsg 0 | IFLA_IFNAME "eth0" | IFLA_NUM_TX_QUEUES 1 | IFLA_NUM_RX_QUEUES 1
    //   | IFLA_MTU 1400 | IFLA_ADDRESS 02:42:0a:58:00:05 | IFLA_NET_NS_FD 9 }}}
    assert_eq!(
        bytes(msg, NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK),
        "b4 00 00 00 10 00 05 06 01 00 00 00 00 00 00 00\n\
         00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00\n\
         11 00 03 00 6b 6e 30 61 31 62 32 63 33 64 34 65\n\
         00 00 00 00 08 00 1f 00 01 00 00 00 08 00 20 00\n\
         01 00 00 00 08 00 04 00 78 05 00 00 08 00 0a 00\n\
         03 00 00 00 60 00 12 00 09 00 01 00 76 65 74 68\n\
         00 00 00 00 50 00 02 00 4c 00 01 00 00 00 00 00\n\
         00 00 00 00 00 00 00 00 00 00 00 00 09 00 03 00\n\
         65 74 68 30 00 00 00 00 08 00 1f 00 01 00 00 00\n\
         08 00 20 00 01 00 00 00 08 00 04 00 78 05 00 00\n\
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
fn alias_is_set_on_the_link_named() {
    // nlmsghdr(56, RTM_SETLINK, REQUEST|ACK) | ifinfomsg(index 0) | IFLA_IFNAME "kn0a1b2c3d4e"
    // | IFLA_IFALIAS "knid:ab"
    assert_eq!(
        bytes(
            RouteNetlinkMessage::SetLink(alias_message(by_name("kn0a1b2c3d4e"), "knid:ab")),
            NLM_F_ACK
        ),
        "40 00 00 00 13 00 05 00 01 00 00 00 00 00 00 00\n\
         00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00\n\
         11 00 03 00 6b 6e 30 61 31 62 32 63 33 64 34 65\n\
         00 00 00 00 0c 00 14 00 6b 6e 69 64 3a 61 62 00"
    );
}

#[test]
fn alias_group_and_hairpin_go_in_one_newlink_on_the_link_named() {
    // nlmsghdr(100, RTM_NEWLINK, REQUEST|ACK) | ifinfomsg(index 0) | IFLA_IFNAME "kn0a1b2c3d4e"
    // | IFLA_IFALIAS "knid:ab" | IFLA_GROUP 0 | IFLA_LINKINFO { IFLA_INFO_SLAVE_KIND "bridge"
    // | IFLA_INFO_SLAVE_DATA { IFLA_BRPORT_MODE 1 } }
    let msg = alias_group_message(by_name("kn0a1b2c3d4e"), "knid:ab", 0, Some(true));
    assert_eq!(
        bytes(RouteNetlinkMessage::NewLink(msg), NLM_F_ACK),
        "64 00 00 00 10 00 05 00 01 00 00 00 00 00 00 00\n\
         00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00\n\
         11 00 03 00 6b 6e 30 61 31 62 32 63 33 64 34 65\n\
         00 00 00 00 0c 00 14 00 6b 6e 69 64 3a 61 62 00\n\
         08 00 1b 00 00 00 00 00 1c 00 12 00 0b 00 04 00\n\
         62 72 69 64 67 65 00 00 0c 00 05 00 05 00 04 00\n\
         01 00 00 00"
    );
    // Without a hairpin mode: alias and group only.
    let msg = alias_group_message(by_name("kn0a1b2c3d4e"), "knid:ab", 0, None);
    assert_eq!(
        bytes(RouteNetlinkMessage::NewLink(msg), NLM_F_ACK),
        "48 00 00 00 10 00 05 00 01 00 00 00 00 00 00 00\n\
         00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00\n\
         11 00 03 00 6b 6e 30 61 31 62 32 63 33 64 34 65\n\
         00 00 00 00 0c 00 14 00 6b 6e 69 64 3a 61 62 00\n\
         08 00 1b 00 00 00 00 00"
    );
}

#[test]
fn down_with_an_alias_and_a_port_released_by_name_are_one_setlink_each() {
    // nlmsghdr(52, RTM_SETLINK, REQUEST|ACK) | ifinfomsg(index 4, flags 0, change IFF_UP)
    // | IFLA_IFALIAS "knid:ab"
    let msg = alias_message(set_up_message(4, false), "knid:ab");
    assert_eq!(
        bytes(RouteNetlinkMessage::SetLink(msg), NLM_F_ACK),
        "2c 00 00 00 13 00 05 00 01 00 00 00 00 00 00 00\n\
         00 00 00 00 04 00 00 00 00 00 00 00 01 00 00 00\n\
         0c 00 14 00 6b 6e 69 64 3a 61 62 00"
    );
    // nlmsghdr(68, RTM_SETLINK, REQUEST|ACK) | ifinfomsg(index 0, no flag change)
    // | IFLA_IFNAME "kn0a1b2c3d4e" | IFLA_GROUP 9 | IFLA_MASTER 0
    let mut msg = group_message(by_name("kn0a1b2c3d4e"), 9);
    msg.attributes.push(LinkAttribute::Controller(0));
    assert_eq!(
        bytes(RouteNetlinkMessage::SetLink(msg), NLM_F_ACK),
        "44 00 00 00 13 00 05 00 01 00 00 00 00 00 00 00\n\
         00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00\n\
         11 00 03 00 6b 6e 30 61 31 62 32 63 33 64 34 65\n\
         00 00 00 00 08 00 1b 00 09 00 00 00 08 00 0a 00\n\
         00 00 00 00"
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
        LinkAttribute::IfAlias("knid:0a1b".into()),
        LinkAttribute::NumTxQueues(2),
        LinkAttribute::NumRxQueues(3),
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
            parent: None,
            macvlan_mode: None,
            ipvlan_mode: None,
            permanent_mac: None,
            alias: Some("knid:0a1b".into()),
            queues: (2, 3),
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

fn child(name: &str, kind: ChildKind, mtu: Option<u32>, mac: Option<Mac>) -> ChildSpec {
    ChildSpec {
        name: name.into(),
        parent: 2,
        kind,
        mtu,
        mac,
    }
}

#[test]
fn macvlan_bridge_create_with_mtu_mac_and_parent() {
    let spec = child(
        "mv0",
        ChildKind::Macvlan(MacvlanMode::Bridge),
        Some(1400),
        Some([0x02, 0x42, 0x0a, 0x58, 0x00, 0x07]),
    );
    // nlmsghdr(96, RTM_NEWLINK, REQUEST|ACK|EXCL|CREATE, seq 1) | ifinfomsg 0
    // | IFLA_IFNAME "mv0" | IFLA_MTU 1400 | IFLA_ADDRESS 02:42:0a:58:00:07 (+2 pad)
    // | IFLA_LINK 2 | IFLA_LINKINFO { IFLA_INFO_KIND "macvlan"
    //   | IFLA_INFO_DATA { IFLA_MACVLAN_MODE (u32) 4 = MACVLAN_MODE_BRIDGE } }
    assert_eq!(
        bytes(
            RouteNetlinkMessage::NewLink(child_message(&spec)),
            NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK
        ),
        "60 00 00 00 10 00 05 06 01 00 00 00 00 00 00 00\n\
         00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00\n\
         08 00 03 00 6d 76 30 00 08 00 04 00 78 05 00 00\n\
         0a 00 01 00 02 42 0a 58 00 07 00 00 08 00 05 00\n\
         02 00 00 00 1c 00 12 00 0c 00 01 00 6d 61 63 76\n\
         6c 61 6e 00 0c 00 02 00 08 00 01 00 04 00 00 00"
    );
}

#[test]
fn macvlan_modes_use_the_uapi_values() {
    // MACVLAN_MODE_PRIVATE 1, _VEPA 2, _BRIDGE 4, _PASSTHRU 8: the last byte-quad of the
    // request is the IFLA_MACVLAN_MODE value.
    for (mode, value) in [
        (MacvlanMode::Private, "01"),
        (MacvlanMode::Vepa, "02"),
        (MacvlanMode::Bridge, "04"),
        (MacvlanMode::Passthru, "08"),
    ] {
        let spec = child("mv0", ChildKind::Macvlan(mode), None, None);
        let hex = bytes(RouteNetlinkMessage::NewLink(child_message(&spec)), 0);
        assert!(
            hex.ends_with(&format!("08 00 01 00 {value} 00 00 00")),
            "{mode:?}: {hex}"
        );
    }
}

#[test]
fn ipvlan_l3_create_without_mtu_or_mac() {
    let spec = child("ipv0", ChildKind::Ipvlan(IpvlanMode::L3), None, None);
    // nlmsghdr(80, RTM_NEWLINK, REQUEST|ACK|EXCL|CREATE) | ifinfomsg 0 | IFLA_IFNAME "ipv0"
    // | IFLA_LINK 2 | IFLA_LINKINFO { IFLA_INFO_KIND "ipvlan"
    //   | IFLA_INFO_DATA { IFLA_IPVLAN_MODE (u16) 1 = IPVLAN_MODE_L3 (+2 pad) } }
    assert_eq!(
        bytes(
            RouteNetlinkMessage::NewLink(child_message(&spec)),
            NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK
        ),
        "50 00 00 00 10 00 05 06 01 00 00 00 00 00 00 00\n\
         00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00\n\
         09 00 03 00 69 70 76 30 00 00 00 00 08 00 05 00\n\
         02 00 00 00 1c 00 12 00 0b 00 01 00 69 70 76 6c\n\
         61 6e 00 00 0c 00 02 00 06 00 01 00 01 00 00 00"
    );
    // IPVLAN_MODE_L2 is 0.
    let spec = child("ipv0", ChildKind::Ipvlan(IpvlanMode::L2), None, None);
    let hex = bytes(RouteNetlinkMessage::NewLink(child_message(&spec)), 0);
    assert!(hex.ends_with("06 00 01 00 00 00 00 00"), "{hex}");
}

#[test]
fn a_mac_the_kernel_would_ignore_is_refused() {
    let mac = Some([2, 0, 0, 0, 0, 1]);
    let ipvlan = child("c", ChildKind::Ipvlan(IpvlanMode::L2), None, mac);
    assert!(check_child(&ipvlan).is_err());
    let passthru = child("c", ChildKind::Macvlan(MacvlanMode::Passthru), None, mac);
    assert!(check_child(&passthru).is_err());
    let bridge = child("c", ChildKind::Macvlan(MacvlanMode::Bridge), None, mac);
    assert!(check_child(&bridge).is_ok());
    let passthru = child("c", ChildKind::Macvlan(MacvlanMode::Passthru), None, None);
    assert!(check_child(&passthru).is_ok());
}

#[test]
fn dummy_create() {
    // nlmsghdr(64, RTM_NEWLINK, REQUEST|ACK|EXCL|CREATE) | ifinfomsg 0 | IFLA_IFNAME "kd0"
    // | IFLA_MTU 9000 | IFLA_LINKINFO { IFLA_INFO_KIND "dummy" (+2 pad) }
    assert_eq!(
        bytes(
            RouteNetlinkMessage::NewLink(new_kind_message("kd0", Some(9000), InfoKind::Dummy)),
            NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK
        ),
        "40 00 00 00 10 00 05 06 01 00 00 00 00 00 00 00\n\
         00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00\n\
         08 00 03 00 6b 64 30 00 08 00 04 00 28 23 00 00\n\
         10 00 12 00 0a 00 01 00 64 75 6d 6d 79 00 00 00"
    );
}

#[test]
fn move_to_netns_with_rename_is_one_setlink_by_index() {
    // nlmsghdr(52, RTM_SETLINK, REQUEST|ACK) | ifinfomsg(index 7, flags 0, change 0)
    // | IFLA_NET_NS_FD 9 | IFLA_IFNAME "eth1" (the new name: the link is selected by index)
    assert_eq!(
        bytes(
            RouteNetlinkMessage::SetLink(move_message(7, 9, Some("eth1"))),
            NLM_F_ACK
        ),
        "34 00 00 00 13 00 05 00 01 00 00 00 00 00 00 00\n\
         00 00 00 00 07 00 00 00 00 00 00 00 00 00 00 00\n\
         08 00 1c 00 09 00 00 00 09 00 03 00 65 74 68 31\n\
         00 00 00 00"
    );
    // Without a new name: no IFLA_IFNAME at all.
    assert_eq!(
        bytes(
            RouteNetlinkMessage::SetLink(move_message(7, 9, None)),
            NLM_F_ACK
        ),
        "28 00 00 00 13 00 05 00 01 00 00 00 00 00 00 00\n\
         00 00 00 00 07 00 00 00 00 00 00 00 00 00 00 00\n\
         08 00 1c 00 09 00 00 00"
    );
}

#[test]
fn rename_is_ifname_on_a_setlink_by_index() {
    // nlmsghdr(44, RTM_SETLINK, REQUEST|ACK) | ifinfomsg(index 7) | IFLA_IFNAME "eth1"
    assert_eq!(
        bytes(
            RouteNetlinkMessage::SetLink(rename_message(7, "eth1")),
            NLM_F_ACK
        ),
        "2c 00 00 00 13 00 05 00 01 00 00 00 00 00 00 00\n\
         00 00 00 00 07 00 00 00 00 00 00 00 00 00 00 00\n\
         09 00 03 00 65 74 68 31 00 00 00 00"
    );
}

#[test]
fn parse_reads_parent_mode_and_permanent_mac_of_a_macvlan() {
    let mut msg = by_index(9);
    msg.attributes = vec![
        LinkAttribute::IfName("mv0".into()),
        LinkAttribute::Link(3),
        LinkAttribute::PermAddress(vec![0x0c, 0x42, 0xa1, 0, 0, 1]),
        LinkAttribute::LinkInfo(vec![
            LinkInfo::Kind(InfoKind::MacVlan),
            LinkInfo::Data(InfoData::MacVlan(vec![
                InfoMacVlan::BcQueueLen(1000),
                InfoMacVlan::Mode(MacVlanMode::Passthrough),
            ])),
        ]),
    ];
    let link = parse_link(&msg);
    assert_eq!(link.kind.as_deref(), Some("macvlan"));
    assert_eq!(link.parent, Some(3));
    assert_eq!(link.macvlan_mode, Some(MacvlanMode::Passthru));
    assert_eq!(link.ipvlan_mode, None);
    assert_eq!(link.permanent_mac, Some([0x0c, 0x42, 0xa1, 0, 0, 1]));
}

#[test]
fn parse_reads_ipvlan_mode_and_skips_l3s() {
    let ipvlan = |mode| {
        let mut msg = by_index(9);
        msg.attributes = vec![LinkAttribute::LinkInfo(vec![
            LinkInfo::Kind(InfoKind::IpVlan),
            LinkInfo::Data(InfoData::IpVlan(vec![InfoIpVlan::Mode(mode)])),
        ])];
        parse_link(&msg)
    };
    assert_eq!(ipvlan(IpVlanMode::L2).ipvlan_mode, Some(IpvlanMode::L2));
    assert_eq!(ipvlan(IpVlanMode::L3).ipvlan_mode, Some(IpvlanMode::L3));
    assert_eq!(ipvlan(IpVlanMode::L3S).ipvlan_mode, None);
    assert_eq!(ipvlan(IpVlanMode::L3).macvlan_mode, None);
}

#[test]
fn parse_drops_a_parent_that_is_itself_or_in_another_netns() {
    let mut msg = by_index(9);
    msg.attributes = vec![LinkAttribute::Link(9)];
    assert_eq!(parse_link(&msg).parent, None, "IFLA_LINK == own index");
    // IFLA_LINK_NETNSID says IFLA_LINK indexes another namespace; it may come before or after.
    msg.attributes = vec![LinkAttribute::Link(3), LinkAttribute::LinkNetNsId(0)];
    assert_eq!(parse_link(&msg).parent, None);
    msg.attributes = vec![LinkAttribute::LinkNetNsId(0), LinkAttribute::Link(3)];
    assert_eq!(parse_link(&msg).parent, None);
    // A permanent address that is not Ethernet is none.
    msg.attributes = vec![LinkAttribute::PermAddress(vec![0; 20])];
    assert_eq!(parse_link(&msg).permanent_mac, None);
}

#[test]
fn modes_round_trip_through_their_names() {
    for m in [
        MacvlanMode::Private,
        MacvlanMode::Vepa,
        MacvlanMode::Bridge,
        MacvlanMode::Passthru,
    ] {
        assert_eq!(MacvlanMode::parse(m.as_str()), Some(m));
    }
    for m in [IpvlanMode::L2, IpvlanMode::L3] {
        assert_eq!(IpvlanMode::parse(m.as_str()), Some(m));
    }
    assert_eq!(MacvlanMode::parse("source"), None);
    assert_eq!(MacvlanMode::parse("Bridge"), None);
    assert_eq!(IpvlanMode::parse("l3s"), None);
    assert_eq!(MacvlanMode::Passthru.as_str(), "passthru");
}

/// The bytes of a link message as the kernel would send it (its encoding is the crate's).
fn link_bytes(attributes: Vec<LinkAttribute>) -> Vec<u8> {
    let mut msg = LinkMessage::default();
    msg.header.interface_family = AddressFamily::Bridge;
    msg.header.index = 9;
    msg.attributes = attributes;
    encode_for_test(RouteNetlinkMessage::NewLink(msg), 0)
}

#[test]
fn the_controller_is_read_past_other_and_nested_attributes() {
    let bytes = link_bytes(vec![
        LinkAttribute::IfName("kn0123456789ab".into()),
        LinkAttribute::LinkInfo(vec![LinkInfo::Kind(InfoKind::Veth)]),
        LinkAttribute::Mtu(1450),
        LinkAttribute::Controller(4),
        LinkAttribute::Group(7),
    ]);
    assert_eq!(controller_of(&bytes), Ok(Some(4)));
    assert_eq!(
        parse_link_reply(&data_message_for_test(&bytes)).and_then(|l| l.controller),
        Some(4),
        "the crate's parse agrees"
    );
}

#[test]
fn the_index_is_read_from_the_header_without_the_attributes() {
    let bytes = link_bytes(vec![
        LinkAttribute::IfName("eth0".into()),
        LinkAttribute::Mtu(1500),
    ]);
    assert_eq!(index_of(&bytes), Ok(9));
    assert_eq!(
        parse_link_reply(&data_message_for_test(&bytes)).map(|l| l.index),
        Some(9),
        "the crate's parse agrees"
    );
    let get = encode_for_test(RouteNetlinkMessage::GetLink(LinkMessage::default()), 0);
    assert_eq!(index_of(&get), Err("not a link message"));
    assert_eq!(index_of(&bytes[..31]), Err("not a link message"));
}

#[test]
fn no_controller_and_controller_zero_are_none() {
    let none = link_bytes(vec![LinkAttribute::IfName("eth0".into())]);
    assert_eq!(controller_of(&none), Ok(None));
    assert_eq!(controller_of(&link_bytes(vec![])), Ok(None));
    let zero = link_bytes(vec![LinkAttribute::Controller(0)]);
    assert_eq!(controller_of(&zero), Ok(None));
}

#[test]
fn malformed_link_messages_are_refused() {
    let bytes = link_bytes(vec![
        LinkAttribute::IfName("eth0".into()),
        LinkAttribute::Controller(4),
    ]);
    // Cut inside the last attribute: its length runs past the end.
    assert!(controller_of(&bytes[..bytes.len() - 2]).is_err());
    // Cut inside an attribute's own header.
    let headers = 32;
    assert!(controller_of(&bytes[..headers + 2]).is_err());
    // Not a link message: a get request.
    let get = encode_for_test(
        RouteNetlinkMessage::GetLink(LinkMessage::default()),
        NLM_F_DUMP,
    );
    assert_eq!(controller_of(&get), Err("not a link message"));
    assert!(controller_of(&bytes[..20]).is_err());
}
