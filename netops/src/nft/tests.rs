//! The bytes of knid's nf_tables requests, checked against nf_tables.h and nfnetlink.h, and
//! host-port elements read back from the bytes they are written as.

use super::ruleset::{self, PortMap, Protocol};
use super::wire::{self, Attrs, Request};
use crate::rtnl::hex;

#[test]
fn batch_of_one_new_table_is_framed_by_begin_and_end() {
    let mut attrs = Attrs::default();
    attrs.str(wire::NFTA_TABLE_NAME, "knid");
    let req = Request {
        kind: wire::NFT_MSG_NEWTABLE,
        flags: 0x400,
        family: wire::NFPROTO_INET,
        attrs,
    };
    let mut buf = Vec::new();
    let acked = wire::encode_batch(&[req], 1, &mut buf);
    assert_eq!(acked, vec![2]);
    // BATCH_BEGIN (0x10) seq 1, res_id NFNL_SUBSYS_NFTABLES big-endian
    // | NFT_MSG_NEWTABLE (0x0a00) REQUEST|ACK|CREATE seq 2, family inet: NFTA_TABLE_NAME "knid"
    // | BATCH_END (0x11) seq 3
    assert_eq!(
        hex(&buf),
        "14 00 00 00 10 00 01 00 01 00 00 00 00 00 00 00\n\
         00 00 00 0a 20 00 00 00 00 0a 05 04 02 00 00 00\n\
         00 00 00 00 01 00 00 00 09 00 01 00 6b 6e 69 64\n\
         00 00 00 00 14 00 00 00 11 00 01 00 03 00 00 00\n\
         00 00 00 00 00 00 00 0a"
    );
}

#[test]
fn nested_attributes_carry_the_nested_flag_and_are_padded() {
    let mut a = Attrs::default();
    a.data(3, &[0x0a]);
    // NFTA_CMP_DATA|NLA_F_NESTED { NFTA_DATA_VALUE 0a (padded) }
    assert_eq!(hex(&a.0), "0c 00 03 80 05 00 01 00 0a 00 00 00");
}

#[test]
fn nested_attributes_in_nested_attributes_get_their_lengths_once_written() {
    let mut a = Attrs::default();
    a.nested(1, |outer| {
        outer.str(2, "ab");
        outer.nested(3, |inner| {
            inner.be32(4, 7);
        });
    });
    a.bytes(5, &[9]);
    // 1|NLA_F_NESTED { 2 "ab\0" (padded), 3|NLA_F_NESTED { 4 00000007 } }, 5 09 (padded)
    assert_eq!(
        hex(&a.0),
        "18 00 01 80 07 00 02 00 61 62 00 00 0c 00 03 80\n\
         08 00 04 00 00 00 00 07 05 00 05 00 09 00 00 00"
    );
}

#[test]
fn port_map_elements_read_back_from_their_key_and_value() {
    let maps = [
        PortMap {
            protocol: Protocol::Tcp,
            host_ip: None,
            host_port: 8080,
            target: "10.88.0.5".parse().unwrap(),
            target_port: 80,
        },
        PortMap {
            protocol: Protocol::Sctp,
            host_ip: Some("fd00::1".parse().unwrap()),
            host_port: 9,
            target: "fd00:88::5".parse().unwrap(),
            target_port: 9999,
        },
    ];
    for m in maps {
        let (key, value) = (m.key_for_test(), m.value_for_test());
        assert_eq!(PortMap::from_element(m.map_name(), &key, &value), Some(m));
    }
    // The key nft writes for `tcp . 8080` (nft --debug=netlink: 00000006 0000901f).
    assert_eq!(hex(&maps[0].key_for_test()), "06 00 00 00 1f 90 00 00");
    assert_eq!(maps[1].map_name(), "hostports6-ip");
}

#[test]
fn replacing_the_table_adds_it_before_deleting_it() {
    let reqs = ruleset::replace(&ruleset::Ruleset {
        table: "knid".into(),
        ..Default::default()
    });
    let kinds: Vec<u16> = reqs.iter().take(3).map(|r| r.kind).collect();
    assert_eq!(
        kinds,
        [
            wire::NFT_MSG_NEWTABLE,
            wire::NFT_MSG_DELTABLE,
            wire::NFT_MSG_NEWTABLE
        ]
    );
}

#[test]
fn a_host_port_element_prints_as_protocol_port_and_target() {
    let mut m = PortMap {
        protocol: Protocol::Udp,
        host_ip: None,
        host_port: 5353,
        target: "fd00:88::5".parse().expect("address"),
        target_port: 53,
    };
    assert_eq!(m.to_string(), "udp/5353 -> [fd00:88::5]:53");
    m.host_ip = Some("2001:db8::1".parse().expect("address"));
    assert_eq!(m.to_string(), "udp/5353 on 2001:db8::1 -> [fd00:88::5]:53");
}

#[test]
fn a_guard_in_a_table_made_before_is_sent_without_the_table() {
    let guard = |device: &str| super::Guard {
        device: device.into(),
        mac: [0x02, 0, 0, 0, 0, 5],
        addresses: vec!["10.88.0.5".parse().expect("ip")],
    };
    let (a, b) = ("kn0123456789", "kn9876543210");
    let (table_a, table_b) = (super::guard_table("knid", a), super::guard_table("knid", b));
    assert_ne!(
        table_a, table_b,
        "the example's two guards are in two tables"
    );
    let known = std::collections::HashSet::from([table_a.clone()]);
    let reqs = super::guard::install_beside("knid", &[guard(a), guard(b)], &known);
    let kinds: Vec<u16> = reqs.iter().map(|r| r.kind).collect();
    // `a`'s chain, then `b`'s table, its counters and its chain.
    let mut want = vec![wire::NFT_MSG_DESTROYCHAIN, wire::NFT_MSG_NEWCHAIN];
    want.extend([wire::NFT_MSG_NEWRULE; 10]);
    want.push(wire::NFT_MSG_NEWTABLE);
    want.extend([wire::NFT_MSG_NEWOBJ; 6]);
    want.extend([wire::NFT_MSG_DESTROYCHAIN, wire::NFT_MSG_NEWCHAIN]);
    want.extend([wire::NFT_MSG_NEWRULE; 10]);
    assert_eq!(kinds, want);
    let table_b_name = String::from_utf8_lossy(&reqs[12].attrs.0).into_owned();
    assert!(table_b_name.contains(&table_b), "{table_b_name}");
}

#[test]
fn a_guard_is_its_table_and_counters_then_its_chain_replaced_with_ten_dropping_rules() {
    let guard = super::Guard {
        device: "kn0123456789".into(),
        mac: [0x02, 0, 0, 0, 0, 5],
        addresses: vec!["10.88.0.5".parse().expect("ip")],
    };
    let reqs = super::guard::install("knid", &[guard]);
    let kinds: Vec<u16> = reqs.iter().map(|r| r.kind).collect();
    let mut want = vec![wire::NFT_MSG_NEWTABLE];
    want.extend([wire::NFT_MSG_NEWOBJ; 6]);
    want.extend([wire::NFT_MSG_DESTROYCHAIN, wire::NFT_MSG_NEWCHAIN]);
    want.extend([wire::NFT_MSG_NEWRULE; 10]);
    assert_eq!(kinds, want);
    assert!(reqs.iter().all(|r| r.family == wire::NFPROTO_NETDEV));
    // The chain hooks its device by name: NFTA_CHAIN_HOOK { HOOKNUM 0 (ingress), PRIORITY
    // -500, DEV "kn0123456789" }.
    let chain = hex(&reqs[8].attrs.0).replace('\n', " ");
    assert!(
        chain.contains("08 00 01 00 00 00 00 00 08 00 02 00 ff ff fe 0c"),
        "{chain}"
    );
    // Every rule ends with `counter name "drop-…"` and a drop verdict (immediate, verdict
    // register, NF_DROP 0).
    for rule in &reqs[9..] {
        let text = String::from_utf8_lossy(&rule.attrs.0).into_owned();
        assert!(text.contains("objref") && text.contains("drop-"), "{text}");
        let bytes = hex(&rule.attrs.0).replace('\n', " ");
        assert!(bytes.ends_with("08 00 01 00 00 00 00 00"), "{bytes}");
    }
}

#[test]
fn a_rebuild_leaves_the_chains_found_as_wanted_and_remakes_or_removes_the_others() {
    let guard = |n: u8| super::Guard {
        device: format!("kn012345678{n}"),
        mac: [0x02, 0, 0, 0, 0, n],
        addresses: vec![format!("10.88.0.{n}").parse().expect("ip")],
    };
    let found = |g: &super::Guard, table: String, summary: String| super::GuardChain {
        table,
        name: g.device.clone(),
        device: g.device.clone(),
        summary,
    };
    let home = |g: &super::Guard| super::guard_table("knid", &g.device);
    let (same, moved, gone, new, old) = (guard(1), guard(2), guard(3), guard(4), guard(5));
    let chains = [
        found(&same, home(&same), same.summary()),
        found(&moved, home(&moved), "02:00:00:00:00:02 10.88.0.99".into()),
        found(&gone, home(&gone), gone.summary()),
        // In the single table of knid up to 0.4.
        found(&old, "knid".into(), old.summary()),
    ];
    let reqs = super::guard::rebuild(
        "knid",
        &chains,
        &[same, moved.clone(), new.clone(), old.clone()],
    );
    let named = |r: &wire::Request, name: &str| String::from_utf8_lossy(&r.attrs.0).contains(name);
    let of_kind = |kind: u16| reqs.iter().filter(move |r| r.kind == kind);
    // The chain as wanted is untouched.
    assert!(!reqs.iter().any(|r| named(r, "kn0123456781")));
    // The one no guard wants goes from its table.
    assert!(of_kind(wire::NFT_MSG_DESTROYCHAIN)
        .any(|r| named(r, "kn0123456783") && named(r, &home(&guard(3)))));
    // The changed one, the new one and the old table's one are made, each in its own table.
    let made: Vec<&wire::Request> = of_kind(wire::NFT_MSG_NEWCHAIN).collect();
    assert_eq!(made.len(), 3);
    for g in [&moved, &new, &old] {
        assert!(
            made.iter()
                .any(|r| named(r, &g.device) && named(r, &home(g))),
            "{} in {}",
            g.device,
            home(g)
        );
    }
    // Ten rules each, and the old single table goes last, once its guards are remade.
    assert_eq!(of_kind(wire::NFT_MSG_NEWRULE).count(), 30);
    let last = reqs.last().expect("requests");
    assert_eq!(last.kind, wire::NFT_MSG_DESTROYTABLE);
    assert_eq!(
        hex(&last.attrs.0),
        hex(&{
            let mut a = wire::Attrs::default();
            a.str(wire::NFTA_TABLE_NAME, "knid");
            a
        }
        .0)
    );
}

#[test]
fn a_guard_s_table_is_fixed_by_its_device_name() {
    // Pinned: knid of every version must find the chains another made.
    assert_eq!(super::guard_table("knid", "kn0123456789"), "knid-47");
    assert_eq!(super::guard_table("knid", ""), "knid-05");
    assert_eq!(super::guard_table("flor", "kn0123456789"), "flor-47");
    let mut tables = std::collections::HashSet::new();
    for n in 0..2000 {
        let t = super::guard_table("knid", &format!("kn{n:010x}"));
        assert!(super::guard::is_guard_table("knid", &t), "{t}");
        tables.insert(t);
    }
    assert_eq!(
        tables.len(),
        super::GUARD_TABLES as usize,
        "every table used"
    );
    for other in ["knid-policy", "knid-1", "knid-100", "knidx-01", "kni"] {
        assert!(!super::guard::is_guard_table("knid", other), "{other}");
    }
    assert!(
        super::guard::is_guard_table("knid", "knid"),
        "the single table of knid ≤ 0.4"
    );
}

#[test]
fn a_rebuild_compares_tables_and_summaries_as_spelled() {
    let g = super::Guard {
        device: "kn0123456789".into(),
        mac: [0x02, 0, 0, 0, 0, 0x0a],
        addresses: vec![
            "10.88.0.10".parse().expect("ip"),
            "fd00:88::a".parse().expect("ip"),
        ],
    };
    let summary = g.summary();
    assert!(g.has_summary(&summary));
    for other in [
        "",
        &summary[..summary.len() - 1],
        &format!("{summary} "),
        &format!("{summary} 10.88.0.11"),
        &summary.replace("0a", "0A"),
    ] {
        assert!(!g.has_summary(other), "{other:?}");
    }
    for n in 0..2000 {
        let device = format!("kn{n:010x}");
        let home = super::guard_table("knid", &device);
        assert!(super::guard::is_guard_table_of("knid", &device, &home));
        let elsewhere = super::guard_table("knid", &format!("kn{:010x}", n + 1));
        assert_eq!(
            super::guard::is_guard_table_of("knid", &device, &elsewhere),
            elsewhere == home
        );
    }
    for other in ["knid", "knid-", "knid-4", "knid-047", "flor-47", "knid47"] {
        assert!(
            !super::guard::is_guard_table_of("knid", "kn0123456789", other),
            "{other}"
        );
    }
    // A chain of the guard's name in another table is made again in its own.
    let misplaced = super::GuardChain {
        table: "knid-46".into(),
        name: g.device.clone(),
        device: g.device.clone(),
        summary: summary.clone(),
    };
    let reqs = super::guard::rebuild("knid", &[misplaced], std::slice::from_ref(&g));
    assert!(reqs.iter().any(|r| r.kind == wire::NFT_MSG_NEWCHAIN));
    assert!(reqs.iter().any(|r| r.kind == wire::NFT_MSG_DESTROYCHAIN));
}

#[test]
fn each_drop_reason_counts_in_a_counter_named_after_it() {
    for reason in super::DropReason::ALL {
        assert_eq!(reason.counter(), format!("drop-{}", reason.as_str()));
    }
}

#[test]
fn a_comparison_longer_than_a_register_is_written_whole() {
    use super::expr;
    for len in [1, 4, 16, 17, 40] {
        let value: Vec<u8> = (1..=len).collect();
        let mut a = Attrs::default();
        expr::list(
            &mut a,
            4,
            &expr::field_is(expr::NFT_PAYLOAD_NETWORK_HEADER, 0, &value),
        );
        // NFTA_DATA_VALUE: its length (4 + len), type 1, then the value.
        let mut attr = (4 + len as u16).to_ne_bytes().to_vec();
        attr.extend(1u16.to_ne_bytes());
        attr.extend(&value);
        assert!(
            a.0.windows(attr.len()).any(|w| w == attr.as_slice()),
            "{len} bytes: {}",
            hex(&a.0)
        );
    }
}
