use super::*;

#[test]
fn a_missing_netns_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("gone");
    let err = pod_interface(&path, "eth0", MacCheck::default(), &[]).expect_err("no netns there");
    assert_eq!(err.kind(), "unreadable");
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );
}

#[test]
fn each_difference_names_the_interface_and_its_kind() {
    let missing = |renamed_to: Option<&str>| Difference::Missing {
        ifname: "eth0".into(),
        place: "netns /run/netns/p".into(),
        renamed_to: renamed_to.map(str::to_owned),
    };
    assert_eq!(missing(None).kind(), "missing");
    assert_eq!(
        missing(None).to_string(),
        "interface eth0 does not exist in netns /run/netns/p"
    );
    assert_eq!(missing(Some("gone0")).kind(), "renamed");
    assert!(missing(Some("gone0"))
        .to_string()
        .ends_with("renamed to gone0"));
    let down = Difference::Down {
        ifname: "kn0123456789".into(),
        place: "the host netns".into(),
    };
    assert_eq!(down.kind(), "down");
    assert_eq!(
        down.to_string(),
        "interface kn0123456789 in the host netns is down"
    );
}

#[test]
fn a_host_link_must_be_there_and_up() {
    let mut link = Link {
        index: 3,
        name: "kn0123456789".into(),
        kind: Some("veth".into()),
        mtu: 1500,
        up: true,
        ..Link::default()
    };
    assert_eq!(host_link("kn0123456789", Some(&link)), Ok(()));
    link.up = false;
    assert_eq!(
        host_link("kn0123456789", Some(&link)).map_err(|d| d.kind()),
        Err("down")
    );
    assert_eq!(
        host_link("kn0123456789", None).map_err(|d| d.kind()),
        Err("missing")
    );
}

#[test]
fn a_host_port_missing_from_the_table_or_a_table_gone_is_named() {
    use knid_netops::nft::{PortMap, Protocol, TableContents};
    let element = |port| PortMap {
        protocol: Protocol::Tcp,
        host_ip: None,
        host_port: port,
        target: "10.88.0.5".parse().expect("address"),
        target_port: 80,
    };
    let table = TableContents {
        chains: Vec::new(),
        port_maps: vec![element(8080)],
    };
    assert_eq!(host_ports(&[element(8080)], Some(&table)), Ok(()));
    let missing = host_ports(&[element(8080), element(9090)], Some(&table)).expect_err("9090");
    assert_eq!(missing.kind(), "hostport");
    assert_eq!(
        missing.to_string(),
        "host port tcp/9090 -> 10.88.0.5:80 is missing from nf_tables table inet knid"
    );
    let gone = host_ports(&[element(8080)], None).expect_err("no table");
    assert!(gone.to_string().ends_with("does not exist"), "{gone}");
}
