use std::process::Command;

use knid_netops::nft::{Masquerade, Nft, PortMap, Protocol, Ruleset};

use crate::common::in_private_netns;

fn ruleset() -> Ruleset {
    Ruleset {
        table: "knid".into(),
        masquerade: vec![Masquerade {
            name: "default".into(),
            sources: vec![
                "10.88.0.0/16".parse().expect("address"),
                "fd00:88::/64".parse().expect("address"),
            ],
            except: vec![
                "10.88.0.0/16".parse().expect("address"),
                "fd00:88::/64".parse().expect("address"),
            ],
        }],
        hairpin_sources: vec![
            "10.88.0.0/16".parse().expect("address"),
            "fd00:88::/64".parse().expect("address"),
        ],
        port_maps: vec![PortMap {
            protocol: Protocol::Tcp,
            host_ip: None,
            host_port: 8080,
            target: "10.88.0.5".parse().expect("address"),
            target_port: 80,
        }],
    }
}

/// `nft list table inet <table>` in the calling thread's netns, when `nft` is installed.
fn nft_list(table: &str) -> Option<String> {
    let out = Command::new("nft")
        .args(["list", "table", "inet", table])
        .output()
        .ok()?;
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn knids_table_is_replaced_read_back_and_deleted_without_touching_others() {
    in_private_netns("nft_table", || {
        // Another owner's table, which nothing of knid's may touch.
        let _ = Command::new("nft")
            .args(["add", "table", "ip", "other"])
            .status();
        let mut nft = Nft::open().unwrap();
        assert_eq!(nft.table("knid").unwrap(), None);
        nft.replace(&ruleset()).unwrap();
        // Twice: replacing is idempotent and leaves no duplicate rule.
        nft.replace(&ruleset()).unwrap();
        let got = nft.table("knid").unwrap().expect("table exists");
        for chain in [
            "prerouting",
            "output",
            "hostports",
            "postrouting",
            "masq-default",
        ] {
            assert!(
                got.chains.iter().any(|c| c == chain),
                "chain {chain} in {got:?}"
            );
        }
        assert_eq!(got.port_maps, ruleset().port_maps);

        let more = [
            PortMap {
                protocol: Protocol::Udp,
                host_ip: Some("192.0.2.1".parse().unwrap()),
                host_port: 53,
                target: "10.88.0.6".parse().unwrap(),
                target_port: 5353,
            },
            PortMap {
                protocol: Protocol::Sctp,
                host_ip: None,
                host_port: 9,
                target: "fd00:88::6".parse().unwrap(),
                target_port: 9,
            },
        ];
        nft.add_port_maps("knid", &more).unwrap();
        // Replayed: accepted as is.
        nft.add_port_maps("knid", &more).unwrap();
        // The same key with another target is refused, and nothing of its batch is added.
        let mut clash = more;
        clash[1].target_port = 10;
        clash[0].host_port = 54;
        let err = nft.add_port_maps("knid", &clash).unwrap_err();
        assert!(err.is_exists(), "{err}");
        let mut want = vec![ruleset().port_maps[0], more[0], more[1]];
        want.sort();
        assert_eq!(nft.table("knid").unwrap().unwrap().port_maps, want);

        if let Some(listing) = nft_list("knid") {
            assert!(listing.contains("udp . 53 : 10.88.0.6 . 5353"), "{listing}");
            assert!(listing.contains("masquerade"), "{listing}");
        }

        // One already gone: the others are still removed.
        nft.remove_port_maps("knid", &more[..1]).unwrap();
        nft.remove_port_maps("knid", &more).unwrap();
        assert_eq!(
            nft.table("knid").unwrap().unwrap().port_maps,
            ruleset().port_maps
        );

        nft.delete_table("knid").unwrap();
        nft.delete_table("knid").unwrap();
        assert_eq!(nft.table("knid").unwrap(), None);
        if let Ok(out) = Command::new("nft").args(["list", "tables"]).output() {
            let tables = String::from_utf8_lossy(&out.stdout);
            assert!(tables.contains("table ip other"), "{tables}");
        }
    });
}

#[test]
fn a_table_larger_than_the_default_send_buffer_is_replaced_in_one_batch() {
    in_private_netns("nft_big_table", || {
        let mut big = ruleset();
        // A masquerade exception per node's pod CIDR of a 3,000-node cluster: well past the
        // kernel's default 208 KiB netlink send buffer in one batch.
        big.masquerade[0].except = (0..3000)
            .map(|i| {
                format!("10.{}.{}.0/24", 100 + i / 256, i % 256)
                    .parse()
                    .unwrap()
            })
            .collect();
        let mut nft = Nft::open().unwrap();
        nft.replace(&big).unwrap();
        let listed = nft_list("knid").unwrap_or_default();
        if !listed.is_empty() {
            assert!(
                listed.contains("10.111.183.0/24"),
                "the last exception is in"
            );
        }
        // And back to a small one on the same socket.
        nft.replace(&ruleset()).unwrap();
        assert!(nft.table("knid").unwrap().is_some());
    });
}

fn guard(device: &str) -> knid_netops::nft::Guard {
    knid_netops::nft::Guard {
        device: device.into(),
        mac: [0x02, 0, 0, 0, 0, 0x05],
        addresses: vec![
            "10.88.0.5".parse().expect("address"),
            "fd00:88::5".parse().expect("address"),
        ],
    }
}

#[test]
fn source_guards_are_installed_before_their_device_listed_rebuilt_and_removed() {
    in_private_netns("nft_guards", || {
        let mut nft = Nft::open().unwrap();
        assert_eq!(nft.guard_chains("knid").unwrap(), None);
        // The device does not exist yet: the hook waits for it by name.
        nft.add_guards("knid", &[guard("kn1"), guard("kn2")])
            .unwrap();
        // Again: the chain is replaced, not doubled.
        nft.add_guards("knid", &[guard("kn1")]).unwrap();
        let chains = nft.guard_chains("knid").unwrap().expect("table exists");
        let names: Vec<&str> = chains.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["kn1", "kn2"]);
        assert_eq!(chains[0].device, "kn1");
        assert_eq!(chains[0].summary, guard("kn1").summary());
        assert_eq!(
            guard("kn1").link_local(),
            "fe80::ff:fe00:5".parse::<std::net::Ipv6Addr>().unwrap()
        );
        assert_eq!(
            chains[0].table,
            knid_netops::nft::guard_table("knid", "kn1")
        );
        if let Ok(out) = Command::new("nft")
            .args(["list", "chain", "netdev", &chains[0].table, "kn1"])
            .output()
        {
            let text = String::from_utf8_lossy(&out.stdout);
            for want in [
                // No `meta iiftype ether` before it (a pod link is Ethernet): nft prints
                // the raw field.
                "@ll,48,48 != 0x20000000005 counter name \"drop-mac\" drop",
                "arp saddr ether != 02:00:00:00:00:05",
                "ip6 saddr != fd00:88::5 ip6 saddr != fe80::ff:fe00:5 ip6 saddr != ::",
                "counter name \"drop-router\" drop",
                "counter name \"drop-dhcp\" drop",
            ] {
                assert!(text.contains(want), "{want:?} in\n{text}");
            }
            assert_eq!(text.matches(" drop").count(), 10, "{text}");
        }
        let drops = nft.guard_drops("knid").unwrap();
        assert_eq!(drops.len(), 6);
        assert!(drops.iter().all(|(_, n)| *n == 0));
        // Rebuilt: only the given guards remain.
        let found = nft.guard_chains("knid").unwrap().unwrap_or_default();
        nft.replace_guards("knid", &found, &[guard("kn3")]).unwrap();
        let chains = nft.guard_chains("knid").unwrap().expect("table exists");
        assert_eq!(chains.len(), 1);
        assert_eq!(chains[0].name, "kn3");
        nft.remove_guards("knid", &["kn3", "gone"]).unwrap();
        assert_eq!(nft.guard_chains("knid").unwrap(), Some(Vec::new()));
    });
}

#[test]
fn a_guard_table_deleted_by_hand_is_made_again_by_the_next_guard_in_it() {
    in_private_netns("nft_guard_table_gone", || {
        let mut nft = Nft::open().unwrap();
        nft.add_guards("knid", &[guard("kn1")]).unwrap();
        let table = knid_netops::nft::guard_table("knid", "kn1");
        // This handle made the table, so its next guard there is sent without the table's
        // requests. Deleted by hand meanwhile, as `nft flush ruleset` would:
        let out = Command::new("nft")
            .args(["delete", "table", "netdev", &table])
            .output()
            .expect("run nft (package nftables)");
        assert!(out.status.success(), "{out:?}");
        assert!(!netdev_tables().contains(&table));
        nft.add_guards("knid", &[guard("kn1")])
            .expect("the guard goes in, its table made again");
        let chains = nft.guard_chains("knid").unwrap().expect("table exists");
        let names: Vec<&str> = chains.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["kn1"]);
        assert_eq!(chains[0].table, table);
        assert_eq!(
            nft.guard_drops("knid").unwrap().len(),
            6,
            "and its counters"
        );
        // And the table is known again: the next guard there goes in as well.
        nft.add_guards("knid", &[guard("kn1")]).unwrap();
        assert_eq!(nft.guard_chains("knid").unwrap().map(|c| c.len()), Some(1));
    });
}

/// The names of the `netdev` tables in the calling thread's netns, by `nft`.
fn netdev_tables() -> Vec<String> {
    let out = Command::new("nft")
        .args(["list", "tables", "netdev"])
        .output()
        .expect("run nft (package nftables)");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("table netdev "))
        .map(str::to_owned)
        .collect()
}

#[test]
fn guards_spread_over_their_tables_and_a_rebuild_moves_the_single_table_of_knid_0_4() {
    in_private_netns("nft_guard_tables", || {
        let mut nft = Nft::open().unwrap();
        // Knid up to 0.4 kept every guard in one table named after the prefix.
        let old = Command::new("nft")
            .args(["add table netdev knid; add counter netdev knid drop-mac; \
                 add chain netdev knid kn9 { type filter hook ingress device \"kn9\" \
                 priority -500; policy accept; }"])
            .status()
            .expect("run nft (package nftables)");
        assert!(old.success());
        let found = nft.guard_chains("knid").unwrap().expect("the old table");
        assert_eq!(found.len(), 1);
        assert_eq!(
            (found[0].table.as_str(), found[0].name.as_str()),
            ("knid", "kn9")
        );
        let guards: Vec<_> = (0..200).map(|n| guard(&format!("kn{n}"))).collect();
        nft.replace_guards("knid", &found, &guards).unwrap();
        let chains = nft.guard_chains("knid").unwrap().expect("tables exist");
        assert_eq!(chains.len(), 200);
        for chain in &chains {
            assert_eq!(
                chain.table,
                knid_netops::nft::guard_table("knid", &chain.name)
            );
            assert_eq!(chain.summary, guard(&chain.name).summary());
        }
        let tables = netdev_tables();
        assert!(
            !tables.iter().any(|t| t == "knid"),
            "the old table stays: {tables:?}"
        );
        // 200 names over 64 tables: no table holds more than a few dozen.
        assert!(tables.len() > 48, "{} tables", tables.len());
        // A rebuild with nothing changed sends no chain.
        nft.replace_guards("knid", &chains, &guards).unwrap();
        assert_eq!(nft.guard_chains("knid").unwrap().expect("tables"), chains);
    });
}
