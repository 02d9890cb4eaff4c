//! The bytes of the policy table's requests, checked against what `nft --debug=netlink` and
//! `nft --debug=mnl` print for the same set, element and rule (nftables 1.0.6, read by hand).

use std::net::IpAddr;

use super::table::{self, SetKind};
use super::{Allow, Direction, PolicyState, PortRange};
use crate::nft::ruleset::set_elements;
use crate::nft::wire::{self, attrs};
use crate::rtnl::hex;

fn ip(s: &str) -> IpAddr {
    s.parse().expect("address")
}

fn be32(v: &[u8]) -> u32 {
    u32::from_be_bytes(v.try_into().expect("4 bytes"))
}

fn flat(bytes: &[u8]) -> String {
    hex(bytes).replace('\n', " ")
}

/// An expression list rendered the way `nft --debug=netlink` prints it.
fn render(list: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    for (_, one) in attrs(list) {
        let mut name = String::new();
        let mut data = Vec::new();
        for (k, v) in attrs(one) {
            match k {
                wire::NFTA_EXPR_NAME => name = crate::nft::cstr(v),
                wire::NFTA_EXPR_DATA => data = attrs(v).map(|(k, v)| (k, v.to_vec())).collect(),
                _ => {}
            }
        }
        let get = |k: u16| {
            data.iter()
                .find(|(kind, _)| *kind == k)
                .map(|(_, v)| v.clone())
        };
        let num = |k: u16| get(k).map(|v| be32(&v)).unwrap_or(u32::MAX);
        out.push(match name.as_str() {
            "payload" => {
                let base = ["link layer", "network header", "transport header"][num(2) as usize];
                format!(
                    "payload load {}b @ {base} + {} => reg {}",
                    num(4),
                    num(3),
                    num(1)
                )
            }
            "meta" => format!("meta load {} => reg {}", num(2), num(1)),
            "lookup" => {
                let set = crate::nft::cstr(&get(1).unwrap_or_default());
                match get(3) {
                    Some(d) => format!("lookup reg {} set {set} dreg {}", num(2), be32(&d)),
                    None => format!("lookup reg {} set {set}", num(2)),
                }
            }
            "immediate" => {
                let d = get(2).unwrap_or_default();
                let verdict = attrs(&d)
                    .next()
                    .map(|(_, v)| v.to_vec())
                    .unwrap_or_default();
                let code = attrs(&verdict)
                    .find(|(k, _)| *k == wire::NFTA_VERDICT_CODE)
                    .map(|(_, v)| be32(v) as i32);
                let chain = attrs(&verdict)
                    .find(|(k, _)| *k == wire::NFTA_VERDICT_CHAIN)
                    .map(|(_, v)| crate::nft::cstr(v));
                match (code, chain) {
                    (Some(0), _) => "immediate reg 0 drop".into(),
                    (Some(1), _) => "immediate reg 0 accept".into(),
                    (Some(-5), _) => "immediate reg 0 return".into(),
                    (Some(-3), Some(c)) => format!("immediate reg 0 jump -> {c}"),
                    other => format!("immediate {other:?}"),
                }
            }
            other => other.to_owned(),
        });
    }
    out
}

#[test]
fn a_concatenated_interval_set_is_flagged_interval_and_concat_with_each_field_length() {
    let req = table::new_set("t", SetKind::Any, Direction::Egress, false, 1);
    assert_eq!(req.kind, wire::NFT_MSG_NEWSET);
    // nft --debug=mnl add set inet t x { type ipv4_addr . ipv4_addr ; flags interval; }:
    // TABLE "t", NAME, FLAGS 0x84 (interval, concat), KEY_TYPE 0x1c7 (ipv4_addr . ipv4_addr),
    // KEY_LEN 8, ID 1, DESC { CONCAT { ELEM { FIELD_LEN 4 }, ELEM { FIELD_LEN 4 } } } (nft
    // adds its USERDATA, which only nft reads).
    assert_eq!(
        flat(&req.attrs.0),
        "06 00 01 00 74 00 00 00 10 00 02 00 65 67 72 65 \
         73 73 2d 61 6e 79 34 00 08 00 03 00 00 00 00 84 \
         08 00 04 00 00 00 01 c7 08 00 05 00 00 00 00 08 \
         08 00 0a 00 00 00 00 01 20 00 09 80 1c 00 02 80 \
         0c 00 01 80 08 00 01 00 00 00 00 04 0c 00 01 80 \
         08 00 01 00 00 00 00 04"
    );
    // The ports set: four fields (4, 4, 1, 2 bytes), a 16-byte key of padded registers.
    let ports = table::new_set("t", SetKind::Ports, Direction::Ingress, true, 2);
    let key_len = attrs(&ports.attrs.0)
        .find(|(k, _)| *k == wire::NFTA_SET_KEY_LEN)
        .map(|(_, v)| be32(v));
    assert_eq!(key_len, Some(16 + 16 + 4 + 4));
    let text = flat(&ports.attrs.0);
    assert!(
        text.contains("00 00 00 10 0c 00 01 80 08 00 01 00 00 00 00 10 0c 00 01 80 08 00 01 00 00 00 00 01 0c 00 01 80 08 00 01 00 00 00 00 02"),
        "{text}"
    );
}

#[test]
fn a_port_range_element_is_its_first_key_and_its_key_end() {
    let allow = Allow {
        direction: Direction::Egress,
        pod: ip("10.0.0.1"),
        peers: (ip("10.1.0.0"), ip("10.1.0.255")),
        ports: Some(PortRange {
            protocol: 6,
            first: 80,
            last: 90,
        }),
    };
    let (kind, element) = table::allow_element(&allow);
    assert_eq!(kind, SetKind::Ports);
    // nft --debug=netlink add element inet t ea4 { 10.0.0.1 . 10.1.0.0-10.1.0.255 . tcp .
    // 80-90 } prints (32-bit words in host order):
    //   element 0100000a 0000010a 00000006 00005000  - 0100000a ff00010a 00000006 00005a00
    let reqs = set_elements("t", "x", true, [element.clone()]);
    assert_eq!(reqs.len(), 1);
    assert_eq!(
        flat(&reqs[0].attrs.0),
        "06 00 01 00 74 00 00 00 06 00 02 00 78 00 00 00 \
         38 00 03 80 34 00 01 80 18 00 01 80 14 00 01 00 \
         0a 00 00 01 0a 01 00 00 06 00 00 00 00 50 00 00 \
         18 00 0a 80 14 00 01 00 0a 00 00 01 0a 01 00 ff \
         06 00 00 00 00 5a 00 00"
    );
    // And read back as the same allow.
    assert_eq!(
        table::allow_from(SetKind::Ports, Direction::Egress, false, &element),
        Some(allow)
    );
}

#[test]
fn elements_read_back_as_the_allows_they_were_written_from() {
    for allow in [
        Allow {
            direction: Direction::Ingress,
            pod: ip("fd00::5"),
            peers: (ip("fd00::"), ip("fd00::ffff")),
            ports: None,
        },
        Allow {
            direction: Direction::Egress,
            pod: ip("fd00::5"),
            peers: (ip("2001:db8::"), ip("2001:db8::1")),
            ports: Some(PortRange {
                protocol: 132,
                first: 1,
                last: 65535,
            }),
        },
        Allow {
            direction: Direction::Ingress,
            pod: ip("10.0.0.5"),
            peers: (ip("0.0.0.0"), ip("255.255.255.255")),
            ports: None,
        },
    ] {
        let (kind, e) = table::allow_element(&allow);
        let v6 = allow.pod.is_ipv6();
        assert_eq!(
            table::allow_from(kind, allow.direction, v6, &e),
            Some(allow)
        );
    }
    let chain = table::drop_chain(Direction::Ingress, ip("fd00::5"));
    assert_eq!(chain, "drop-ingress-fd00::5");
    assert_eq!(
        table::drop_chain_owner(&chain),
        Some((Direction::Ingress, ip("fd00::5")))
    );
    assert_eq!(table::drop_chain_owner("egress4"), None);
}

#[test]
fn the_port_lookup_rule_loads_pod_peer_protocol_and_port_into_consecutive_registers() {
    let rules = table::family_rules("t", false);
    let rendered: Vec<Vec<String>> = rules
        .iter()
        .map(|r| {
            let list = attrs(&r.attrs.0)
                .find(|(k, _)| *k == wire::NFTA_RULE_EXPRESSIONS)
                .map(|(_, v)| v.to_vec())
                .unwrap_or_default();
            render(&list)
        })
        .collect();
    // nft --debug=netlink of `ip saddr . ip daddr . meta l4proto . th dport @ea4 return`
    // (nft numbers the first register NFT_REG_1, 1; knid NFT_REG32_00, 8: the same bytes;
    // nft's byteorder of the 1-byte protocol converts nothing and is left out):
    //   [ payload load 4b @ network header + 12 => reg 1 ]
    //   [ payload load 4b @ network header + 16 => reg 9 ]
    //   [ meta load l4proto => reg 10 ]
    //   [ payload load 2b @ transport header + 2 => reg 11 ]
    //   [ lookup reg 1 set ea4 ]
    //   [ immediate reg 0 return ]
    assert_eq!(
        rendered[2],
        [
            "payload load 4b @ network header + 12 => reg 8",
            "payload load 4b @ network header + 16 => reg 9",
            "meta load 16 => reg 10",
            "payload load 2b @ transport header + 2 => reg 11",
            "lookup reg 8 set egress-ports4",
            "immediate reg 0 return",
        ]
    );
    // Ingress: the pod is the destination, first in the key.
    assert_eq!(
        rendered[0],
        [
            "payload load 4b @ network header + 12 => reg 8",
            "lookup reg 8 set egress-isolated4",
            "immediate reg 0 jump -> egress4",
        ]
    );
    assert_eq!(
        rendered[6][..2],
        [
            "payload load 4b @ network header + 16 => reg 8",
            "payload load 4b @ network header + 12 => reg 9",
        ]
    );
    // `ip saddr vmap @egress-drops4`, then the chain's last word: drop.
    assert_eq!(
        rendered[3],
        [
            "payload load 4b @ network header + 12 => reg 8",
            "lookup reg 8 set egress-drops4 dreg 0",
        ]
    );
    assert_eq!(rendered[4], ["immediate reg 0 drop"]);
    // IPv6: 16-byte addresses take four registers each.
    let v6 = table::family_rules("t", true);
    let rendered6: Vec<Vec<String>> = v6
        .iter()
        .map(|r| {
            let list = attrs(&r.attrs.0)
                .find(|(k, _)| *k == wire::NFTA_RULE_EXPRESSIONS)
                .map(|(_, v)| v.to_vec())
                .unwrap_or_default();
            render(&list)
        })
        .collect();
    // Neighbour discovery (icmpv6 type 133-137) is accepted before any isolation.
    assert_eq!(
        rendered6[0],
        [
            "meta load 16 => reg 8",
            "cmp",
            "payload load 1b @ transport header + 0 => reg 8",
            "cmp",
            "cmp",
            "immediate reg 0 accept",
        ]
    );
    let list = attrs(&v6[3].attrs.0)
        .find(|(k, _)| *k == wire::NFTA_RULE_EXPRESSIONS)
        .map(|(_, v)| v.to_vec())
        .unwrap_or_default();
    assert_eq!(
        render(&list)[..4],
        [
            "payload load 16b @ network header + 8 => reg 8",
            "payload load 16b @ network header + 24 => reg 12",
            "meta load 16 => reg 16",
            "payload load 2b @ transport header + 2 => reg 17",
        ]
    );
}

#[test]
fn an_update_removes_before_it_adds_and_a_pods_counter_follows_its_isolation() {
    let pod = ip("10.0.0.1");
    let allow = |last: &str| Allow {
        direction: Direction::Egress,
        pod,
        peers: (ip("10.1.0.0"), ip(last)),
        ports: None,
    };
    let from = PolicyState {
        isolated: [(Direction::Egress, pod)].into_iter().collect(),
        allows: [allow("10.1.0.9")].into_iter().collect(),
    };
    let to = PolicyState {
        isolated: [(Direction::Ingress, pod)].into_iter().collect(),
        allows: [allow("10.1.0.19")].into_iter().collect(),
    };
    let reqs = table::changes("t", &from, &to);
    let kinds: Vec<u16> = reqs.iter().map(|r| r.kind).collect();
    use wire::*;
    assert_eq!(
        kinds,
        [
            NFT_MSG_DELSETELEM,   // egress-any4: the old range
            NFT_MSG_DELSETELEM,   // egress-drops4
            NFT_MSG_DELSETELEM,   // egress-isolated4
            NFT_MSG_DESTROYCHAIN, // drop-egress-10.0.0.1
            NFT_MSG_NEWCHAIN,     // drop-ingress-10.0.0.1
            NFT_MSG_NEWRULE,      // counter drop
            NFT_MSG_NEWSETELEM,   // ingress-drops4
            NFT_MSG_NEWSETELEM,   // ingress-isolated4
            NFT_MSG_NEWSETELEM,   // egress-any4: the new range
        ]
    );
    assert!(table::changes("t", &to, &to).is_empty());
}

#[test]
fn thousands_of_elements_are_split_into_requests_that_fit_an_attribute() {
    let elements: Vec<_> = (0..20_000u32)
        .map(|i| {
            let peer = IpAddr::from((0x0a01_0000 + i).to_be_bytes());
            table::allow_element(&Allow {
                direction: Direction::Ingress,
                pod: ip("10.0.0.1"),
                peers: (peer, peer),
                ports: Some(PortRange {
                    protocol: 6,
                    first: 80,
                    last: 80,
                }),
            })
            .1
        })
        .collect();
    let reqs = set_elements("t", "ingress-ports4", true, elements);
    assert!(reqs.len() > 1, "{} requests", reqs.len());
    let mut count = 0;
    for r in &reqs {
        assert!(r.attrs.0.len() < 65_536);
        for (k, list) in attrs(&r.attrs.0) {
            if k == wire::NFTA_SET_ELEM_LIST_ELEMENTS {
                count += attrs(list).count();
            }
        }
    }
    assert_eq!(count, 20_000);
}
