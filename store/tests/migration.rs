//! The schema 1 → 2 migration on real sled databases: what it derives, that it runs once, and
//! that a process killed in the middle of it (SIGABRT at each step, in a child process) leaves
//! the old store or the new one, never a mix, and the next open finishes the job.

use std::process::Command;

use knid_store::{
    migrate, AttachmentRecord, AttachmentState, Batch, IpRecord, Owner, Store, StoreConfig,
    SCHEMA_VERSION,
};
use tempfile::TempDir;

mod common;
use common::{open_raw, retry_busy_lock};

/// Environment of the child process: the step to abort at, and the store's directory.
const ABORT_AT: &str = "KNID_STORE_TEST_ABORT_AT";
const STORE_DIR: &str = "KNID_STORE_TEST_DIR";

fn attachment(sandbox: &str, network: &str, kind: &str, ips: &[(&str, &str)]) -> AttachmentRecord {
    AttachmentRecord {
        sandbox_id: sandbox.to_owned(),
        ifname: "eth0".to_owned(),
        network: network.to_owned(),
        kind: kind.to_owned(),
        state: AttachmentState::ATTACHED.into(),
        host_ifname: format!("kn{sandbox}"),
        ips: ips
            .iter()
            .map(|(address, gateway)| IpRecord {
                address: (*address).to_owned(),
                gateway: (*gateway).to_owned(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// A store as knid with schema 1 left it: pods on a dual-stack bridge network (`pods`) and on
/// a routed one (`edge`, host prefixes), `meta/schema` 1 and no `networks` tree.
fn schema_1_store() -> TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::open(&StoreConfig::new(dir.path().join("state"))).expect("open");
    let mut batch = Batch::new();
    for (i, sandbox) in ["a", "b"].iter().enumerate() {
        let v4 = format!("10.244.1.{}/24", i + 2);
        let v6 = format!("fd00:10:244:1::{}/64", i + 2);
        batch.put_attachment(attachment(
            sandbox,
            "pods",
            "bridge",
            &[(&v4, "10.244.1.1"), (&v6, "fd00:10:244:1::1")],
        ));
        batch.reserve(
            "pods",
            v4.split('/')
                .next()
                .unwrap_or_default()
                .parse()
                .expect("ip"),
            Owner::new(*sandbox, "eth0"),
        );
    }
    batch.put_attachment(attachment(
        "r",
        "edge",
        "routed",
        &[("10.9.0.2/32", "169.254.1.1")],
    ));
    store.commit(&batch).expect("commit");
    drop(store);
    let db = open_raw(&dir);
    db.open_tree("meta")
        .expect("meta")
        .insert("schema", &1u32.to_be_bytes())
        .expect("schema 1");
    db.drop_tree("networks").expect("drop networks");
    db.flush().expect("flush");
    dir
}

fn open(dir: &TempDir, on_step: Option<fn(&'static str)>) -> Store {
    let mut config = StoreConfig::new(dir.path().join("state"));
    config.on_migration_step = on_step;
    retry_busy_lock(|| Store::open(&config)).expect("open the store")
}

/// `meta/schema` and the number of `networks` records, read raw.
fn raw_state(dir: &TempDir) -> (u32, usize) {
    let db = open_raw(dir);
    let schema = db
        .open_tree("meta")
        .expect("meta")
        .get("schema")
        .expect("read schema")
        .map(|v| u32::from_be_bytes(v.as_ref().try_into().expect("4 bytes")))
        .expect("schema is set");
    let networks = db.open_tree("networks").expect("networks").len();
    (schema, networks)
}

#[test]
fn a_schema_1_store_is_migrated_with_each_networks_subnets_read_off_its_attachments() {
    let dir = schema_1_store();
    assert_eq!(raw_state(&dir), (1, 0));
    let store = open(&dir, None);
    let pods = store
        .network("pods")
        .expect("read")
        .expect("pods got a record");
    assert_eq!(pods.subnets, ["10.244.1.0/24", "fd00:10:244:1::/64"]);
    assert_eq!(pods.gateways, ["10.244.1.1", "fd00:10:244:1::1"]);
    assert_eq!(pods.source, "migration");
    // Host prefixes say nothing of a routed network's pool.
    assert!(store.network("edge").expect("read").is_none());
    // Nothing else changed.
    assert_eq!(store.all_attachments().expect("read").decoded.len(), 3);
    assert_eq!(store.reservations("pods").expect("read").len(), 2);
    drop(store);
    assert_eq!(raw_state(&dir), (SCHEMA_VERSION, 1));
    // A second open has nothing to migrate and changes nothing.
    let store = open(
        &dir,
        Some(|step| panic!("migration step {step} on a current store")),
    );
    assert_eq!(store.networks().expect("read").len(), 1);
}

/// Run as a child process by the test below: opens the store, aborting at the step named.
#[test]
fn child_opens_the_store_and_aborts_at_a_migration_step() {
    let (Ok(step), Ok(dir)) = (std::env::var(ABORT_AT), std::env::var(STORE_DIR)) else {
        return;
    };
    fn abort_at(name: &'static str) {
        if std::env::var(ABORT_AT).as_deref() == Ok(name) {
            std::process::abort();
        }
    }
    let mut config = StoreConfig::new(dir.clone());
    config.on_migration_step = Some(abort_at);
    let _ = Store::open(&config);
    panic!("the child did not abort at {step}");
}

#[test]
fn a_migration_killed_at_any_step_leaves_the_old_store_or_the_new_never_a_mix() {
    for step in migrate::STEPS {
        let dir = schema_1_store();
        let status = Command::new(std::env::current_exe().expect("test binary"))
            .args([
                "--exact",
                "child_opens_the_store_and_aborts_at_a_migration_step",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(ABORT_AT, step)
            .env(STORE_DIR, dir.path().join("state"))
            .status()
            .expect("run the child");
        assert!(
            !status.success(),
            "{step}: the child did not abort: {status}"
        );
        let state = raw_state(&dir);
        assert!(
            state == (1, 0) || state == (SCHEMA_VERSION, 1),
            "{step}: schema {} with {} network record(s): a mix",
            state.0,
            state.1
        );
        // The next open finishes (or redoes) the migration.
        let store = open(&dir, None);
        let pods = store.network("pods").expect("read").expect("migrated");
        assert_eq!(pods.subnets.len(), 2, "{step}");
        assert_eq!(store.all_attachments().expect("read").decoded.len(), 3);
        drop(store);
        assert_eq!(raw_state(&dir), (SCHEMA_VERSION, 1), "{step}");
    }
}

#[test]
fn network_records_and_the_cluster_cidrs_are_kept_replaced_and_removed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = open(&dir, None);
    let mut rec = knid_store::NetworkRecord::new();
    rec.name = "pods".to_owned();
    rec.subnets = vec!["10.244.3.0/24".to_owned()];
    rec.gateways = vec!["10.244.3.1".to_owned()];
    rec.source = "node".to_owned();
    store.put_network(&rec).expect("put");
    rec.subnets = vec!["10.244.4.0/24".to_owned()];
    store.put_network(&rec).expect("replace");
    drop(store);
    let store = open(&dir, None);
    assert_eq!(
        store.network("pods").expect("read").expect("kept").subnets,
        ["10.244.4.0/24"]
    );
    store.remove_network("pods").expect("remove");
    store.remove_network("never").expect("unknown is fine");
    assert!(store.networks().expect("read").is_empty());
    rec.name = "a/b".to_owned();
    assert!(
        store.put_network(&rec).is_err(),
        "a name with '/' is refused"
    );
}
