use super::*;

#[test]
fn host_names_are_stable_short_and_distinct() {
    let a = host_ifname("sandbox-1", "eth0");
    assert_eq!(a, host_ifname("sandbox-1", "eth0"));
    assert_eq!(a.len(), 12);
    assert!(a.starts_with(HOST_LINK_PREFIX));
    assert_ne!(a, host_ifname("sandbox-1", "eth1"));
    assert_ne!(a, host_ifname("sandbox-2", "eth0"));
    assert_ne!(stable_hash(&["a", "bc"]), stable_hash(&["ab", "c"]));
}

#[test]
fn host_name_is_pinned_across_releases() {
    // Recovery finds links by this name: changing the hash breaks upgrades.
    assert_eq!(
        host_ifname("abc", "eth0"),
        format!("kn{:010x}", stable_hash(&["abc", "eth0"]) >> 24)
    );
    assert_eq!(stable_hash(&[""]), 0xcbf2_9ce4_8422_2325);
}

#[test]
fn only_the_exact_host_name_form_is_knids() {
    assert!(is_host_ifname(&host_ifname("sandbox-1", "eth0")));
    assert!(is_host_ifname("kn0123456789"));
    for other in [
        "knid0",
        "kn012345678",
        "kn0123456789a",
        "kn012345678G",
        "kn0123456789".to_uppercase().as_str(),
        "xn0123456789",
        "",
    ] {
        assert!(!is_host_ifname(other), "{other}");
    }
}

#[test]
fn ifb_names_have_the_host_link_form_and_differ_from_the_host_end() {
    let ifb = ifb_ifname("sandbox-1", "eth0");
    assert!(is_host_ifname(&ifb), "{ifb}");
    assert_ne!(ifb, host_ifname("sandbox-1", "eth0"));
    assert_eq!(ifb, ifb_ifname("sandbox-1", "eth0"));
    assert_ne!(ifb, ifb_ifname("sandbox-1", "eth1"));
}
