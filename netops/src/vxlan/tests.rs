//! The VXLAN create request and FDB messages, checked against include/uapi/linux/if_link.h
//! (IFLA_VXLAN_*) and neighbour.h; the same builders run against the kernel in
//! tests/kernel/vxlan.rs.

use super::*;
use crate::rtnl::{encode_for_test, hex};
use netlink_packet_core::NLM_F_ACK;

fn spec() -> VxlanSpec {
    VxlanSpec {
        name: "vxlan.knid".into(),
        vni: 1,
        port: 8472,
        local: "192.168.100.1".parse().unwrap(),
        underlay: 2,
        mtu: 1450,
        mac: [0x02, 1, 2, 3, 4, 5],
    }
}

#[test]
fn the_create_request_carries_vni_local_underlay_port_in_network_order_and_learning_off() {
    let msg = RouteNetlinkMessage::NewLink(vxlan_message(&spec()));
    let text = hex(&encode_for_test(msg, NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK));
    let flat = text.replace('\n', " ");
    // IFLA_INFO_KIND "vxlan"
    assert!(flat.contains("76 78 6c 61 6e 00"), "{text}");
    // IFLA_VXLAN_ID (1) = 1
    assert!(flat.contains("08 00 01 00 01 00 00 00"), "{text}");
    // IFLA_VXLAN_LOCAL (4) = 192.168.100.1
    assert!(flat.contains("08 00 04 00 c0 a8 64 01"), "{text}");
    // IFLA_VXLAN_LINK (3) = 2
    assert!(flat.contains("08 00 03 00 02 00 00 00"), "{text}");
    // IFLA_VXLAN_PORT (15) = 8472, big-endian 0x2118
    assert!(flat.contains("06 00 0f 00 21 18"), "{text}");
    // IFLA_VXLAN_LEARNING (7) = 0
    assert!(flat.contains("05 00 07 00 00"), "{text}");
}

#[test]
fn an_fdb_entry_is_a_permanent_self_entry_of_the_bridge_family_and_reads_back() {
    let dst: IpAddr = "fd00:101::3".parse().unwrap();
    let msg = fdb_message(7, [0x02, 0xaa, 0, 0, 0, 1], Some(dst));
    assert_eq!(msg.header.family, AddressFamily::Bridge);
    assert_eq!(msg.header.state, NeighbourState::Permanent);
    assert_eq!(msg.header.flags, NeighbourFlags::Own);
    let back = parse_fdb(&msg).expect("an entry");
    assert_eq!(back.mac, [0x02, 0xaa, 0, 0, 0, 1]);
    assert_eq!(back.dst, Some(dst));
    assert!(back.permanent);
    let v4 = fdb_message(
        7,
        [0x02, 0xaa, 0, 0, 0, 1],
        Some("192.168.101.3".parse().unwrap()),
    );
    assert_eq!(
        parse_fdb(&v4).unwrap().dst,
        Some("192.168.101.3".parse().unwrap())
    );
}
