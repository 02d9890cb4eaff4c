use super::*;
use crate::rtnl::{encode_for_test, hex};

fn net(s: &str) -> IpNet {
    s.parse().expect("valid cidr")
}

#[test]
fn ipv4_add_golden_bytes() {
    let msg = RouteNetlinkMessage::NewAddress(add_message(7, net("10.88.0.1/16")));
    let bytes = encode_for_test(
        msg,
        NLM_F_CREATE | NLM_F_EXCL | netlink_packet_core::NLM_F_ACK,
    );
    // nlmsghdr(len 48, RTM_NEWADDR 20, REQUEST|ACK|EXCL|CREATE, seq 1) | ifaddrmsg(AF_INET,
    // /16, flags 0, scope 0, index 7) | IFA_LOCAL 10.88.0.1 | IFA_ADDRESS 10.88.0.1 |
    // IFA_BROADCAST 10.88.255.255
    assert_eq!(
        hex(&bytes),
        "30 00 00 00 14 00 05 06 01 00 00 00 00 00 00 00\n\
         02 10 00 00 07 00 00 00 08 00 02 00 0a 58 00 01\n\
         08 00 01 00 0a 58 00 01 08 00 04 00 0a 58 ff ff"
    );
}

#[test]
fn ipv6_add_golden_bytes() {
    let msg = RouteNetlinkMessage::NewAddress(add_message(7, net("fd00:88::1/64")));
    let bytes = encode_for_test(
        msg,
        NLM_F_CREATE | NLM_F_EXCL | netlink_packet_core::NLM_F_ACK,
    );
    // ifaddrmsg(AF_INET6 10, /64, IFA_F_NODAD 2, scope 0, index 7) | IFA_LOCAL | IFA_ADDRESS
    assert_eq!(
        hex(&bytes),
        "40 00 00 00 14 00 05 06 01 00 00 00 00 00 00 00\n\
         0a 40 02 00 07 00 00 00 14 00 02 00 fd 00 00 88\n\
         00 00 00 00 00 00 00 00 00 00 00 01 14 00 01 00\n\
         fd 00 00 88 00 00 00 00 00 00 00 00 00 00 00 01"
    );
}

#[test]
fn point_to_point_ipv4_gets_no_broadcast() {
    let msg = add_message(3, net("10.0.0.1/31"));
    assert!(!msg
        .attributes
        .iter()
        .any(|a| matches!(a, AddressAttribute::Broadcast(_))));
}

#[test]
fn parse_prefers_local_over_peer_address() {
    let mut msg = address_message(4, net("192.0.2.1/24"));
    msg.attributes[1] = AddressAttribute::Address("192.0.2.9".parse().expect("ip"));
    let parsed = parse_address(&msg).expect("parsed");
    assert_eq!(
        parsed,
        Address {
            index: 4,
            net: net("192.0.2.1/24")
        }
    );
}

#[test]
fn eacces_on_ipv6_gets_a_readable_text_and_keeps_errno() {
    let e = ipv6_disabled(Error::netlink(
        "add address",
        "fd00::1/64 on index 2",
        libc::EACCES,
        None,
    ));
    assert_eq!(e.errno(), Some(libc::EACCES));
    assert!(e.to_string().contains("ipv6 is disabled"), "{e}");
}
