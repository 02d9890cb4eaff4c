//! End-to-end tests of the store against a real sled database in a temporary directory.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use knid_store::{
    AttachmentRecord, AttachmentState, Batch, DnsRecord, Error, ExtensionRecord,
    InterfaceSpecRecord, IpRecord, NetnsRecord, Owner, PodRecord, PortMappingRecord, Reservation,
    RouteRecord, SandboxRecord, Store, StoreConfig, SCHEMA_VERSION,
};
use tempfile::TempDir;

mod common;
use common::{open_raw, reopen};

fn open_temp() -> (TempDir, Store) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::open(&StoreConfig::new(dir.path().join("state"))).expect("open store");
    (dir, store)
}

fn ip(s: &str) -> IpAddr {
    s.parse().expect("ip address")
}

fn sandbox(id: &str) -> SandboxRecord {
    SandboxRecord {
        id: id.to_owned(),
        netns_path: format!("/var/run/netns/{id}"),
        netns_dev: 4,
        netns_ino: 4026532281,
        generation: 7,
        pod: Some(PodRecord {
            name: "web-0".to_owned(),
            namespace: "default".to_owned(),
            uid: "0b5c-77".to_owned(),
            ..Default::default()
        })
        .into(),
        dns: Some(DnsRecord {
            servers: vec!["10.96.0.10".to_owned()],
            searches: vec![
                "default.svc.cluster.local".to_owned(),
                "svc.cluster.local".to_owned(),
            ],
            options: vec!["ndots:5".to_owned()],
            domain: "cluster.local".to_owned(),
            ..Default::default()
        })
        .into(),
        port_mappings: vec![PortMappingRecord {
            host_port: 8080,
            container_port: 80,
            protocol: "tcp".to_owned(),
            host_ip: "0.0.0.0".to_owned(),
            ..Default::default()
        }],
        labels: HashMap::from([("app".to_owned(), "web".to_owned())]),
        annotations: HashMap::from([("k8s.v1.cni.cncf.io/networks".to_owned(), "[]".to_owned())]),
        created_at_ms: 1_700_000_000_000,
        updated_at_ms: 1_700_000_000_500,
        ..Default::default()
    }
}

fn attachment(sandbox_id: &str, ifname: &str) -> AttachmentRecord {
    AttachmentRecord {
        sandbox_id: sandbox_id.to_owned(),
        ifname: ifname.to_owned(),
        network: "podnet".to_owned(),
        kind: "bridge".to_owned(),
        state: AttachmentState::ATTACHED.into(),
        mac: "02:42:0a:58:00:05".to_owned(),
        mtu: 1500,
        host_ifname: "kn0123456789".to_owned(),
        ips: vec![IpRecord {
            address: "10.88.0.5/16".to_owned(),
            gateway: "10.88.0.1".to_owned(),
            ..Default::default()
        }],
        routes: vec![RouteRecord {
            dst: "0.0.0.0/0".to_owned(),
            gateway: "10.88.0.1".to_owned(),
            mtu: 1400,
            scope: "universe".to_owned(),
            table: 254,
            ..Default::default()
        }],
        spec: Some(InterfaceSpecRecord {
            network: "podnet".to_owned(),
            kind: "bridge".to_owned(),
            mac: String::new(),
            mtu: 1500,
            static_ips: vec!["10.88.0.5".to_owned()],
            ..Default::default()
        })
        .into(),
        created_at_ms: 1,
        updated_at_ms: 2,
        ..Default::default()
    }
}

fn owner(sandbox_id: &str) -> Owner {
    Owner::new(sandbox_id, "eth0")
}

fn commit(store: &Store, build: impl FnOnce(&mut Batch)) -> Result<(), Error> {
    let mut batch = Batch::new();
    build(&mut batch);
    store.commit(&batch).map(drop)
}

#[test]
fn store_is_send_and_sync() {
    fn shareable<T: Send + Sync>() {}
    shareable::<Store>();
}

#[test]
fn sandbox_record_round_trips_with_every_field() {
    let (_dir, store) = open_temp();
    let rec = sandbox("s1");
    commit(&store, |b| {
        b.put_sandbox(rec.clone());
    })
    .unwrap();
    assert_eq!(store.sandbox("s1").unwrap(), Some(rec.clone()));
    assert_eq!(store.sandboxes().unwrap().decoded, vec![rec]);
    assert_eq!(store.sandbox("s2").unwrap(), None);
}

#[test]
fn attachment_record_round_trips_with_every_field() {
    let (_dir, store) = open_temp();
    let rec = attachment("s1", "eth0");
    commit(&store, |b| {
        b.put_attachment(rec.clone());
    })
    .unwrap();
    assert_eq!(store.attachment("s1", "eth0").unwrap(), Some(rec.clone()));
    assert_eq!(store.attachments("s1").unwrap().decoded, vec![rec.clone()]);
    assert_eq!(store.all_attachments().unwrap().decoded, vec![rec]);
    assert_eq!(store.attachment("s1", "eth1").unwrap(), None);
}

#[test]
fn reservation_round_trips_with_its_owner() {
    let (_dir, store) = open_temp();
    commit(&store, |b| {
        b.reserve("podnet", ip("fd00::5"), owner("s1")).reserve(
            "podnet",
            ip("10.88.0.5"),
            owner("s1"),
        );
    })
    .unwrap();
    let want = |addr: &str| Reservation {
        network: "podnet".to_owned(),
        addr: ip(addr),
        owner: owner("s1"),
    };
    assert_eq!(
        store.reservations("podnet").unwrap(),
        vec![want("10.88.0.5"), want("fd00::5")]
    );
    assert_eq!(store.reservations("othernet").unwrap(), vec![]);
    let mut owners = store.reservation_owners("podnet").unwrap();
    owners.sort_by_key(|(addr, _)| *addr);
    assert_eq!(
        owners,
        vec![(ip("10.88.0.5"), owner("s1")), (ip("fd00::5"), owner("s1"))]
    );
    assert_eq!(store.reservation_owners("othernet").unwrap(), vec![]);
    let mut streamed: Vec<Reservation> = store
        .each_reservation("podnet")
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    streamed.sort_by_key(|r| r.addr);
    assert_eq!(streamed, vec![want("10.88.0.5"), want("fd00::5")]);
    assert_eq!(store.each_reservation("othernet").unwrap().count(), 0);
}

#[test]
fn put_replaces_and_delete_removes_records() {
    let (_dir, store) = open_temp();
    commit(&store, |b| {
        b.put_sandbox(sandbox("s1"))
            .put_attachment(attachment("s1", "eth0"));
    })
    .unwrap();
    let mut updated = attachment("s1", "eth0");
    updated.state = AttachmentState::DETACHING.into();
    commit(&store, |b| {
        b.put_attachment(updated.clone());
    })
    .unwrap();
    assert_eq!(store.attachment("s1", "eth0").unwrap(), Some(updated));

    commit(&store, |b| {
        b.delete_attachment("s1", "eth0").delete_sandbox("s1");
    })
    .unwrap();
    assert_eq!(store.sandbox("s1").unwrap(), None);
    assert_eq!(store.all_attachments().unwrap().decoded, vec![]);
}

#[test]
fn a_batch_within_one_tree_applies_its_puts_and_removes_in_order_and_survives_a_reopen() {
    let (dir, store) = open_temp();
    commit(&store, |b| {
        b.put_attachment(attachment("s1", "eth0"))
            .put_attachment(attachment("s1", "eth1"));
    })
    .unwrap();
    let mut marked = attachment("s1", "eth0");
    marked.state = AttachmentState::PROVISIONING.into();
    // One tree, no conditions: a plain sled batch. The later operation on a key wins.
    let committed = store
        .apply(
            Batch::new()
                .put_attachment(attachment("s1", "eth2"))
                .delete_attachment("s1", "eth2")
                .delete_attachment("s1", "eth1")
                .put_attachment(marked.clone()),
        )
        .unwrap();
    assert!(committed.applied.is_empty());
    store.flush().unwrap();
    drop(store);
    let store = reopen(&dir).unwrap();
    assert_eq!(store.attachments("s1").unwrap().decoded, vec![marked]);
}

#[test]
fn only_a_lone_flush_soon_starts_a_flush_at_once_and_every_one_is_durable_once_waited_for() {
    let (dir, store) = open_temp();
    let flushes_reach = |n: u64| {
        let started = std::time::Instant::now();
        while store.flush_count() < n {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "flush {n} did not come"
            );
            thread::sleep(Duration::from_millis(2));
        }
    };
    let base = store.flush_count();
    store
        .apply(Batch::new().put_sandbox(sandbox("s1")))
        .unwrap();
    // Alone: the flusher makes it durable without a wait.
    let first = store.flush_soon();
    flushes_reach(base + 1);
    // While the first is not waited for, another is left to its own wait (or the first's).
    store
        .apply(Batch::new().put_sandbox(sandbox("s2")))
        .unwrap();
    let second = store.flush_soon();
    thread::sleep(Duration::from_millis(200));
    assert_eq!(
        store.flush_count(),
        base + 1,
        "a flush started for a request made beside an outstanding one"
    );
    second.wait().unwrap();
    assert_eq!(store.flush_count(), base + 2, "the wait flushed");
    first.wait().unwrap();
    assert_eq!(store.flush_count(), base + 2, "the first was covered");
    // Both waited for: alone again, the next starts its flush at once.
    store
        .apply(Batch::new().put_sandbox(sandbox("s3")))
        .unwrap();
    let third = store.flush_soon();
    flushes_reach(base + 3);
    // Given up without a wait, a request stops counting too.
    drop(third);
    store
        .apply(Batch::new().put_sandbox(sandbox("s4")))
        .unwrap();
    let fourth = store.flush_soon();
    flushes_reach(base + 4);
    fourth.wait().unwrap();
    drop(store);
    let store = reopen(&dir).unwrap();
    assert_eq!(store.sandboxes().unwrap().len(), 4);
}

#[test]
fn flush_soon_makes_applied_changes_durable_in_the_background_and_shares_flushes() {
    let (dir, store) = open_temp();
    let store = Arc::new(store);
    store
        .apply(Batch::new().put_sandbox(sandbox("s1")))
        .unwrap();
    let before = store.flush_count();
    let durable = store.flush_soon();
    // The caller goes on meanwhile; then waits.
    durable.wait().unwrap();
    assert!(store.flush_count() > before, "a flush ran");
    // Many at once, each waiting for its own changes: a flush ran after the last request.
    let before = store.flush_count();
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let store = Arc::clone(&store);
            thread::spawn(move || {
                for k in 0..10 {
                    store
                        .apply(Batch::new().put_sandbox(sandbox(&format!("t{i}-{k}"))))
                        .unwrap();
                    store.flush_soon().wait().unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert!(
        store.flush_count() > before,
        "no flush covered the requests"
    );
    drop(Arc::try_unwrap(store).expect("the only handle"));
    let store = reopen(&dir).unwrap();
    assert_eq!(store.sandboxes().unwrap().len(), 81);
}

#[test]
fn batch_with_a_conflict_applies_nothing() {
    let (_dir, store) = open_temp();
    commit(&store, |b| {
        b.reserve("podnet", ip("10.88.0.5"), owner("holder"));
    })
    .unwrap();

    let err = commit(&store, |b| {
        b.put_sandbox(sandbox("s2"))
            .put_attachment(attachment("s2", "eth0"))
            .reserve("podnet", ip("10.88.0.6"), owner("s2"))
            .reserve("othernet", ip("10.99.0.6"), owner("s2"))
            .set_cursor("podnet", ip("10.88.0.6"))
            .reserve("podnet", ip("10.88.0.5"), owner("s2"));
    })
    .unwrap_err();

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
    assert_eq!(store.sandbox("s2").unwrap(), None);
    assert_eq!(store.all_attachments().unwrap().decoded, vec![]);
    let held: Vec<IpAddr> = store
        .reservations("podnet")
        .unwrap()
        .iter()
        .map(|r| r.addr)
        .collect();
    assert_eq!(held, vec![ip("10.88.0.5")]);
    assert_eq!(store.reservations("othernet").unwrap(), vec![]);
    assert_eq!(store.cursor("podnet", false).unwrap(), None);
}

#[test]
fn reserving_twice_for_the_same_owner_is_a_no_op() {
    let (_dir, store) = open_temp();
    for _ in 0..2 {
        commit(&store, |b| {
            b.reserve("podnet", ip("10.88.0.5"), owner("s1"));
        })
        .unwrap();
    }
    // Within one batch too.
    commit(&store, |b| {
        b.reserve("podnet", ip("10.88.0.5"), owner("s1")).reserve(
            "podnet",
            ip("10.88.0.5"),
            owner("s1"),
        );
    })
    .unwrap();
    assert_eq!(store.reservations("podnet").unwrap().len(), 1);
}

#[test]
fn same_sandbox_other_interface_is_another_owner() {
    let (_dir, store) = open_temp();
    commit(&store, |b| {
        b.reserve("podnet", ip("10.88.0.5"), Owner::new("s1", "eth0"));
    })
    .unwrap();
    let err = commit(&store, |b| {
        b.reserve("podnet", ip("10.88.0.5"), Owner::new("s1", "net1"));
    })
    .unwrap_err();
    assert!(matches!(err, Error::Conflict { .. }), "{err:?}");
}

#[test]
fn release_frees_the_address_for_another_owner() {
    let (_dir, store) = open_temp();
    commit(&store, |b| {
        b.reserve("podnet", ip("10.88.0.5"), owner("s1"));
    })
    .unwrap();
    commit(&store, |b| {
        b.release("podnet", ip("10.88.0.5"))
            .release("podnet", ip("10.88.0.77"));
    })
    .unwrap();
    assert_eq!(store.reservations("podnet").unwrap(), vec![]);
    commit(&store, |b| {
        b.reserve("podnet", ip("10.88.0.5"), owner("s2"));
    })
    .unwrap();
    assert_eq!(store.reservations("podnet").unwrap()[0].owner, owner("s2"));
}

#[test]
fn release_then_reserve_in_one_batch_hands_the_address_over() {
    let (_dir, store) = open_temp();
    commit(&store, |b| {
        b.reserve("podnet", ip("10.88.0.5"), owner("s1"));
    })
    .unwrap();
    commit(&store, |b| {
        b.release("podnet", ip("10.88.0.5"))
            .reserve("podnet", ip("10.88.0.5"), owner("s2"));
    })
    .unwrap();
    assert_eq!(store.reservations("podnet").unwrap()[0].owner, owner("s2"));
}

#[test]
fn release_held_by_leaves_another_owners_address_alone() {
    let (_dir, store) = open_temp();
    commit(&store, |b| {
        b.reserve("podnet", ip("10.88.0.5"), owner("s2")).reserve(
            "podnet",
            ip("10.88.0.6"),
            owner("s1"),
        );
    })
    .unwrap();
    commit(&store, |b| {
        b.release_held_by("podnet", ip("10.88.0.5"), owner("s1"))
            .release_held_by("podnet", ip("10.88.0.6"), owner("s1"));
    })
    .unwrap();
    let left = store.reservations("podnet").unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(
        (left[0].addr, &left[0].owner),
        (ip("10.88.0.5"), &owner("s2"))
    );
}

#[test]
fn cursor_is_kept_per_network_and_family() {
    let (_dir, store) = open_temp();
    assert_eq!(store.cursor("podnet", false).unwrap(), None);
    commit(&store, |b| {
        b.set_cursor("podnet", ip("10.88.0.9"))
            .set_cursor("podnet", ip("fd00::9"))
            .set_cursor("othernet", ip("10.99.0.1"));
    })
    .unwrap();
    commit(&store, |b| {
        b.set_cursor("podnet", ip("10.88.0.10"));
    })
    .unwrap();
    assert_eq!(
        store.cursor("podnet", false).unwrap(),
        Some(ip("10.88.0.10"))
    );
    assert_eq!(store.cursor("podnet", true).unwrap(), Some(ip("fd00::9")));
    assert_eq!(
        store.cursor("othernet", false).unwrap(),
        Some(ip("10.99.0.1"))
    );
    assert_eq!(store.cursor("othernet", true).unwrap(), None);
}

#[test]
fn attachments_of_a_sandbox_exclude_a_sandbox_it_is_a_prefix_of() {
    let (_dir, store) = open_temp();
    commit(&store, |b| {
        b.put_attachment(attachment("a", "eth0"))
            .put_attachment(attachment("a", "net1"))
            .put_attachment(attachment("ab", "eth0"));
    })
    .unwrap();
    let names = |id: &str| -> Vec<(String, String)> {
        store
            .attachments(id)
            .unwrap()
            .decoded
            .into_iter()
            .map(|a| (a.sandbox_id, a.ifname))
            .collect()
    };
    assert_eq!(
        names("a"),
        vec![
            ("a".to_owned(), "eth0".to_owned()),
            ("a".to_owned(), "net1".to_owned())
        ]
    );
    assert_eq!(names("ab"), vec![("ab".to_owned(), "eth0".to_owned())]);
    assert_eq!(store.all_attachments().unwrap().len(), 3);
    let streamed: Vec<(String, String)> = store
        .each_attachment()
        .map(|read| {
            let rec = read.unwrap().unwrap();
            (rec.sandbox_id, rec.ifname)
        })
        .collect();
    assert_eq!(
        streamed,
        [("a", "eth0"), ("a", "net1"), ("ab", "eth0")].map(|(s, i)| (s.to_owned(), i.to_owned()))
    );
    assert!(store.has_attachment("a", "net1").unwrap());
    assert!(!store.has_attachment("a", "net2").unwrap());
    assert!(!store.has_attachment("b", "eth0").unwrap());
    let ids: Vec<String> = store
        .each_sandbox()
        .map(|r| r.unwrap().unwrap().id)
        .collect();
    assert!(ids.is_empty(), "{ids:?}");
}

#[test]
fn sandboxes_are_sorted_by_id() {
    let (_dir, store) = open_temp();
    commit(&store, |b| {
        b.put_sandbox(sandbox("c"))
            .put_sandbox(sandbox("a"))
            .put_sandbox(sandbox("b"));
    })
    .unwrap();
    let ids: Vec<String> = store
        .sandboxes()
        .unwrap()
        .decoded
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(ids, ["a", "b", "c"]);
}

#[test]
fn networks_with_reservations_lists_only_non_empty_networks() {
    let (_dir, store) = open_temp();
    commit(&store, |b| {
        b.reserve("podnet", ip("10.88.0.5"), owner("s1"))
            .reserve("othernet", ip("10.99.0.5"), owner("s1"))
            .release("thirdnet", ip("10.77.0.5"));
    })
    .unwrap();
    commit(&store, |b| {
        b.release("othernet", ip("10.99.0.5"));
    })
    .unwrap();
    // A read of an unknown network must not create its tree either.
    assert_eq!(store.reservations("fourthnet").unwrap(), vec![]);
    assert_eq!(store.networks_with_reservations().unwrap(), vec!["podnet"]);
}

#[test]
fn ids_that_cannot_be_keys_are_refused_and_nothing_is_applied() {
    let (_dir, store) = open_temp();
    let err = commit(&store, |b| {
        b.put_sandbox(sandbox("ok"))
            .put_attachment(attachment("bad/id", "eth0"));
    })
    .unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidKey {
                what: "sandbox id",
                ..
            }
        ),
        "{err:?}"
    );
    let err = commit(&store, |b| {
        b.reserve("podnet", ip("10.88.0.5"), Owner::new("s1", ""));
    })
    .unwrap_err();
    assert!(
        matches!(err, Error::InvalidKey { what: "ifname", .. }),
        "{err:?}"
    );
    assert_eq!(store.sandbox("ok").unwrap(), None);
    assert_eq!(
        store.networks_with_reservations().unwrap(),
        Vec::<String>::new()
    );
}

#[test]
fn the_store_id_is_made_once_and_kept_across_opens() {
    let (dir, store) = open_temp();
    let id = store.id().to_owned();
    assert_eq!(id.len(), 32, "{id}");
    assert!(id.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
    drop(store);
    assert_eq!(reopen(&dir).unwrap().id(), id);
    let (_other_dir, other) = open_temp();
    assert_ne!(other.id(), id, "two stores share an id");
}

#[test]
fn boot_id_round_trips() {
    let (dir, store) = open_temp();
    assert_eq!(store.boot_id().unwrap(), None);
    store
        .set_boot_id("0f4c5c6e-1b2a-4d39-9d8e-000000000001")
        .unwrap();
    assert_eq!(
        store.boot_id().unwrap().as_deref(),
        Some("0f4c5c6e-1b2a-4d39-9d8e-000000000001")
    );
    drop(store);
    let store = reopen(&dir).unwrap();
    assert_eq!(
        store.boot_id().unwrap().as_deref(),
        Some("0f4c5c6e-1b2a-4d39-9d8e-000000000001")
    );
}

#[test]
fn the_detach_overlap_mark_is_durable_once_recorded_and_gone_once_cleared() {
    let (dir, store) = open_temp();
    assert!(!store.detach_overlap(), "a new store has no mark");
    store.record_detach_overlap().unwrap();
    assert!(store.detach_overlap());
    let flushes = store.flush_count();
    store.record_detach_overlap().unwrap();
    assert_eq!(store.flush_count(), flushes, "recorded once, flushed once");
    drop(store);
    // Durable on return: a store reopened (as after a crash) finds it.
    let store = reopen(&dir).unwrap();
    assert!(store.detach_overlap(), "the mark survives a reopen");
    store.clear_detach_overlap().unwrap();
    assert!(!store.detach_overlap());
    store.flush().unwrap();
    drop(store);
    assert!(!reopen(&dir).unwrap().detach_overlap(), "cleared for good");
}

#[test]
fn reopening_the_store_keeps_everything() {
    let (dir, store) = open_temp();
    commit(&store, |b| {
        b.put_sandbox(sandbox("s1"))
            .put_attachment(attachment("s1", "eth0"))
            .reserve("podnet", ip("10.88.0.5"), owner("s1"))
            .set_cursor("podnet", ip("10.88.0.5"))
            .set_cursor("podnet", ip("fd00::5"));
    })
    .unwrap();
    store.set_boot_id("boot-1").unwrap();
    drop(store);

    let store = reopen(&dir).unwrap();
    assert_eq!(store.sandbox("s1").unwrap(), Some(sandbox("s1")));
    assert_eq!(
        store.attachment("s1", "eth0").unwrap(),
        Some(attachment("s1", "eth0"))
    );
    assert_eq!(store.reservations("podnet").unwrap()[0].owner, owner("s1"));
    assert_eq!(store.networks_with_reservations().unwrap(), vec!["podnet"]);
    assert_eq!(
        store.cursor("podnet", false).unwrap(),
        Some(ip("10.88.0.5"))
    );
    assert_eq!(store.cursor("podnet", true).unwrap(), Some(ip("fd00::5")));
    assert_eq!(store.boot_id().unwrap().as_deref(), Some("boot-1"));
    assert!(store.size_on_disk().unwrap() > 0);
}

#[test]
fn a_newer_schema_is_refused_naming_both_versions_and_left_untouched() {
    let (dir, store) = open_temp();
    commit(&store, |b| {
        b.put_attachment(attachment("s1", "eth0"));
    })
    .expect("commit");
    drop(store);
    {
        let db = open_raw(&dir);
        let meta = db.open_tree("meta").unwrap();
        meta.insert("schema", &(SCHEMA_VERSION + 1).to_be_bytes())
            .unwrap();
        db.flush().unwrap();
    }
    let before = contents(&dir);
    let err = reopen(&dir).expect_err("a newer schema is refused");
    let text = err.to_string();
    match err {
        Error::Schema {
            found,
            supported,
            oldest,
        } => assert_eq!(
            (found, supported, oldest),
            (SCHEMA_VERSION + 1, SCHEMA_VERSION, 1)
        ),
        other => panic!("expected a schema error, got {other:?}"),
    }
    assert!(
        text.contains(&format!("store schema {} ", SCHEMA_VERSION + 1))
            && text.contains(&format!("to {SCHEMA_VERSION}")),
        "{text}"
    );
    // sled rewrites its own snapshot files on every open; what the store holds must not change.
    assert!(
        contents(&dir) == before,
        "the refused store's contents changed"
    );
}

/// A tree's name and its (key, value) entries.
type TreeContents = (Vec<u8>, Vec<(Vec<u8>, Vec<u8>)>);

/// Every tree of the store just dropped, with every key and value.
fn contents(dir: &TempDir) -> Vec<TreeContents> {
    let db = open_raw(dir);
    let mut out = Vec::new();
    for name in db.tree_names() {
        let tree = db.open_tree(&name).expect("open tree");
        let entries = tree
            .iter()
            .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())).expect("read"))
            .collect();
        out.push((name.to_vec(), entries));
    }
    out
}

#[test]
fn an_unreadable_schema_is_reported_as_corrupt() {
    let (dir, store) = open_temp();
    drop(store);
    {
        let db = open_raw(&dir);
        db.open_tree("meta")
            .unwrap()
            .insert("schema", "v1")
            .unwrap();
        db.flush().unwrap();
    }
    assert!(matches!(reopen(&dir), Err(Error::Corrupt { .. })));
}

#[test]
fn attachments_in_place_tells_a_record_at_another_sandboxs_key() {
    let (dir, store) = open_temp();
    commit(&store, |b| {
        b.put_attachment(attachment("s1", "eth0"));
        b.put_attachment(attachment("s2", "eth0"));
    })
    .unwrap();
    let (read, in_place) = store.all_attachments_in_place().unwrap();
    assert_eq!(read.decoded.len(), 2);
    assert!(in_place);
    drop(store);
    {
        // s1's record copied under s3's key: the prefix read of s3 finds a record of s1.
        let db = open_raw(&dir);
        let tree = db.open_tree("attachments").unwrap();
        let value = tree.get("s1/eth0").unwrap().unwrap();
        tree.insert("s3/eth0", value).unwrap();
        db.flush().unwrap();
    }
    let store = reopen(&dir).unwrap();
    let (read, in_place) = store.all_attachments_in_place().unwrap();
    assert_eq!(read.decoded, store.all_attachments().unwrap().decoded);
    assert_eq!(read.decoded.len(), 3);
    assert!(!in_place);
    drop(store);
    {
        // Back in place, then an undecodable value at a key without the separator.
        let db = open_raw(&dir);
        let tree = db.open_tree("attachments").unwrap();
        tree.remove("s3/eth0").unwrap();
        tree.insert("s4", &[0x0a, 0xc8, 0x01, b'x']).unwrap();
        db.flush().unwrap();
    }
    let store = reopen(&dir).unwrap();
    let (read, in_place) = store.all_attachments_in_place().unwrap();
    assert_eq!(read.undecodable.len(), 1);
    assert!(!in_place);
}

#[test]
fn an_undecodable_record_names_its_tree_and_key() {
    let (dir, store) = open_temp();
    drop(store);
    {
        let db = open_raw(&dir);
        // Field 1, wire type 2, length 200: runs past the end.
        db.open_tree("sandboxes")
            .unwrap()
            .insert("s1", &[0x0a, 0xc8, 0x01, b'x'])
            .unwrap();
        db.flush().unwrap();
    }
    let store = reopen(&dir).unwrap();
    let err = store.sandbox("s1").unwrap_err();
    assert!(
        matches!(&err, Error::Decode { what: "sandboxes", key, .. } if key == "s1"),
        "{err:?}"
    );
    // A read of the whole tree names the undecodable record instead of failing.
    let all = store.sandboxes().unwrap();
    assert!(all.decoded.is_empty());
    assert_eq!(all.undecodable.len(), 1);
    assert_eq!(all.undecodable[0].key, "s1");
    assert!(matches!(
        all.complete(),
        Err(Error::Decode {
            what: "sandboxes",
            ..
        })
    ));
}

#[test]
fn a_second_open_while_the_store_is_held_fails_cleanly() {
    let (dir, _store) = open_temp();
    // Not `reopen`, which waits for a lock held for a moment: this one is held for good.
    let err = Store::open(&StoreConfig::new(dir.path().join("state"))).unwrap_err();
    assert!(matches!(err, Error::Open { .. }), "{err:?}");
    let chain = std::error::Error::source(&err)
        .map(ToString::to_string)
        .unwrap_or_default();
    assert!(chain.contains("lock"), "{chain}");
}

#[test]
fn concurrent_commits_all_land_and_share_flushes() {
    const THREADS: usize = 8;
    const COMMITS: usize = 50;
    let (_dir, store) = open_temp();
    let store = Arc::new(store);
    let before = store.flush_count();
    let started = std::time::Instant::now();
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let store = store.clone();
            thread::spawn(move || {
                for i in 0..COMMITS {
                    let id = format!("t{t}-{i}");
                    let addr = IpAddr::from([10, 88, t as u8, i as u8]);
                    let mut rec = attachment(&id, "eth0");
                    rec.state = AttachmentState::PENDING.into();
                    let mut batch = Batch::new();
                    batch
                        .put_attachment(rec)
                        .reserve("podnet", addr, Owner::new(&id, "eth0"))
                        .set_cursor("podnet", addr);
                    store.commit(&batch).unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let commits = (THREADS * COMMITS) as u64;
    let flushes = store.flush_count() - before;
    eprintln!(
        "group commit: {commits} commits, {flushes} flushes in {:?}",
        started.elapsed()
    );
    assert_eq!(
        store.reservations("podnet").unwrap().len(),
        THREADS * COMMITS
    );
    assert_eq!(store.all_attachments().unwrap().len(), THREADS * COMMITS);
    assert!(
        flushes > 0 && flushes < commits,
        "{flushes} flushes for {commits} commits"
    );
}

#[test]
fn an_empty_batch_changes_nothing_and_does_not_flush() {
    let (_dir, store) = open_temp();
    let before = store.flush_count();
    let batch = Batch::new();
    assert!(batch.is_empty());
    store.commit(&batch).unwrap();
    assert_eq!(store.flush_count(), before);
    commit(&store, |b| {
        b.delete_sandbox("s1");
    })
    .unwrap();
    assert_eq!(store.flush_count(), before + 1);
}

/// Attachment `ifname` of `sid` holding 10.88.0.5 in podnet, with its record and reservation.
fn attach_with_reservation(store: &Store, sid: &str) -> AttachmentRecord {
    let rec = attachment(sid, "eth0");
    commit(store, |b| {
        b.put_attachment(rec.clone())
            .reserve("podnet", ip("10.88.0.5"), owner(sid));
    })
    .expect("commit attachment and reservation");
    rec
}

#[test]
fn forget_attachment_applies_only_to_the_exact_record() {
    let (_dir, store) = open_temp();
    let rec = attach_with_reservation(&store, "s1");

    // A newer incarnation of the same key is left alone, reservation included.
    let mut stale = rec.clone();
    stale.created_at_ms = 0;
    let mut batch = Batch::new();
    batch.forget_attachment(stale, vec![ip("10.88.0.5")]);
    assert_eq!(batch.conditionals(), 1);
    assert_eq!(store.commit(&batch).unwrap().applied, vec![false]);
    assert_eq!(store.attachment("s1", "eth0").unwrap(), Some(rec.clone()));
    assert_eq!(store.reservations("podnet").unwrap().len(), 1);

    // The exact record goes with its reservation, and a second try reports that it is gone.
    let mut batch = Batch::new();
    batch.forget_attachment(rec.clone(), vec![ip("10.88.0.5")]);
    assert_eq!(store.commit(&batch).unwrap().applied, vec![true]);
    assert_eq!(store.attachment("s1", "eth0").unwrap(), None);
    assert!(store.reservations("podnet").unwrap().is_empty());
    assert_eq!(store.commit(&batch).unwrap().applied, vec![false]);
}

#[test]
fn forget_attachment_leaves_an_address_handed_to_another_owner() {
    let (_dir, store) = open_temp();
    let rec = attach_with_reservation(&store, "s1");
    commit(&store, |b| {
        b.release("podnet", ip("10.88.0.5"))
            .reserve("podnet", ip("10.88.0.5"), owner("s2"));
    })
    .unwrap();
    let mut batch = Batch::new();
    batch.forget_attachment(rec, vec![ip("10.88.0.5")]);
    assert_eq!(store.commit(&batch).unwrap().applied, vec![true]);
    let left = store.reservations("podnet").unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].owner, owner("s2"));
}

#[test]
fn release_if_unowned_spares_reservations_whose_owner_has_a_record() {
    let (_dir, store) = open_temp();
    attach_with_reservation(&store, "s1");
    commit(&store, |b| {
        b.reserve("podnet", ip("10.88.0.9"), owner("ghost"));
    })
    .unwrap();
    let mut batch = Batch::new();
    batch
        .release_if_unowned("podnet", ip("10.88.0.5"), owner("s1"))
        .release_if_unowned("podnet", ip("10.88.0.9"), owner("ghost"))
        // Held by ghost, not by s3: not this owner's to release.
        .release_if_unowned("podnet", ip("10.88.0.9"), owner("s3"));
    let committed = store.commit(&batch).unwrap();
    assert_eq!(committed.applied, vec![false, true, false]);
    let left: Vec<IpAddr> = store
        .reservations("podnet")
        .unwrap()
        .into_iter()
        .map(|r| r.addr)
        .collect();
    assert_eq!(left, vec![ip("10.88.0.5")]);
}

#[test]
fn evaluate_reports_what_a_commit_would_and_writes_nothing() {
    let (_dir, store) = open_temp();
    attach_with_reservation(&store, "s1");
    commit(&store, |b| {
        b.reserve("podnet", ip("10.88.0.9"), owner("ghost"));
    })
    .unwrap();
    let mut batch = Batch::new();
    batch
        .release_if_unowned("podnet", ip("10.88.0.5"), owner("s1"))
        .release_if_unowned("podnet", ip("10.88.0.9"), owner("ghost"));
    let before = store.flush_count();
    assert_eq!(store.evaluate(&batch).unwrap().applied, vec![false, true]);
    assert_eq!(store.flush_count(), before, "evaluate must not flush");
    assert_eq!(
        store.reservations("podnet").unwrap().len(),
        2,
        "nothing released"
    );
    // The commit it predicted.
    assert_eq!(store.commit(&batch).unwrap().applied, vec![false, true]);
    assert_eq!(store.reservations("podnet").unwrap().len(), 1);
}

#[test]
fn apply_is_visible_at_once_and_durable_after_the_next_flush() {
    let (dir, store) = open_temp();
    let before = store.flush_count();
    let mut rec = attachment("s1", "eth0");
    rec.state = AttachmentState::PROVISIONING.into();
    let mut batch = Batch::new();
    batch.put_attachment(rec.clone());
    store.apply(&batch).unwrap();
    assert_eq!(store.flush_count(), before, "apply must not flush");
    assert_eq!(store.attachment("s1", "eth0").unwrap(), Some(rec.clone()));
    store.flush().unwrap();
    drop(store);
    let store = reopen(&dir).unwrap();
    assert_eq!(store.attachment("s1", "eth0").unwrap(), Some(rec));
    // One key removed (applied as a plain remove, not a sled batch) alike.
    let mut batch = Batch::new();
    batch.delete_attachment("s1", "eth0");
    store.apply(&batch).unwrap();
    assert_eq!(store.attachment("s1", "eth0").unwrap(), None);
    store.flush().unwrap();
    drop(store);
    let store = reopen(&dir).unwrap();
    assert_eq!(store.attachment("s1", "eth0").unwrap(), None);
}

#[test]
fn netns_and_extension_records_survive_a_reopen_and_delete_cleanly() {
    let (dir, store) = open_temp();
    let netns = NetnsRecord {
        owner: "kni-0d5c".into(),
        path: "/run/netns/knid-0d5c".into(),
        dev: 4,
        ino: 4026532000,
        sandbox_id: "pod-a".into(),
        created_at_ms: 17,
        ..Default::default()
    };
    let ext = ExtensionRecord {
        name: "mesh".into(),
        socket_path: "/run/mesh.sock".into(),
        phases: vec!["post-attach".into(), "pre-detach".into()],
        required: true,
        timeout_ms: 500,
        order: -3,
        registered_at_ms: 9,
        ..Default::default()
    };
    commit(&store, |b| {
        b.put_netns(netns.clone()).put_extension(ext.clone());
    })
    .expect("commit");
    drop(store);
    let store = reopen(&dir).expect("reopen");
    assert_eq!(store.netns("kni-0d5c").expect("read"), Some(netns.clone()));
    assert_eq!(store.all_netns().expect("read"), vec![netns]);
    assert_eq!(store.extension("mesh").expect("read"), Some(ext.clone()));
    assert_eq!(store.extensions().expect("read"), vec![ext]);
    commit(&store, |b| {
        b.delete_netns("kni-0d5c").delete_extension("mesh");
    })
    .expect("commit");
    assert!(store.all_netns().expect("read").is_empty());
    assert!(store.extensions().expect("read").is_empty());
    assert!(matches!(
        commit(&store, |b| {
            b.delete_netns("a/b");
        }),
        Err(Error::InvalidKey { .. })
    ));
}

/// Stores s1's attachment and its reservation of 10.88.0.5 as another protobuf encoder might:
/// the same records in other bytes (a field given twice, the owner's fields in reverse order).
fn store_reencoded(dir: &TempDir, rec: &AttachmentRecord) {
    use protobuf::Message;

    let db = open_raw(dir);
    let mut value = rec.write_to_bytes().expect("encode the record");
    let again = AttachmentRecord {
        created_at_ms: rec.created_at_ms,
        ..Default::default()
    };
    value.extend(again.write_to_bytes().expect("encode the field again"));
    let decoded = AttachmentRecord::parse_from_bytes(&value).expect("decode the record");
    assert_eq!(decoded, *rec);
    db.open_tree("attachments")
        .and_then(|tree| tree.insert("s1/eth0", value))
        .expect("store the record");
    // OwnerRecord { sandbox_id = 1: "s1", ifname = 2: "eth0" }, field 2 first.
    let owner_value: &[u8] = &[0x12, 4, b'e', b't', b'h', b'0', 0x0a, 2, b's', b'1'];
    db.open_tree("ipam/podnet")
        .and_then(|tree| tree.insert([10, 88, 0, 5], owner_value))
        .expect("store the reservation");
    db.flush().expect("flush");
}

#[test]
fn records_in_other_bytes_are_still_recognised_as_the_same() {
    let (dir, store) = open_temp();
    let rec = attachment("s1", "eth0");
    drop(store);
    store_reencoded(&dir, &rec);
    let store = reopen(&dir).unwrap();
    let held = store.reservations("podnet").unwrap();
    assert_eq!(held.len(), 1);
    assert_eq!(held[0].owner, owner("s1"));

    // Reserving again for the same owner is a no-op, one key at a time or in a transaction;
    // another owner still conflicts.
    let mut batch = Batch::new();
    batch.reserve("podnet", ip("10.88.0.5"), owner("s1"));
    store.apply_in_order(&batch).unwrap();
    commit(&store, |b| {
        b.reserve("podnet", ip("10.88.0.5"), owner("s1"))
            .set_cursor("podnet", ip("10.88.0.5"));
    })
    .unwrap();
    let err = commit(&store, |b| {
        b.reserve("podnet", ip("10.88.0.5"), owner("s2"));
    })
    .unwrap_err();
    assert!(matches!(err, Error::Conflict { .. }), "{err:?}");

    // The exact record is forgotten, and its address released for its owner.
    let mut batch = Batch::new();
    batch.forget_attachment(rec.clone(), vec![ip("10.88.0.5")]);
    assert_eq!(store.commit(&batch).unwrap().applied, vec![true]);
    assert_eq!(store.attachment("s1", "eth0").unwrap(), None);
    assert!(store.reservations("podnet").unwrap().is_empty());

    // Stored again so: a release held by its owner frees the address, one held by another not.
    drop(store);
    store_reencoded(&dir, &rec);
    let store = reopen(&dir).unwrap();
    commit(&store, |b| {
        b.release_held_by("podnet", ip("10.88.0.5"), owner("s2"));
    })
    .unwrap();
    assert_eq!(store.reservations("podnet").unwrap().len(), 1);
    commit(&store, |b| {
        b.release_held_by("podnet", ip("10.88.0.5"), owner("s1"));
    })
    .unwrap();
    assert!(store.reservations("podnet").unwrap().is_empty());
}
