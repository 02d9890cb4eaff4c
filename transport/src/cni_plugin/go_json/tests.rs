use serde_json::{json, Map, Value};

use super::field;

fn obj(value: Value) -> Map<String, Value> {
    value.as_object().expect("an object").clone()
}

#[test]
fn the_exact_key_wins_over_a_key_differing_in_case() {
    let o = obj(json!({"HostPort": 1, "hostPort": 2}));
    assert_eq!(field(&o, "hostPort"), Some(&json!(2)));
    assert_eq!(field(&o, "HostPort"), Some(&json!(1)));
}

#[test]
fn a_key_differing_only_in_case_is_found_as_go_finds_it() {
    let o = obj(json!({"HostIP": "10.0.0.1", "CONTAINERPORT": 80}));
    assert_eq!(field(&o, "hostIP"), Some(&json!("10.0.0.1")));
    assert_eq!(field(&o, "containerPort"), Some(&json!(80)));
}

#[test]
fn a_different_key_is_not_found() {
    let o = obj(json!({"host_port": 1, "hostPorts": 2}));
    assert_eq!(field(&o, "hostPort"), None);
}
