//! Golden bytes of every tc request we build, and parses of replies the kernel sent. Requests
//! were checked field by field against include/uapi/linux/{netlink,rtnetlink,pkt_sched,
//! pkt_cls,tc_act/tc_mirred}.h and run against the kernel in tests/kernel/tap.rs. Sequence
//! number 1, port 0.
//!
//! Layouts (all native-endian unless noted):
//! - `struct tcmsg` (20 bytes): family u8, pad u8, pad u16, ifindex i32, handle u32,
//!   parent u32, info u32. For filters info = TC_H_MAKE(prio << 16, protocol), protocol
//!   big-endian (ETH_P_ALL 0x0003 reads `00 03` on the wire).
//! - `struct tc_u32_sel` (16 bytes + 16 per key): flags u8 (TC_U32_TERMINAL 1), offshift u8,
//!   nkeys u8, pad u8, offmask be16, off u16, offoff i16, hoff i16, hmask be32.
//! - `struct tc_mirred` (28 bytes): tc_gen { index u32, capab u32, action i32
//!   (TC_ACT_STOLEN 4), refcnt i32, bindcnt i32 }, eaction i32 (TCA_EGRESS_REDIR 1),
//!   ifindex u32.
//! - Attributes: TCA_KIND 1, TCA_OPTIONS 2; TCA_U32_SEL 5, TCA_U32_ACT 7 (actions nested by
//!   order, 1 first); TCA_ACT_KIND 1, TCA_ACT_OPTIONS 2 (sent with NLA_F_NESTED 0x8000);
//!   TCA_MIRRED_TM 1, TCA_MIRRED_PARMS 2.

use super::*;
use crate::rtnl::{encode_for_test, hex};
use netlink_packet_core::{NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_DUMP};
use netlink_packet_route::tc::TcU32Key;

fn bytes(msg: RouteNetlinkMessage, flags: u16) -> String {
    hex(&encode_for_test(msg, flags))
}

/// Parses a reply the way `Rtnl` does.
fn reply(hex_text: &str) -> RouteNetlinkMessage {
    let raw: Vec<u8> = hex_text
        .split_whitespace()
        .map(|b| u8::from_str_radix(b, 16).expect("hex byte"))
        .collect();
    match NetlinkMessage::<RouteNetlinkMessage>::deserialize(&raw)
        .expect("kernel reply parses")
        .payload
    {
        NetlinkPayload::InnerMessage(m) => m,
        other => panic!("not a data message: {other:?}"),
    }
}

fn filter_of(msg: RouteNetlinkMessage) -> TcMessage {
    match msg {
        RouteNetlinkMessage::NewTrafficFilter(f) => f,
        other => panic!("not a filter: {other:?}"),
    }
}

#[test]
fn ingress_qdisc_add() {
    // nlmsghdr(48, RTM_NEWQDISC 36, REQUEST|ACK|EXCL|CREATE) | tcmsg(ifindex 5, handle ffff:0,
    // parent TC_H_INGRESS ffff:fff1) | TCA_KIND "ingress"
    assert_eq!(
        bytes(
            RouteNetlinkMessage::NewQueueDiscipline(ingress_qdisc_message(5)),
            NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK
        ),
        "30 00 00 00 24 00 05 06 01 00 00 00 00 00 00 00\n\
         00 00 00 00 05 00 00 00 00 00 ff ff f1 ff ff ff\n\
         00 00 00 00 0c 00 01 00 69 6e 67 72 65 73 73 00"
    );
}

#[test]
fn qdisc_dump_is_unfiltered() {
    // nlmsghdr(36, RTM_GETQDISC 38, REQUEST|DUMP) | tcmsg 0: the kernel ignores tcm_ifindex here.
    assert_eq!(
        bytes(
            RouteNetlinkMessage::GetQueueDiscipline(TcMessage::default()),
            NLM_F_DUMP
        ),
        "24 00 00 00 26 00 01 03 01 00 00 00 00 00 00 00\n\
         00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00\n\
         00 00 00 00"
    );
}

#[test]
fn redirect_filter_is_u32_match_all_with_one_mirred_egress_redirect() {
    let msg = RouteNetlinkMessage::NewTrafficFilter(redirect_filter_message(5, 9, 0));
    // nlmsghdr(124, RTM_NEWTFILTER 44, REQUEST|ACK|REPLACE|CREATE)
    // | tcmsg(ifindex 5, handle 0: kernel's choice, parent ffff:fff2, info prio 1 | ETH_P_ALL)
    // | TCA_KIND "u32"
    // | TCA_OPTIONS { TCA_U32_SEL { flags TERMINAL, nkeys 0 }
    //   | TCA_U32_ACT { [1] { TCA_ACT_KIND "mirred"
    //     | TCA_ACT_OPTIONS { TCA_MIRRED_PARMS { tc_gen { action STOLEN },
    //                                           eaction EGRESS_REDIR, ifindex 9 }}}}}
    assert_eq!(
        bytes(msg, NLM_F_CREATE | NLM_F_REPLACE | NLM_F_ACK),
        "7c 00 00 00 2c 00 05 05 01 00 00 00 00 00 00 00\n\
         00 00 00 00 05 00 00 00 00 00 00 00 f2 ff ff ff\n\
         00 03 01 00 08 00 01 00 75 33 32 00 50 00 02 00\n\
         14 00 05 00 01 00 00 00 00 00 00 00 00 00 00 00\n\
         00 00 00 00 38 00 07 00 34 00 01 00 0b 00 01 00\n\
         6d 69 72 72 65 64 00 00 24 00 02 80 20 00 02 00\n\
         00 00 00 00 00 00 00 00 04 00 00 00 00 00 00 00\n\
         00 00 00 00 01 00 00 00 09 00 00 00"
    );
}

#[test]
fn redirect_replace_names_the_kernel_given_handle() {
    let msg = RouteNetlinkMessage::NewTrafficFilter(redirect_filter_message(5, 9, 0x8010_0800));
    let text = bytes(msg, NLM_F_CREATE | NLM_F_REPLACE | NLM_F_ACK);
    // Only tcm_handle differs from the create: 801::800.
    let second_line = text.lines().nth(1).expect("second line");
    assert_eq!(
        second_line,
        "00 00 00 00 05 00 00 00 00 08 10 80 f2 ff ff ff"
    );
}

#[test]
fn filter_dump_and_priority_delete_address_the_ingress_hook() {
    // nlmsghdr(36, RTM_GETTFILTER 46, REQUEST|DUMP) | tcmsg(ifindex 5, parent ffff:fff2)
    assert_eq!(
        bytes(
            RouteNetlinkMessage::GetTrafficFilter(filter_dump_message(5)),
            NLM_F_DUMP
        ),
        "24 00 00 00 2e 00 01 03 01 00 00 00 00 00 00 00\n\
         00 00 00 00 05 00 00 00 00 00 00 00 f2 ff ff ff\n\
         00 00 00 00"
    );
    // nlmsghdr(36, RTM_DELTFILTER 45, REQUEST|ACK) | tcmsg(ifindex 5, handle 0,
    // parent ffff:fff2, info prio 1, protocol 0: any): the whole priority
    assert_eq!(
        bytes(
            RouteNetlinkMessage::DelTrafficFilter(delete_prio_message(5, 1)),
            NLM_F_ACK
        ),
        "24 00 00 00 2d 00 05 00 01 00 00 00 00 00 00 00\n\
         00 00 00 00 05 00 00 00 00 00 00 00 f2 ff ff ff\n\
         00 00 01 00"
    );
}

/// The kernel's (6.18) dump reply for the filter `redirect_filter_message(3, 4, 0)` installed:
/// tcmsg(ifindex 3, handle 800::800, parent ffff:fff2, prio 1, ETH_P_ALL) | TCA_KIND "u32"
/// | TCA_CHAIN 0 | TCA_OPTIONS { TCA_U32_SEL | TCA_U32_HASH 800: | TCA_U32_FLAGS NOT_IN_HW
/// | TCA_U32_ACT { [1] { "mirred" | TCA_ACT_STATS | TCA_ACT_IN_HW_COUNT 0
/// | TCA_ACT_OPTIONS { TCA_MIRRED_PARMS (index 1, ref 1, bind 1) | TCA_MIRRED_TM }}}}
const KERNEL_U32_REDIRECT: &str = "
    04 01 00 00 2c 00 02 00 02 00 00 00 66 73 00 00
    00 00 00 00 03 00 00 00 00 08 00 80 f2 ff ff ff
    00 03 01 00 08 00 01 00 75 33 32 00 08 00 0b 00
    00 00 00 00 d0 00 02 00 14 00 05 00 01 00 00 00
    00 00 00 00 00 00 00 00 00 00 00 00 08 00 02 00
    00 00 00 80 08 00 0b 00 08 00 00 00 a8 00 07 00
    a4 00 01 00 0b 00 01 00 6d 69 72 72 65 64 00 00
    44 00 04 00 14 00 01 00 00 00 00 00 00 00 00 00
    00 00 00 00 00 00 00 00 14 00 07 00 00 00 00 00
    00 00 00 00 00 00 00 00 00 00 00 00 18 00 03 00
    00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
    00 00 00 00 08 00 0a 00 00 00 00 00 48 00 02 00
    20 00 02 00 01 00 00 00 00 00 00 00 04 00 00 00
    01 00 00 00 01 00 00 00 01 00 00 00 04 00 00 00
    24 00 01 00 00 00 00 00 00 00 00 00 00 00 00 00
    00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
    00 00 00 00";

#[test]
fn kernel_u32_redirect_parses_as_our_redirect() {
    let entry = parse_filter(&filter_of(reply(KERNEL_U32_REDIRECT)));
    assert_eq!(
        (entry.prio, entry.protocol, entry.handle),
        (1, ETH_P_ALL, 0x8000_0800)
    );
    assert!(entry.node && entry.matches_all);
    assert_eq!(
        entry.redirect(3),
        Some(Redirect {
            from: 3,
            to: 4,
            egress: true,
            redirect: true,
            filter_kind: "u32".into(),
        })
    );
    assert!(entry.is_our_redirect_to(4));
    assert!(!entry.is_our_redirect_to(5));
}

#[test]
fn u32_priority_header_and_hash_table_are_not_redirects() {
    // The same dump's first two messages: the prio-1 header (handle 0, no options) and the
    // root hash table 800: (TCA_U32_DIVISOR 1).
    let header = parse_filter(&filter_of(reply(
        "34 00 00 00 2c 00 02 00 02 00 00 00 66 73 00 00
         00 00 00 00 03 00 00 00 00 00 00 00 f2 ff ff ff
         00 03 01 00 08 00 01 00 75 33 32 00 08 00 0b 00
         00 00 00 00",
    )));
    let table = parse_filter(&filter_of(reply(
        "40 00 00 00 2c 00 02 00 02 00 00 00 66 73 00 00
         00 00 00 00 03 00 00 00 00 00 00 80 f2 ff ff ff
         00 03 01 00 08 00 01 00 75 33 32 00 08 00 0b 00
         00 00 00 00 0c 00 02 00 08 00 04 00 01 00 00 00",
    )));
    for entry in [header, table] {
        assert!(!entry.node, "{entry:?}");
        assert_eq!(entry.redirect(3), None);
        assert_eq!((entry.prio, entry.protocol), (1, ETH_P_ALL));
    }
}

fn mirred_action(eaction: TcMirrorActionType, to: u32) -> TcAction {
    let mut mirror = TcMirror::default();
    mirror.generic.action = TcActionType::Pipe;
    mirror.eaction = eaction;
    mirror.ifindex = to;
    let mut action = TcAction::default();
    action.attributes = vec![
        TcActionAttribute::Kind(TcActionMirror::KIND.into()),
        TcActionAttribute::Options(vec![TcActionOption::Mirror(TcActionMirrorOption::Parms(
            mirror,
        ))]),
    ];
    action
}

/// Encodes `msg` as the kernel would send it and parses it back, as a dump entry.
fn round_trip(msg: TcMessage) -> FilterEntry {
    let raw = encode_for_test(RouteNetlinkMessage::NewTrafficFilter(msg), 0);
    parse_filter(&filter_of(reply(&hex(&raw))))
}

#[test]
fn matchall_mirror_into_ingress_is_read_as_such() {
    let mut msg = filter_dump_message(7);
    msg.header.handle = 1.into();
    msg.header.info = filter_info(49152, ETH_P_ALL);
    msg.attributes = vec![
        TcAttribute::Kind(MATCHALL_KIND.into()),
        TcAttribute::Options(vec![TcOption::MatchAll(TcFilterMatchAllOption::Action(
            vec![mirred_action(TcMirrorActionType::IngressMirror, 8)],
        ))]),
    ];
    let entry = round_trip(msg);
    assert_eq!(
        entry.redirect(7),
        Some(Redirect {
            from: 7,
            to: 8,
            egress: false,
            redirect: false,
            filter_kind: "matchall".into(),
        })
    );
    assert!(!entry.is_our_redirect_to(8), "not u32, not a redirect");
}

#[test]
fn u32_with_a_real_key_or_one_protocol_is_no_redirect_of_everything() {
    let with_key = || {
        let mut msg = redirect_filter_message(3, 4, 0x8000_0800);
        let mut selector = TcU32Selector::default();
        selector.flags = TcU32SelectorFlags::Terminal;
        selector.nkeys = 1;
        let mut key = TcU32Key::default();
        key.mask = 0xffff_0000;
        key.val = 0x0800_0000;
        selector.keys = vec![key];
        msg.attributes[1] = TcAttribute::Options(vec![
            TcOption::U32(TcFilterU32Option::Selector(selector)),
            TcOption::U32(TcFilterU32Option::Action(vec![mirred_action(
                TcMirrorActionType::EgressRedir,
                4,
            )])),
        ]);
        msg
    };
    let entry = round_trip(with_key());
    assert!(entry.node && !entry.matches_all);
    assert_eq!(entry.redirect(3), None);

    let mut ip_only = redirect_filter_message(3, 4, 0x8000_0800);
    ip_only.header.info = filter_info(1, 0x0800);
    let entry = round_trip(ip_only);
    assert_eq!(entry.protocol, 0x0800);
    assert_eq!(entry.redirect(3), None);
    assert!(!entry.is_our_redirect_to(4));
}

#[test]
fn kernel_ingress_qdisc_reply_parses() {
    // RTM_NEWQDISC from a 6.18 dump: tcmsg(ifindex 3, handle ffff:, parent ffff:fff1, info 1)
    // | TCA_KIND "ingress" | TCA_OPTIONS {} | TCA_HW_OFFLOAD 0 | TCA_STATS2 | TCA_STATS
    let msg = reply(
        "98 00 00 00 24 00 02 00 02 00 00 00 46 74 00 00
         00 00 00 00 03 00 00 00 00 00 ff ff f1 ff ff ff
         01 00 00 00 0c 00 01 00 69 6e 67 72 65 73 73 00
         04 00 02 00 05 00 0c 00 00 00 00 00 30 00 07 00
         14 00 01 00 00 00 00 00 00 00 00 00 00 00 00 00
         00 00 00 00 18 00 03 00 00 00 00 00 00 00 00 00
         00 00 00 00 00 00 00 00 00 00 00 00 2c 00 03 00
         00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
         00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
         00 00 00 00 00 00 00 00",
    );
    let RouteNetlinkMessage::NewQueueDiscipline(q) = msg else {
        panic!("not a qdisc: {msg:?}");
    };
    assert_eq!(
        parse_qdisc(&q),
        Qdisc {
            index: 3,
            kind: "ingress".into(),
            handle: 0xffff_0000,
            parent: 0xffff_fff1,
        }
    );
}
