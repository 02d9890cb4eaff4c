use super::*;
use crate::cni::error::INCOMPATIBLE_VERSION;

const LIST: &str = r#"{
    "cniVersion": "1.0.0", "name": "pods", "disableCheck": true,
    "plugins": [
        {"type": "bridge", "bridge": "cni0", "ipam": {"type": "host-local"}},
        {"type": "portmap", "capabilities": {"portMappings": true, "bandwidth": false}, "snat": true}
    ]
}"#;

#[test]
fn lists_parse_and_plugins_get_libcni_injected_fields() {
    let list = ConfList::parse(LIST.as_bytes()).unwrap();
    assert_eq!(
        (list.name.as_str(), list.version),
        ("pods", Version::V1_0_0)
    );
    assert!(list.disable_check && !list.disable_gc);
    assert_eq!(list.plugin_type(1), "portmap");
    let caps = json!({"portMappings": [{"hostPort": 80}], "bandwidth": {"ingressRate": 1}});
    let prev = json!({"cniVersion": "1.0.0", "ips": []});
    let conf = list.plugin_config(1, caps.as_object().unwrap(), Some(&prev));
    assert_eq!(conf["name"], "pods");
    assert_eq!(conf["cniVersion"], "1.0.0");
    assert_eq!(conf["snat"], true, "unknown keys pass through");
    assert!(conf.get("capabilities").is_none());
    assert_eq!(
        conf["runtimeConfig"],
        json!({"portMappings": [{"hostPort": 80}]})
    );
    assert_eq!(conf["prevResult"], prev);
    let first = list.plugin_config(0, caps.as_object().unwrap(), None);
    assert!(first.get("runtimeConfig").is_none() && first.get("prevResult").is_none());
    let gc = list.gc_config(0, &[("c1".into(), "eth0".into())]);
    let want = json!([{"containerID": "c1", "ifname": "eth0"}]);
    assert_eq!(gc["cni.dev/valid-attachments"], want);
    assert_eq!(gc["cni.dev/attachments"], want);
}

#[test]
fn single_conf_and_version_lists_are_accepted() {
    let conf = r#"{"cniVersion": "0.4.0", "name": "n", "type": "ptp"}"#;
    let list = ConfList::parse(conf.as_bytes()).unwrap();
    assert_eq!((list.plugins.len(), list.plugin_type(0)), (1, "ptp"));
    let versions =
        r#"{"cniVersions": ["0.4.0", "1.1.0", "9.9.9"], "name": "n", "plugins": [{"type": "x"}]}"#;
    assert_eq!(
        ConfList::parse(versions.as_bytes()).unwrap().version,
        Version::V1_1_0
    );
}

#[test]
fn a_plugins_numbers_reach_it_with_the_value_written() {
    // fuzz/corpus/cni_conflist/valid_plugin_number_of_61_digits: parsed without correct
    // rounding, this number reached the plugin one unit in the last place off.
    let digits = "6".repeat(61);
    for number in [
        digits.as_str(),
        "0.30000000000000004",
        "2.2250738585072011e-308",
    ] {
        let text = format!(
            r#"{{"cniVersion":"1.0.0","name":"n","plugins":[{{"type":"x","n":{number}}}]}}"#
        );
        let list = ConfList::parse(text.as_bytes()).unwrap();
        let sent = serde_json::to_vec(&list.plugin_config(0, &Map::new(), None)).unwrap();
        let seen: Value = serde_json::from_slice(&sent).unwrap();
        assert_eq!(seen["n"].as_f64(), number.parse::<f64>().ok(), "{number}");
    }
}

#[test]
fn bad_lists_name_the_key_and_carry_the_spec_code() {
    let cases: &[(&str, u32, &str)] = &[
        ("{", DECODE, "not JSON"),
        ("[]", INVALID_CONFIG, "JSON object"),
        (
            r#"{"cniVersion":"1.0.0","plugins":[{"type":"x"}]}"#,
            INVALID_CONFIG,
            "name",
        ),
        (
            r#"{"cniVersion":"1.0.0","name":"-x","plugins":[{"type":"x"}]}"#,
            INVALID_CONFIG,
            "name",
        ),
        (
            r#"{"cniVersion":"7.0.0","name":"n","plugins":[{"type":"x"}]}"#,
            INCOMPATIBLE_VERSION,
            "7.0.0",
        ),
        (
            r#"{"name":"n","plugins":[{"type":"x"}]}"#,
            INVALID_CONFIG,
            "cniVersion",
        ),
        (
            r#"{"cniVersion":"1.0.0","name":"n","plugins":[]}"#,
            INVALID_CONFIG,
            "plugins",
        ),
        (
            r#"{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"../x"}]}"#,
            INVALID_CONFIG,
            "plugins[0].type",
        ),
        (
            r#"{"cniVersion":"1.0.0","name":"n","plugins":[{"ipam":{}}]}"#,
            INVALID_CONFIG,
            "plugins[0].type",
        ),
        (
            r#"{"cniVersion":"1.0.0","name":"n","disableGC":"yes","plugins":[{"type":"x"}]}"#,
            INVALID_CONFIG,
            "disableGC",
        ),
    ];
    for (text, code, key) in cases {
        let err = ConfList::parse(text.as_bytes()).unwrap_err();
        assert_eq!(err.code, *code, "{text}: {err}");
        assert!(err.msg.contains(key), "{text}: {err}");
    }
}
