//! `Store::apply_in_order`: one key at a time, in order, no transaction — what an attach's
//! intent is written with. Against a real sled database in a temporary directory.

use std::net::IpAddr;

use knid_store::{AttachmentRecord, Batch, Error, Owner, SandboxRecord, Store, StoreConfig};
use tempfile::TempDir;

mod common;

fn open(dir: &TempDir) -> Store {
    Store::open(&StoreConfig::new(dir.path().join("state"))).expect("open store")
}

fn ip(s: &str) -> IpAddr {
    s.parse().expect("ip address")
}

fn sandbox(id: &str) -> SandboxRecord {
    SandboxRecord {
        id: id.to_owned(),
        netns_path: format!("/var/run/netns/{id}"),
        ..Default::default()
    }
}

fn attachment(sandbox_id: &str) -> AttachmentRecord {
    AttachmentRecord {
        sandbox_id: sandbox_id.to_owned(),
        ifname: "eth0".to_owned(),
        network: "podnet".to_owned(),
        host_ifname: format!("kn{sandbox_id}"),
        ..Default::default()
    }
}

fn owner(sandbox_id: &str) -> Owner {
    Owner::new(sandbox_id.to_owned(), "eth0")
}

/// An attach's intent: its records, then the addresses they hold, then the cursors.
fn intent(id: &str, addrs: &[&str]) -> Batch<'static> {
    let mut batch = Batch::new();
    batch
        .put_sandbox(sandbox(id))
        .put_attachment(attachment(id));
    for a in addrs {
        batch.reserve("podnet", ip(a), owner(id));
    }
    for a in addrs {
        batch.set_cursor("podnet", ip(a));
    }
    batch
}

fn held(store: &Store) -> Vec<(IpAddr, String)> {
    let mut held: Vec<_> = store
        .reservations("podnet")
        .expect("reservations")
        .into_iter()
        .map(|r| (r.addr, r.owner.sandbox_id))
        .collect();
    held.sort();
    held
}

#[test]
fn every_write_lands_again_is_a_no_op_and_survives_a_reopen() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = open(&dir);
    let batch = intent("s1", &["10.88.0.5", "fd00:88::5"]);
    store.apply_in_order(&batch).expect("apply in order");
    // The same reservations again, by the same owner: an attach retried.
    store.apply_in_order(&batch).expect("apply in order again");
    store.flush().expect("flush");
    drop(store);

    let store = common::reopen(&dir).expect("reopen the store");
    assert_eq!(store.sandbox("s1").unwrap(), Some(sandbox("s1")));
    assert_eq!(
        store.attachment("s1", "eth0").unwrap(),
        Some(attachment("s1"))
    );
    assert_eq!(
        held(&store),
        vec![
            (ip("10.88.0.5"), "s1".to_owned()),
            (ip("fd00:88::5"), "s1".to_owned())
        ]
    );
    assert_eq!(
        store.cursor("podnet", false).unwrap(),
        Some(ip("10.88.0.5"))
    );
    assert_eq!(
        store.cursor("podnet", true).unwrap(),
        Some(ip("fd00:88::5"))
    );
}

#[test]
fn an_address_another_holds_stops_the_run_after_the_writes_before_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = open(&dir);
    store
        .commit(Batch::new().reserve("podnet", ip("10.88.0.5"), owner("holder")))
        .expect("the holder's reservation");

    let err = store
        .apply_in_order(&intent("s2", &["10.88.0.6", "10.88.0.5"]))
        .expect_err("the second address is held");
    match err {
        Error::Conflict {
            network,
            addr,
            holder,
        } => {
            assert_eq!(network, "podnet");
            assert_eq!(addr, ip("10.88.0.5"));
            assert_eq!(holder, owner("holder"));
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    // What came before the held address is applied, what came after it is not.
    assert_eq!(store.sandbox("s2").unwrap(), Some(sandbox("s2")));
    assert_eq!(
        store.attachment("s2", "eth0").unwrap(),
        Some(attachment("s2"))
    );
    assert_eq!(
        held(&store),
        vec![
            (ip("10.88.0.5"), "holder".to_owned()),
            (ip("10.88.0.6"), "s2".to_owned())
        ]
    );
    assert_eq!(store.cursor("podnet", false).unwrap(), None);
}

#[test]
fn writes_that_read_other_keys_are_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = open(&dir);
    store
        .commit(Batch::new().reserve("podnet", ip("10.88.0.7"), owner("s3")))
        .expect("a reservation to release");
    let mut release = Batch::new();
    release
        .put_sandbox(sandbox("s3"))
        .release("podnet", ip("10.88.0.7"));
    let mut forget = Batch::new();
    forget
        .put_sandbox(sandbox("s3"))
        .forget_attachment(attachment("s3"), vec![ip("10.88.0.7")]);
    for (batch, op) in [(release, "release"), (forget, "forget attachment")] {
        match store.apply_in_order(&batch) {
            Err(Error::NeedsTransaction { op: refused }) => assert_eq!(refused, op),
            other => panic!("expected {op} refused, got {other:?}"),
        }
        assert_eq!(store.sandbox("s3").unwrap(), None, "nothing written");
    }
    assert_eq!(held(&store), vec![(ip("10.88.0.7"), "s3".to_owned())]);
}
