use super::*;
use crate::verbs::doctor::Level;

fn network(used: u64, total: u64) -> pb::NetworksResponse {
    pb::NetworksResponse {
        networks: vec![pb::Network {
            name: "small".to_owned(),
            capacity: vec![pb::Capacity {
                family: "ipv4".to_owned(),
                used,
                total,
                free: total - used,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn level(used: u64, total: u64) -> Level {
    let mut out = Vec::new();
    pools(&network(used, total), &mut out);
    assert_eq!(out.len(), 1);
    out[0].level
}

#[test]
fn pools_warn_from_90_percent_and_when_exhausted_and_never_fail() {
    assert_eq!(level(89, 100), Level::Ok);
    assert_eq!(level(90, 100), Level::Warn);
    assert_eq!(level(99, 100), Level::Warn);
    // A full pool stops new pods, never running ones: nothing is broken now.
    assert_eq!(level(100, 100), Level::Warn);
    // The /27 of tests/doctor.rs: 29 assignable addresses.
    assert_eq!(level(27, 29), Level::Warn);
    assert_eq!(level(29, 29), Level::Warn);
    let mut out = Vec::new();
    pools(&network(29, 29), &mut out);
    assert!(out[0].message.contains("exhausted"), "{}", out[0].message);
}

#[test]
fn an_exhausted_networks_condition_is_a_warning_with_the_pool_fixes() {
    let status = pb::StatusResponse {
        conditions: vec![pb::Condition {
            type_: "NetworkSchedulable/small".to_owned(),
            reason: "Exhausted".to_owned(),
            message: "ipv4 pool exhausted (29 of 29 addresses in use)".to_owned(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let mut out = Vec::new();
    conditions(&status, &mut out);
    assert_eq!(out[0].level, Level::Warn);
    assert!(
        out[0].fixes.iter().any(|f| f.contains("wider subnet")),
        "{:?}",
        out[0].fixes
    );
}

#[test]
fn a_failed_condition_says_how_to_fix_it() {
    let status = pb::StatusResponse {
        conditions: vec![pb::Condition {
            type_: "NetworkReady".to_owned(),
            reason: "NodeNetworkBroken".to_owned(),
            message: "network default: bridge knid0 is missing".to_owned(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let mut out = Vec::new();
    conditions(&status, &mut out);
    assert_eq!(out[0].level, Level::Fail);
    assert!(out[0].message.contains("knid0"), "{}", out[0].message);
    assert_eq!(out[0].fixes, ["knictl setup-node-network"]);
}
