use std::collections::HashMap;

use knid_store::StoreConfig;

use super::*;
use crate::config::Config;

fn networks(toml: &str) -> HashMap<String, Network> {
    Config::from_toml(toml)
        .expect("config")
        .networks()
        .expect("networks")
        .into_iter()
        .map(|n| (n.name.clone(), n))
        .collect()
}

const TWO: &str = "[networks.a]\nbridge = \"kn0\"\nsubnets = [\"10.1.0.0/24\", \"fd00:1::/64\"]\n\
                   [networks.b]\nkind = \"routed\"\nsubnets = [\"10.2.0.0/24\"]\n";

/// The store in `dir`, opened again once sled has let go of its lock.
fn open(dir: &tempfile::TempDir) -> Store {
    testkit::wait::retry_busy_lock(|| Store::open(&StoreConfig::new(dir.path().join("store"))))
        .expect("open the store")
}

#[test]
fn applied_subnets_are_recorded_rewritten_only_on_change_and_forgotten_when_unheld() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(&dir);
    save(&store, &networks(TWO), &[]).expect("save");
    let a = store.network("a").expect("read").expect("a recorded");
    assert_eq!(a.subnets, ["10.1.0.0/24", "fd00:1::/64"]);
    assert_eq!(a.gateways, ["10.1.0.1", "fd00:1::1"]);
    assert_eq!(a.source, "config");
    assert_eq!(
        subnets(&store, "b").expect("read"),
        Some(vec!["10.2.0.0/24".parse().expect("net")])
    );

    // The same subnets again: the record is not rewritten.
    std::thread::sleep(std::time::Duration::from_millis(5));
    save(&store, &networks(TWO), &[]).expect("save");
    let again = store.network("a").expect("read").expect("a recorded");
    assert_eq!(again.updated_at_ms, a.updated_at_ms);

    // b leaves the configuration while it still holds addresses: its record stays; once it
    // holds none, it goes.
    let only_a =
        networks("[networks.a]\nbridge = \"kn0\"\nsubnets = [\"10.1.0.0/24\", \"fd00:1::/64\"]\n");
    save(&store, &only_a, &["b".to_owned()]).expect("save");
    assert!(store.network("b").expect("read").is_some());
    save(&store, &only_a, &[]).expect("save");
    assert!(store.network("b").expect("read").is_none());
    drop(store);

    // What a restart reads back.
    let store = open(&dir);
    assert_eq!(
        subnets(&store, "a").expect("read").map(|s| s.len()),
        Some(2)
    );
    assert_eq!(subnets(&store, "never").expect("read"), None);
}

#[test]
fn recorded_cluster_cidrs_come_back_and_a_bad_one_is_reported_as_corrupt() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(&dir);
    assert_eq!(cluster_cidrs(&store).expect("read"), None);
    store
        .set_cluster_cidrs(&["10.244.0.0/16".to_owned()])
        .expect("set");
    assert_eq!(
        cluster_cidrs(&store).expect("read"),
        Some(vec!["10.244.0.0/16".parse().expect("net")])
    );
    store
        .set_cluster_cidrs(&["10.244.0.0/33".to_owned()])
        .expect("set");
    let err = cluster_cidrs(&store).expect_err("a CIDR that does not parse");
    assert!(err.chain().contains("meta/cluster"), "{}", err.chain());
}
