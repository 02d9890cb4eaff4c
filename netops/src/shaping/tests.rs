//! The tbf request's bytes (checked against include/uapi/linux/pkt_sched.h: `struct
//! tc_tbf_qopt` is rate and peakrate `tc_ratespec` of 12 bytes each, then limit, buffer, mtu;
//! TCA_TBF_PARMS 1, TCA_TBF_RATE64 4, TCA_TBF_BURST 6) and parses of what the kernel reports.

use super::*;
use crate::rtnl::encode_for_test;
use netlink_packet_core::{NetlinkMessage, NetlinkPayload};

/// The request as the kernel receives it, parsed back the way `Rtnl` parses replies.
fn round_trip(msg: TcMessage) -> TcMessage {
    let raw = encode_for_test(RouteNetlinkMessage::NewQueueDiscipline(msg), 0);
    match NetlinkMessage::<RouteNetlinkMessage>::deserialize(&raw)
        .expect("parses")
        .payload
    {
        NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewQueueDiscipline(q)) => q,
        other => panic!("not a qdisc: {other:?}"),
    }
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

/// The options of a tbf request: (kind, value) of each nested attribute.
fn options(msg: &TcMessage) -> Vec<(u16, Vec<u8>)> {
    msg.attributes
        .iter()
        .find_map(|a| match a {
            TcAttribute::Options(o) => Some(o),
            _ => None,
        })
        .expect("options")
        .iter()
        .map(|o| {
            let mut value = vec![0u8; o.value_len()];
            o.emit_value(&mut value);
            (o.kind(), value)
        })
        .collect()
}

#[test]
fn tbf_request_carries_rate_limit_buffer_and_burst() {
    // 10 Mbit/s = 1,250,000 bytes/s, a 125,000-byte burst (100 ms at the rate).
    let tbf = Tbf {
        rate: 1_250_000,
        burst: 125_000,
    };
    let msg = tbf_message(7, &tbf);
    assert_eq!(msg.header.index, 7);
    assert_eq!(msg.header.parent, TcHandle::ROOT);
    let opts = options(&msg);
    let kinds: Vec<u16> = opts.iter().map(|(k, _)| *k).collect();
    assert_eq!(kinds, vec![TCA_TBF_PARMS, TCA_TBF_BURST]);
    let qopt = &opts[0].1;
    assert_eq!(qopt.len(), 36);
    assert_eq!(qopt[1], 1, "linklayer ethernet: no rate table needed");
    assert_eq!(u32_at(qopt, 8), 1_250_000, "rate");
    assert_eq!(&qopt[12..24], &[0u8; 12], "no peak rate");
    // 25 ms at the rate (31,250 bytes) plus the burst.
    assert_eq!(u32_at(qopt, 24), 156_250, "limit");
    // 100 ms in 64 ns ticks.
    assert_eq!(u32_at(qopt, 28), 1_562_500, "buffer");
    assert_eq!(opts[1].1, 125_000u32.to_ne_bytes().to_vec(), "burst");
}

#[test]
fn tbf_above_four_gigabytes_a_second_sends_rate64() {
    let tbf = Tbf {
        rate: 5_000_000_000,
        burst: 1_000_000,
    };
    let opts = options(&tbf_message(3, &tbf));
    assert_eq!(u32_at(&opts[0].1, 8), u32::MAX, "the 32-bit rate saturates");
    assert_eq!(opts[1].0, TCA_TBF_RATE64);
    assert_eq!(opts[1].1, 5_000_000_000u64.to_ne_bytes().to_vec());
}

#[test]
fn tbf_limit_and_buffer_saturate() {
    let tbf = Tbf {
        rate: 1_000,
        burst: u32::MAX,
    };
    assert_eq!(tbf.limit(), u32::MAX);
    assert_eq!(tbf.buffer_ticks(), u32::MAX);
}

#[test]
fn parse_tbf_reads_back_the_rate_and_limit() {
    let tbf = Tbf {
        rate: 1_250_000,
        burst: 125_000,
    };
    let parsed = round_trip(tbf_message(7, &tbf));
    assert_eq!(
        parse_tbf(&parsed),
        Some(TbfFound {
            rate: 1_250_000,
            limit: 156_250
        })
    );
    let fast = Tbf {
        rate: 5_000_000_000,
        burst: 1_000_000,
    };
    let parsed = round_trip(tbf_message(7, &fast));
    assert_eq!(parse_tbf(&parsed).map(|t| t.rate), Some(5_000_000_000));
}

#[test]
fn parse_tbf_ignores_other_qdiscs() {
    let ingress = crate::tc::ingress_qdisc_message(4);
    assert_eq!(parse_tbf(&round_trip(ingress)), None);
}
