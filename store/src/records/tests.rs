use super::*;
use crate::codec;
use crate::schema::SandboxRecord;

/// A temporary tree holding `entries` as they are, decodable or not.
fn tree(entries: &[(&str, &[u8])]) -> sled::Tree {
    let db = sled::Config::new().temporary(true).open().unwrap();
    let tree = db.open_tree("sandboxes").unwrap();
    for (key, value) in entries {
        tree.insert(key, *value).unwrap();
    }
    tree
}

fn encoded(id: &str) -> Vec<u8> {
    let rec = SandboxRecord {
        id: id.to_owned(),
        ..Default::default()
    };
    codec::encode(&rec, "sandboxes", id).unwrap()
}

// Field 1, wire type 2, length 200: runs past the end.
const TRUNCATED: &[u8] = &[0x0a, 0xc8, 0x01, b'x'];

#[test]
fn an_undecodable_entry_is_kept_with_its_key_and_the_others_decode() {
    let (a, c) = (encoded("a"), encoded("c"));
    let tree = tree(&[("a", &a), ("b", TRUNCATED), ("c", &c)]);
    let read = decode_all(tree.iter(), codec::sandbox).unwrap();
    let ids: Vec<&str> = read.decoded.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["a", "c"]);
    assert_eq!(read.undecodable.len(), 1);
    let bad = &read.undecodable[0];
    assert_eq!(bad.key, "b");
    assert!(
        matches!(&bad.error, Error::Decode { what: "sandboxes", key, .. } if key == "b"),
        "{:?}",
        bad.error
    );
    assert_eq!(read.len(), 3);
}

#[test]
fn complete_fails_with_the_first_undecodable_entry() {
    let a = encoded("a");
    let tree = tree(&[("a", &a), ("b", TRUNCATED), ("c", TRUNCATED)]);
    let err = decode_all(tree.iter(), codec::sandbox)
        .unwrap()
        .complete()
        .unwrap_err();
    assert!(
        matches!(&err, Error::Decode { key, .. } if key == "b"),
        "{err:?}"
    );
    let whole = decode_all(self::tree(&[("a", &a)]).iter(), codec::sandbox)
        .unwrap()
        .complete()
        .unwrap();
    assert_eq!(whole.len(), 1);
}

#[test]
fn an_undecodable_attachment_names_its_owner_by_its_key() {
    let bad = |key: &str| Undecodable {
        key: key.to_owned(),
        error: Error::Corrupt {
            detail: String::new(),
        },
    };
    assert_eq!(
        bad("pod-1/eth0").attachment_owner(),
        Some(Owner::new("pod-1", "eth0"))
    );
    assert_eq!(bad("pod-1").attachment_owner(), None);
}

#[test]
fn a_streamed_read_decodes_one_entry_at_a_time_and_keeps_the_undecodable_one() {
    let (a, c) = (encoded("a"), encoded("c"));
    let tree = tree(&[("a", &a), ("b", TRUNCATED), ("c", &c)]);
    let mut each = decode_each(tree.iter(), codec::sandbox);
    assert_eq!(each.next().unwrap().unwrap().unwrap().id, "a");
    let bad = each.next().unwrap().unwrap().unwrap_err();
    assert_eq!(bad.key, "b");
    assert!(matches!(&bad.error, Error::Decode { key, .. } if key == "b"));
    let rest: Vec<String> = each.map(|r| r.unwrap().unwrap().id).collect();
    assert_eq!(rest, ["c"]);
}
