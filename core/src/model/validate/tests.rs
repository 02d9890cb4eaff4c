use super::*;

#[test]
fn sandbox_ids_follow_the_cni_container_id_rule() {
    assert!(sandbox_id("abc-123_x.y").is_ok());
    assert!(sandbox_id(&"a".repeat(128)).is_ok());
    for bad in ["", "-abc", ".abc", "a/b", "a b", "é", &"a".repeat(129)] {
        assert!(sandbox_id(bad).is_err(), "{bad:?} accepted");
    }
}

#[test]
fn ifnames_are_bounded_and_free_of_separators() {
    assert!(ifname("eth0").is_ok());
    assert!(ifname("abcdefghijklmno").is_ok());
    for bad in [
        "",
        ".",
        "..",
        "a/b",
        "a:b",
        "a b",
        "abcdefghijklmnop",
        "eth%d",
        "a%s",
        "e%d%d",
    ] {
        assert!(ifname(bad).is_err(), "{bad:?} accepted");
    }
}

#[test]
fn macs_must_be_unicast_and_well_formed() {
    assert_eq!(
        mac("02:42:ac:11:00:02").ok(),
        Some([2, 0x42, 0xac, 0x11, 0, 2])
    );
    assert!(mac("02-42-AC-11-00-02").is_ok());
    for bad in [
        "",
        "01:00:5e:00:00:01",
        "00:00:00:00:00:00",
        "02:42:ac:11:00",
        "02:42:ac:11:00:02:03",
        "2:42:ac:11:00:02",
        "zz:42:ac:11:00:02",
    ] {
        assert!(mac(bad).is_err(), "{bad:?} accepted");
    }
}

#[test]
fn a_mac_octet_with_a_sign_is_refused() {
    // fuzz/corpus/attach_request/invalid_mac_octet_with_plus_sign
    for bad in [
        "02:+2:ac:11:00:02",
        "+2:42:ac:11:00:02",
        "02-42-ac-11-00-+2",
    ] {
        assert!(mac(bad).is_err(), "{bad:?} accepted");
    }
}

#[test]
fn mtu_bounds_are_inclusive() {
    assert!(mtu(68).is_ok() && mtu(65535).is_ok());
    assert!(mtu(67).is_err() && mtu(65536).is_err() && mtu(0).is_err());
}

#[test]
fn subnets_reject_host_bits() {
    assert!(subnet("10.88.0.0/16").is_ok());
    assert!(subnet("fd00:88::/64").is_ok());
    assert!(subnet("10.88.0.1/16").is_err());
    assert!(subnet("10.88.0.0/33").is_err());
    assert!(subnet("10.88.0.0").is_err());
}

#[test]
fn netns_paths_must_be_absolute_and_normalised() {
    assert!(netns_path("/run/netns/pod1").is_ok());
    for bad in [
        "",
        "run/netns/x",
        "/run/netns/../x",
        "/run/./netns/x",
        "/run//netns/x",
        "/run/netns/x/",
    ] {
        assert!(netns_path(bad).is_err(), "{bad:?} accepted");
    }
}

#[test]
fn socket_paths_must_fit_sun_path() {
    assert!(socket_path("/run/mesh/ext.sock").is_ok());
    assert!(socket_path(&format!("/{}", "s".repeat(106))).is_ok());
    for bad in [
        "",
        "ext.sock",
        "/run/../ext.sock",
        "/run//ext.sock",
        &format!("/{}", "s".repeat(107)),
    ] {
        assert!(socket_path(bad).is_err(), "{bad:?} accepted");
    }
}

#[test]
fn names_are_short_and_plain() {
    assert!(name("mesh-agent_1.v2").is_ok());
    assert!(name(&"n".repeat(64)).is_ok());
    for bad in ["", "a/b", "a b", "é", &"n".repeat(65)] {
        assert!(name(bad).is_err(), "{bad:?} accepted");
    }
}

#[test]
fn netns_prefixes_allow_direct_children_and_proc_pids() {
    let prefixes = vec!["/run/netns/".to_owned(), "/proc/".to_owned()];
    assert!(netns_path_allowed("/run/netns/pod1", &prefixes));
    assert!(netns_path_allowed("/proc/42/ns/net", &prefixes));
    assert!(!netns_path_allowed("/run/netns/a/b", &prefixes));
    assert!(!netns_path_allowed("/run/netns/", &prefixes));
    assert!(!netns_path_allowed("/proc/self/ns/net", &prefixes));
    assert!(!netns_path_allowed("/proc/42/ns/mnt", &prefixes));
    assert!(!netns_path_allowed("/etc/passwd", &prefixes));
}

#[test]
fn labels_are_bounded() {
    let mut map = BTreeMap::new();
    map.insert("k".to_owned(), "v".to_owned());
    assert!(labels(&map).is_ok());
    map.insert(String::new(), "v".to_owned());
    assert!(labels(&map).is_err());
    let big: BTreeMap<_, _> = (0..=MAX_LABELS)
        .map(|i| (i.to_string(), String::new()))
        .collect();
    assert!(labels(&big).is_err());
}

#[test]
fn pci_addresses_are_strict() {
    for good in ["0000:3b:00.1", "0001:00:1f.7", "ffff:ff:00.0"] {
        assert!(pci_address(good).is_ok(), "{good}");
    }
    for bad in [
        "",
        "0000:3b:00",
        "0000:3b:00.8",
        "0000:3B:00.1",
        "000:3b:00.1",
        "0000:3b:20.0",
        "0000:3b:00.1/..",
        "../../../x",
        "0000-3b:00.1",
        "0000:3b:0g.1",
    ] {
        assert!(pci_address(bad).is_err(), "{bad}");
    }
}

#[test]
fn the_accepted_netns_paths_are_spelled_out_for_a_refusal() {
    let prefixes = vec!["/run/netns/".to_owned(), "/proc/".to_owned()];
    let text = netns_paths_accepted(&prefixes);
    assert!(
        text.starts_with("/run/netns/<name>, /proc/<pid>/ns/net (a numeric pid"),
        "{text}"
    );
    assert!(text.contains("/proc/self"), "{text}");
}
