use super::*;
use knid_core::cni::error::INCOMPATIBLE_VERSION;
use serde_json::json;

fn base() -> Value {
    json!({"cniVersion": "1.0.0", "name": "pods", "type": "knid"})
}

#[test]
fn defaults_are_the_list_name_and_the_standard_socket() {
    let conf = PluginConf::parse(&base(), false).expect("valid");
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
    let conf = PluginConf::parse(&value, false).expect("valid");
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
        let conf = PluginConf::parse(&value, false).expect("valid");
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
        let err = PluginConf::parse(&conf, false).expect_err(key);
        assert_eq!(err.code, code, "{key}: {}", err.msg);
        assert!(err.msg.contains(named), "{key}: {}", err.msg);
    }
}

/// The runtimeConfig go-cni 1.1.7 (containerd's CRI) writes: its structs have no JSON tags, so
/// the keys are Go's field names.
fn go_cni_runtime_config() -> Value {
    json!({
        "portMappings": [{"HostPort": 8090, "ContainerPort": 80, "Protocol": "tcp", "HostIP": ""}],
        "dns": {"Servers": ["10.96.0.10"], "Searches": ["ns.svc.cluster.local"], "Options": ["ndots:5"]},
        "bandwidth": {"IngressRate": 10_000_000, "IngressBurst": 1_000_000, "EgressRate": 0, "EgressBurst": 0},
        "io.kubernetes.cri.pod-annotations": {"kubernetes.io/ingress-bandwidth": "10M", "other": "x"},
        "cgroupPath": "/kubepods/pod1",
        "ipRanges": [[{"subnet": "10.88.0.0/24"}]]
    })
}

#[test]
fn go_cni_capabilities_are_read_whatever_the_case_of_their_keys() {
    let mut value = base();
    value["runtimeConfig"] = go_cni_runtime_config();
    let rc = PluginConf::parse(&value, false).expect("valid").runtime;
    assert_eq!(rc.port_mappings.len(), 1);
    let m = &rc.port_mappings[0];
    assert_eq!(
        (
            m.host_port,
            m.container_port,
            m.protocol.as_str(),
            m.host_ip.as_str()
        ),
        (8090, 80, "tcp", "")
    );
    let dns = rc.dns.expect("dns");
    assert_eq!(dns.servers, ["10.96.0.10"]);
    assert_eq!(dns.searches, ["ns.svc.cluster.local"]);
    assert_eq!(dns.options, ["ndots:5"]);
    assert_eq!(
        rc.bandwidth,
        Some(Bandwidth {
            ingress_rate: 10_000_000,
            ingress_burst: 1_000_000,
            egress_rate: 0,
            egress_burst: 0
        })
    );
    assert_eq!(rc.annotations.len(), 2);
}

#[test]
fn a_teardown_drops_a_runtime_config_or_prev_result_it_cannot_use() {
    let mut value = base();
    value["runtimeConfig"] = json!({"portMappings": [{"HostPort": "eighty"}], "dns": 7});
    value["prevResult"] = json!({"ips": [{"address": "nope"}]});
    let err = PluginConf::parse(&value, false).expect_err("ADD refuses it");
    assert!(
        err.msg.contains("runtimeConfig.portMappings[0].hostPort"),
        "{}",
        err.msg
    );
    let conf = PluginConf::parse(&value, true).expect("DEL takes it");
    assert!(conf.runtime.port_mappings.is_empty() && conf.runtime.dns.is_none());
    assert!(conf.prev_result.is_none());
}
