use knid_store::{Batch, StoreConfig};

use super::*;

fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::open(&StoreConfig::new(dir.path().join("store"))).expect("open");
    (dir, store)
}

fn attachment(sandbox_id: &str, ifname: &str, mac: &str) -> AttachmentRecord {
    AttachmentRecord {
        sandbox_id: sandbox_id.into(),
        ifname: ifname.into(),
        network: "default".into(),
        kind: "veth".into(),
        state: protobuf::EnumOrUnknown::new(knid_store::AttachmentState::ATTACHED),
        mac: mac.into(),
        host_ifname: crate::names::host_ifname(sandbox_id, ifname),
        ..Default::default()
    }
}

fn sandbox(id: &str) -> SandboxRecord {
    SandboxRecord {
        id: id.into(),
        ..Default::default()
    }
}

#[test]
fn a_record_that_breaks_a_rule_is_read_apart_with_its_key_and_field() {
    let (_dir, store) = store();
    let mut batch = Batch::new();
    batch
        .put_attachment(attachment("a", "eth0", "02:00:00:00:00:01"))
        .put_attachment(attachment("b", "eth0", ""))
        .put_attachment(attachment("c", "eth0", "02:00:00:00:00:03"));
    store.commit(&batch).expect("commit");
    let read = all_attachments(&store).expect("read");
    let usable: Vec<&str> = read.usable.iter().map(|r| r.sandbox_id.as_str()).collect();
    assert_eq!(usable, ["a", "c"]);
    assert_eq!(read.corrupt.len(), 1);
    let bad = &read.corrupt[0];
    assert_eq!(
        (bad.sandbox_id.as_str(), bad.ifname.as_str()),
        ("b", "eth0")
    );
    assert!(bad.record.is_some());
    assert!(bad.deletable());
    assert!(
        bad.error()
            .to_string()
            .starts_with("corrupt record b/eth0: invalid mac \"\""),
        "{}",
        bad.error()
    );
    assert_eq!(
        attachments(&store, "b").expect("read").corrupt,
        read.corrupt
    );
    assert!(attachments(&store, "a").expect("read").corrupt.is_empty());
}

#[test]
fn a_sandbox_record_that_breaks_a_rule_fails_alone() {
    let (_dir, store) = store();
    let mut bad = sandbox("b");
    bad.dns.mut_or_insert_default().servers = vec!["not-an-ip".into()];
    let mut batch = Batch::new();
    batch.put_sandbox(sandbox("a")).put_sandbox(bad);
    store.commit(&batch).expect("commit");
    let read = sandboxes(&store).expect("read");
    assert_eq!(read.usable, vec![sandbox("a")]);
    assert_eq!(read.corrupt.len(), 1);
    assert_eq!(read.corrupt[0].id, "b");
    assert!(read.corrupt[0].detail.contains("dns server"));
    assert!(matches!(
        self::sandbox_of(&store, "b"),
        Err(Error::Corrupt { key, .. }) if key == "b"
    ));
    assert_eq!(
        self::sandbox_of(&store, "a").expect("a"),
        Some(sandbox("a"))
    );
    assert_eq!(self::sandbox_of(&store, "x").expect("x"), None);
}

fn sandbox_of(store: &Store, id: &str) -> Result<Option<SandboxRecord>> {
    super::sandbox(store, id)
}

/// Writes `value` under `key` of `tree` in the database of a store just dropped (its lock
/// retried while sled's threads still hold it).
fn write_raw(dir: &tempfile::TempDir, tree: &str, key: &str, value: &[u8]) {
    let path = dir.path().join("store");
    let db = testkit::wait::retry_busy_lock(|| sled::open(&path))
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    db.open_tree(tree)
        .expect("tree")
        .insert(key, value)
        .expect("insert");
    db.flush().expect("flush");
}

// Field 1, wire type 2, length 200: runs past the end.
const TRUNCATED: &[u8] = &[0x0a, 0xc8, 0x01, b'x'];

#[test]
fn an_undecodable_record_is_named_by_its_key_and_never_fails_the_others() {
    let (dir, store) = store();
    let mut batch = Batch::new();
    batch
        .put_sandbox(sandbox("a"))
        .put_attachment(attachment("a", "eth0", "02:00:00:00:00:01"));
    store.commit(&batch).expect("commit");
    drop(store);
    write_raw(&dir, "attachments", "b/eth0", TRUNCATED);
    write_raw(&dir, "sandboxes", "b", TRUNCATED);
    let store =
        testkit::wait::retry_busy_lock(|| Store::open(&StoreConfig::new(dir.path().join("store"))))
            .expect("reopen");

    let read = all_attachments(&store).expect("read");
    assert_eq!(read.usable.len(), 1);
    let bad = &read.corrupt[0];
    assert_eq!(
        (bad.sandbox_id.as_str(), bad.ifname.as_str()),
        ("b", "eth0")
    );
    assert_eq!(bad.record, None);
    assert!(
        bad.detail.starts_with("does not decode: "),
        "{}",
        bad.detail
    );
    assert_eq!(bad.owner(), Owner::new("b", "eth0"));

    let read = sandboxes(&store).expect("read");
    assert_eq!(read.usable, vec![sandbox("a")]);
    assert_eq!(read.corrupt[0].id, "b");
    assert_eq!(read.corrupt[0].record, None);
    let err = super::sandbox(&store, "b").expect_err("corrupt");
    assert!(
        err.to_string()
            .starts_with("corrupt record b: does not decode: "),
        "{err}"
    );
}
