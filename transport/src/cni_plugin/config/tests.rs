use super::*;
use knid_core::cni::error::INCOMPATIBLE_VERSION;
use serde_json::json;

fn base() -> Value {
    json!({"cniVersion": "1.0.0", "name": "pods", "type": "knid"})
}

#[test]
fn defaults_are_the_list_name_and_the_standard_socket() {
    let conf = PluginConf::parse(&base()).expect("valid");
    assert_eq!(conf.version, Version::V1_0_0);
    assert_eq!(conf.network, "pods");
    assert_eq!(conf.socket, PathBuf::from(DEFAULT_SOCKET));
    assert!(conf.prev_result.is_none() && conf.valid_attachments.is_none());
}

#[test]
fn runtime_config_becomes_request_fields() {
    let mut value = base();
    value["network"] = json!("default");
    value["runtimeConfig"] = json!({
        "portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "TCP"}],
        "dns": {"servers": ["10.96.0.10"], "searches": ["svc.local"]},
        "ips": ["10.88.0.9/24", "fd00:88::9"],
        "mac": "02:00:00:00:00:09",
        "bandwidth": {"ingressRate": 1}
    });
    let conf = PluginConf::parse(&value).expect("valid");
    assert_eq!(conf.network, "default");
    let rc = conf.runtime;
    assert_eq!(rc.port_mappings.len(), 1);
    assert_eq!(rc.port_mappings[0].host_port, 8080);
    assert_eq!(rc.port_mappings[0].protocol, "tcp");
    assert_eq!(rc.dns.expect("dns").servers, ["10.96.0.10"]);
    assert_eq!(rc.ips, ["10.88.0.9", "fd00:88::9"]);
    assert_eq!(rc.mac, "02:00:00:00:00:09");
}

#[test]
fn gc_lists_are_read_under_either_key() {
    for key in ["cni.dev/valid-attachments", "cni.dev/attachments"] {
        let mut value = base();
        value[key] = json!([{"containerID": "a", "ifname": "eth0"}]);
        let conf = PluginConf::parse(&value).expect("valid");
        assert_eq!(
            conf.valid_attachments,
            Some(vec![("a".into(), "eth0".into())])
        );
    }
}

#[test]
fn bad_keys_are_named() {
    let cases: [(&str, Value, u32, &str); 10] = [
        ("name", Value::Null, INVALID_CONFIG, "name"),
        ("name", json!("-x"), INVALID_CONFIG, "name"),
        ("type", json!("bridge"), INVALID_CONFIG, "type"),
        ("network", json!("a/b"), INVALID_CONFIG, "network"),
        ("socket", json!("run/knid.sock"), INVALID_CONFIG, "socket"),
        ("cniVersion", json!("0.2.0"), INCOMPATIBLE_VERSION, "0.2.0"),
        ("cniVersion", Value::Null, INVALID_CONFIG, "cniVersion"),
        (
            "runtimeConfig",
            json!({"portMappings": [{"hostPort": 0, "containerPort": 80}]}),
            INVALID_CONFIG,
            "runtimeConfig.portMappings[0].hostPort",
        ),
        (
            "prevResult",
            json!({"ips": [{"address": "nope"}]}),
            DECODE,
            "prevResult",
        ),
        (
            "cni.dev/valid-attachments",
            json!([{"ifname": "eth0"}]),
            INVALID_CONFIG,
            "cni.dev/valid-attachments[0].containerID",
        ),
    ];
    for (key, value, code, named) in cases {
        let mut conf = base();
        match value {
            Value::Null => {
                conf.as_object_mut().expect("object").remove(key);
            }
            v => conf[key] = v,
        }
        let err = PluginConf::parse(&conf).expect_err(key);
        assert_eq!(err.code, code, "{key}: {}", err.msg);
        assert!(err.msg.contains(named), "{key}: {}", err.msg);
    }
}
