use super::*;

#[test]
fn cidr_compares_addresses_not_spellings() {
    assert_eq!(cidr("fd00:0::5/64"), cidr("fd00::5/64"));
    assert_ne!(cidr("10.0.0.5/24"), cidr("10.0.0.5/32"));
    assert_eq!(cidr("10.0.0.5"), None);
}

#[test]
fn a_pod_link_without_a_recorded_address_is_flagged() {
    let iface = pb::InterfaceResult {
        name: "eth0".to_owned(),
        mac: "02:00:00:00:00:01".to_owned(),
        ips: vec![pb::IpConfig {
            address: "10.88.0.5/24".to_owned(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let found = Found {
        index: 2,
        mac: "02:00:00:00:00:02".to_owned(),
        up: false,
        master: None,
        addresses: vec!["10.88.0.6/24".to_owned()],
    };
    let mut problems = Vec::new();
    check_pod_link(&iface, &found, &mut problems);
    assert_eq!(problems.len(), 3, "{problems:?}");
    assert!(problems[0].starts_with("DOWN"));
    assert!(problems[1].starts_with("MAC MISMATCH"));
    assert!(problems[2].starts_with("MISSING address 10.88.0.5/24"));
}
