use super::*;

fn sample() -> CniResult {
    CniResult {
        interfaces: vec![
            Interface {
                name: "vethabc".into(),
                mac: "02:00:00:00:00:01".into(),
                ..Default::default()
            },
            Interface {
                name: "eth0".into(),
                mac: "02:00:00:00:00:02".into(),
                mtu: Some(1500),
                sandbox: "/run/netns/p".into(),
                ..Default::default()
            },
        ],
        ips: vec![
            IpConfig {
                address: "10.1.0.5/24".parse().unwrap(),
                gateway: "10.1.0.1".parse().ok(),
                interface: Some(1),
            },
            IpConfig {
                address: "fd00::5/64".parse().unwrap(),
                gateway: None,
                interface: Some(1),
            },
        ],
        routes: vec![Route {
            dst: "0.0.0.0/0".parse().unwrap(),
            gw: "10.1.0.1".parse().ok(),
            mtu: Some(1400),
            advmss: None,
            priority: Some(100),
            table: None,
            scope: None,
        }],
        dns: Dns {
            nameservers: vec!["10.96.0.10".into()],
            ..Default::default()
        },
    }
}

#[test]
fn every_version_round_trips_what_it_can_carry() {
    let r = sample();
    for v in crate::cni::version::SUPPORTED {
        let json = r.to_json(v);
        assert_eq!(json["cniVersion"], v.as_str());
        let back = CniResult::parse(&json).unwrap();
        assert_eq!(back.ips, r.ips, "{v}");
        assert_eq!(json["ips"][0].get("version").is_some(), v < Version::V1_0_0);
        let extras = v >= Version::V1_1_0;
        assert_eq!(json["routes"][0].get("mtu").is_some(), extras, "{v}");
        assert_eq!(json["interfaces"][1].get("mtu").is_some(), extras, "{v}");
        assert!(json["interfaces"][0].get("sandbox").is_none());
    }
    assert_eq!(CniResult::parse(&r.to_json(Version::V1_1_0)).ok(), Some(r));
}

#[test]
fn bad_results_name_the_field() {
    let cases = [
        (json!({"ips": [{"address": "10.0.0.1"}]}), "ips[0].address"),
        (
            json!({"ips": [{"address": "10.0.0.1/24", "gateway": "x"}]}),
            "ips[0].gateway",
        ),
        (
            json!({"ips": [{"address": "10.0.0.1/24", "interface": 3}]}),
            "ips[0].interface",
        ),
        (json!({"routes": [{"dst": "default"}]}), "routes[0].dst"),
        (json!({"ip4": {"ip": "10.0.0.1/24"}}), "ip4/ip6"),
    ];
    for (value, field) in cases {
        let err = CniResult::parse(&value).unwrap_err();
        assert_eq!(err.code, DECODE, "{value}");
        assert!(err.msg.contains(field), "{field}: {}", err.msg);
    }
}
