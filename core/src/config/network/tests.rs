use std::collections::BTreeMap;

use super::*;
use crate::config::Config;

#[test]
fn every_kind_parses_with_its_devices_and_defaults() {
    let config = Config::from_toml(
        r#"
[networks.br]
bridge = "b0"
subnets = ["10.0.0.0/24"]
[networks.rt]
kind = "routed"
subnets = ["10.1.0.0/24", "fd01::/64"]
[networks.mv]
kind = "macvlan"
parent = "eth1"
subnets = ["10.2.0.0/24"]
[networks.pt]
kind = "macvlan"
parent = "eth3"
mode = "passthru"
subnets = ["10.5.0.0/24"]
[networks.iv]
kind = "ipvlan"
parent = "eth2"
mode = "l3"
subnets = ["10.3.0.0/24"]
[networks.hd]
kind = "host-device"
"#,
    )
    .expect("valid");
    let nets: BTreeMap<String, Network> = config
        .networks()
        .expect("valid")
        .into_iter()
        .map(|n| (n.name.clone(), n))
        .collect();
    assert_eq!(nets["br"].bridge(), Some("b0"));
    assert_eq!(nets["br"].default_kind(), InterfaceKind::Veth);
    let rt = &nets["rt"];
    assert_eq!((rt.kind(), rt.bridge()), ("routed", None));
    assert_eq!(rt.subnets[0].1, ROUTED_GATEWAY_V4);
    assert_eq!(rt.subnets[1].1, ROUTED_GATEWAY_V6);
    assert!(rt.allows(InterfaceKind::Tap, false).is_ok());
    assert!(rt.allows(InterfaceKind::Tap, true).is_err());
    assert!(rt.allows(InterfaceKind::Macvlan, false).is_err());
    let mv = &nets["mv"];
    assert_eq!((mv.parent(), mv.mode()), (Some("eth1"), Some("bridge")));
    assert_eq!(mv.default_kind(), InterfaceKind::Macvlan);
    assert!(mv.allows(InterfaceKind::Veth, false).is_err());
    assert_eq!(nets["pt"].mode(), Some("passthru"));
    assert_eq!(
        (nets["iv"].parent(), nets["iv"].mode()),
        (Some("eth2"), Some("l3"))
    );
    let hd = &nets["hd"];
    assert!(hd.subnets.is_empty());
    assert_eq!(hd.default_kind(), InterfaceKind::HostDevice);
    assert!(nets["br"].allows(InterfaceKind::Tap, true).is_ok());
    assert!(nets["br"].allows(InterfaceKind::HostDevice, false).is_err());
}

#[test]
fn explicit_gateway_is_kept() {
    let config = Config::from_toml(
        "[networks.n]\nbridge = \"b\"\nsubnets = [\"fd01::/64\", \"10.0.0.0/24\"]\ngateways = [\"fd01::fe\", \"10.0.0.254\"]",
    )
    .expect("valid");
    let net = &config.networks().expect("valid")[0];
    // IPv4 sorts first whatever the file order.
    assert_eq!(net.subnets[0].1.to_string(), "10.0.0.254");
    assert_eq!(net.subnets[1].1.to_string(), "fd01::fe");
}

#[test]
fn allow_uplink_is_a_host_device_key_off_by_default() {
    let networks = |text: &str| Config::from_toml(text).and_then(|c| c.networks());
    let off = networks("[networks.hd]\nkind = \"host-device\"\n").expect("valid");
    assert!(!off[0].allows_uplink());
    let on =
        networks("[networks.hd]\nkind = \"host-device\"\nallow_uplink = true\n").expect("valid");
    assert!(on[0].allows_uplink());
    let err = networks(
        "[networks.n]\nbridge = \"b\"\nsubnets = [\"10.0.0.0/24\"]\nallow_uplink = true\n",
    )
    .expect_err("allow_uplink on a bridge network");
    let text = err.to_string();
    assert!(
        text.contains("allow_uplink") && text.contains("not used by bridge networks"),
        "{text}"
    );
}

#[test]
fn masquerade_is_on_by_default_on_bridge_and_routed_networks_and_off_elsewhere() {
    let config = Config::from_toml(
        r#"
[networks.br]
bridge = "b0"
subnets = ["10.0.0.0/24"]
no_masquerade = ["10.96.0.0/12"]
[networks.rt]
kind = "routed"
subnets = ["10.1.0.0/24"]
masquerade = false
[networks.mv]
kind = "macvlan"
parent = "eth1"
subnets = ["10.2.0.0/24"]
"#,
    )
    .expect("valid");
    let nets: BTreeMap<String, Network> = config
        .networks()
        .expect("valid")
        .into_iter()
        .map(|n| (n.name.clone(), n))
        .collect();
    assert_eq!(
        nets["br"].masquerade,
        Some(vec!["10.96.0.0/12".parse().expect("CIDR")])
    );
    assert_eq!(nets["rt"].masquerade, None);
    assert_eq!(nets["mv"].masquerade, None);
    let local: Vec<IpNet> = vec!["10.1.0.0/24".parse().expect("CIDR")];
    let rule = nets["br"].masquerade_rule(&local).expect("masquerades");
    assert_eq!(
        rule.sources,
        vec!["10.0.0.0/24".parse::<IpNet>().expect("CIDR")]
    );
    assert_eq!(rule.except.len(), 3, "{rule:?}");
}

#[test]
fn masquerade_keys_are_refused_where_they_mean_nothing_or_are_malformed() {
    for (toml, key) in [
        (
            "[networks.mv]\nkind = \"macvlan\"\nparent = \"eth1\"\nsubnets = [\"10.2.0.0/24\"]\nmasquerade = true\n",
            "networks.mv.masquerade",
        ),
        (
            "[networks.br]\nbridge = \"b0\"\nsubnets = [\"10.0.0.0/24\"]\nno_masquerade = [\"10.0.0.1/8\"]\n",
            "networks.br.no_masquerade",
        ),
    ] {
        let err = Config::from_toml(toml)
            .and_then(|c| c.networks())
            .expect_err("refused");
        assert!(err.to_string().contains(key), "{err}");
    }
}

#[test]
fn antispoof_is_on_by_default_on_bridge_and_routed_networks_and_refused_elsewhere() {
    let config = Config::from_toml(
        r#"
[networks.br]
bridge = "b0"
subnets = ["10.0.0.0/24"]
[networks.open]
bridge = "b1"
subnets = ["10.4.0.0/24"]
antispoof = false
[networks.rt]
kind = "routed"
subnets = ["10.1.0.0/24"]
[networks.mv]
kind = "macvlan"
parent = "eth1"
subnets = ["10.2.0.0/24"]
"#,
    )
    .expect("valid");
    let nets: BTreeMap<String, Network> = config
        .networks()
        .expect("valid")
        .into_iter()
        .map(|n| (n.name.clone(), n))
        .collect();
    let guarded: Vec<(&str, bool)> = nets
        .iter()
        .map(|(name, n)| (name.as_str(), n.antispoof))
        .collect();
    assert_eq!(
        guarded,
        [("br", true), ("mv", false), ("open", false), ("rt", true)]
    );
    let err = Config::from_toml(
        "[networks.mv]\nkind = \"macvlan\"\nparent = \"eth1\"\nsubnets = [\"10.2.0.0/24\"]\nantispoof = false\n",
    )
    .and_then(|c| c.networks())
    .expect_err("refused");
    assert!(err.to_string().contains("networks.mv.antispoof"), "{err}");
}
