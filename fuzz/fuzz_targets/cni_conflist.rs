//! A CNI network configuration list (or a single plugin's .conf): parsing never panics, an
//! accepted list holds the spec's rules, round-trips through its own JSON and gives every plugin
//! libcni's injected keys, and a refusal carries code 1, 6 or 7.
#![no_main]

use knid_core::cni::error::{DECODE, INCOMPATIBLE_VERSION, INVALID_CONFIG};
use knid_core::cni::ConfList;
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Map, Value};

fuzz_target!(|data: &[u8]| {
    let list = match ConfList::parse(data) {
        Ok(list) => list,
        Err(e) => {
            assert!([INCOMPATIBLE_VERSION, DECODE, INVALID_CONFIG].contains(&e.code), "{e}");
            return;
        }
    };
    let name = list.name.as_bytes();
    assert!(name.first().is_some_and(u8::is_ascii_alphanumeric), "{list:?}");
    assert!(name.iter().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(b)));
    assert!(!list.plugins.is_empty());
    let caps = json!({"portMappings": [], "dns": {}});
    let caps = caps.as_object().expect("object");
    let prev = json!({"cniVersion": list.version.as_str()});
    for i in 0..list.plugins.len() {
        let plugin = list.plugin_type(i);
        assert!(!plugin.is_empty() && !plugin.contains(['/', '\\']) && plugin != "..");
        let conf = list.plugin_config(i, caps, Some(&prev));
        assert_eq!(conf["name"], json!(list.name));
        assert_eq!(conf["cniVersion"], json!(list.version.as_str()));
        assert_eq!(conf["prevResult"], prev);
        assert!(conf.get("capabilities").is_none());
        let gc = list.gc_config(i, &[("c".into(), "eth0".into())]);
        assert_eq!(gc["cni.dev/valid-attachments"], gc["cni.dev/attachments"]);
    }
    let mut again = Map::new();
    again.insert("cniVersion".into(), json!(list.version.as_str()));
    again.insert("name".into(), json!(list.name));
    again.insert("disableCheck".into(), json!(list.disable_check));
    again.insert("disableGC".into(), json!(list.disable_gc));
    let plugins = list.plugins.iter().cloned().map(Value::Object).collect();
    again.insert("plugins".into(), Value::Array(plugins));
    let text = serde_json::to_vec(&Value::Object(again)).expect("encodes");
    assert_eq!(ConfList::parse(&text).ok(), Some(list));
});
