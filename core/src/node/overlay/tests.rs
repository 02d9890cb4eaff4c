use super::*;

#[test]
fn a_nodes_vtep_mac_is_stable_local_unicast_and_differs_between_nodes() {
    let a = Vtep::of("node-a", 1, 8472);
    assert_eq!(a, Vtep::of("node-a", 1, 8472), "derived, not random");
    assert_ne!(a.mac, Vtep::of("node-b", 1, 8472).mac);
    assert_eq!(a.mac[0] & 0x01, 0, "unicast");
    assert_eq!(a.mac[0] & 0x02, 0x02, "locally administered");
}

#[test]
fn the_annotation_reads_back_and_a_wrong_one_says_what_is_wrong() {
    let a = Vtep::of("node-a", 42, 4789);
    let text = a.annotation();
    assert!(text.contains("\"version\":1"), "{text}");
    assert!(text.contains("\"vni\":42"), "{text}");
    assert_eq!(Vtep::parse(&text), Ok(a));
    for (bad, words) in [
        ("nonsense", "not knid's VXLAN endpoint"),
        (
            r#"{"version":2,"vni":1,"port":8472,"mac":"0a:00:00:00:00:01"}"#,
            "version 2",
        ),
        (
            r#"{"version":1,"vni":1,"port":8472,"mac":"01:00:00:00:00:01"}"#,
            "unicast",
        ),
    ] {
        let err = Vtep::parse(bad).expect_err(bad);
        assert!(err.contains(words), "{bad}: {err}");
    }
}

#[test]
fn a_vtep_address_is_the_first_of_the_pod_cidr_and_overhead_follows_the_underlay_family() {
    let v4: IpNet = "10.244.3.0/24".parse().unwrap();
    let v6: IpNet = "fd00:10:244:3::/64".parse().unwrap();
    assert_eq!(vtep::address(&v4), "10.244.3.0".parse::<IpAddr>().unwrap());
    assert_eq!(
        vtep::address(&v6),
        "fd00:10:244:3::".parse::<IpAddr>().unwrap()
    );
    assert_eq!(overhead(false), 50);
    assert_eq!(overhead(true), 70);
    assert_eq!(device_name(false), "vxlan.knid");
    assert_eq!(device_name(true), "vxlan6.knid");
}
