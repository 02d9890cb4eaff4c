use super::*;
use knid_store::SandboxRecord;

fn att(sandbox_id: &str, ifname: &str) -> AttachmentRecord {
    AttachmentRecord {
        sandbox_id: sandbox_id.to_owned(),
        ifname: ifname.to_owned(),
        ..Default::default()
    }
}

fn bad_att(sandbox_id: &str, ifname: &str) -> CorruptAttachment {
    CorruptAttachment {
        sandbox_id: sandbox_id.to_owned(),
        ifname: ifname.to_owned(),
        record: None,
        detail: "does not decode".to_owned(),
    }
}

fn sandbox(id: &str) -> SandboxRecord {
    SandboxRecord {
        id: id.to_owned(),
        ..Default::default()
    }
}

fn ifnames(atts: &[AttachmentRecord]) -> Vec<&str> {
    atts.iter().map(|a| a.ifname.as_str()).collect()
}

#[test]
fn records_are_grouped_per_sandbox_as_a_read_of_each_gives_them() {
    let recorded = Recorded {
        sandboxes: Sandboxes {
            usable: vec![sandbox("a"), sandbox("c")],
            corrupt: vec![CorruptSandbox {
                id: "d".to_owned(),
                record: None,
                detail: "bad netns path".to_owned(),
            }],
        },
        // Key order: "a-x/…" sorts before "a/…".
        attachments: Attachments {
            usable: vec![
                att("a-x", "eth0"),
                att("a", "eth0"),
                att("a", "eth1"),
                att("b", "eth0"),
            ],
            corrupt: vec![bad_att("a", "eth2"), bad_att("d", "eth0")],
        },
        in_place: true,
    };
    let groups = recorded.by_sandbox();
    assert_eq!(
        groups.keys().copied().collect::<Vec<_>>(),
        ["a", "a-x", "b", "c", "d"]
    );
    let a = &groups["a"];
    assert_eq!(ifnames(a.usable), ["eth0", "eth1"]);
    assert_eq!(a.corrupt.len(), 1);
    assert!(matches!(a.sandbox, gc::SandboxRead::Usable(Some(s)) if s.id == "a"));
    assert_eq!(ifnames(groups["a-x"].usable), ["eth0"]);
    // Attachments without a sandbox record, and a sandbox record without attachments.
    assert!(matches!(groups["b"].sandbox, gc::SandboxRead::Usable(None)));
    assert!(groups["c"].usable.is_empty() && groups["c"].corrupt.is_empty());
    let d = &groups["d"];
    assert!(d.usable.is_empty());
    assert_eq!(d.corrupt.len(), 1);
    assert!(matches!(
        d.sandbox,
        gc::SandboxRead::Corrupt("bad netns path")
    ));
}
