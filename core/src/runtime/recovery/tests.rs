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

fn live(
    sandbox_id: &str,
    ifname: &str,
    kind: &str,
    state: knid_store::AttachmentState,
) -> AttachmentRecord {
    AttachmentRecord {
        kind: kind.to_owned(),
        host_ifname: format!("kn-{sandbox_id}-{ifname}"),
        state: protobuf::EnumOrUnknown::new(state),
        ..att(sandbox_id, ifname)
    }
}

#[test]
fn only_attached_veths_with_their_host_link_in_the_reaper_group_ran_ahead() {
    use knid_store::AttachmentState as S;
    let atts = vec![
        live("a", "eth0", "veth", S::ATTACHED),
        live("a", "eth1", "veth", S::ATTACHED),
        live("b", "eth0", "tap", S::ATTACHED),
        // Detaching on disk: finished by recovery anyway, not found twice.
        live("c", "eth0", "veth", S::DETACHING),
        // Not a kind whose detach overlaps its flush.
        live("d", "eth0", "macvlan", S::ATTACHED),
    ];
    let retired: HashSet<String> = ["kn-a-eth1", "kn-b-eth0", "kn-c-eth0", "kn-d-eth0"]
        .into_iter()
        .map(str::to_owned)
        .collect();
    let found = ran_ahead(&atts, &retired);
    assert_eq!(
        found.keys().map(String::as_str).collect::<Vec<_>>(),
        ["a", "b"]
    );
    let a = &found["a"];
    assert_eq!(a.len(), 1, "{a:?}");
    assert_eq!(
        (a[0].ifname.as_str(), a[0].what, a[0].reason),
        ("eth1", GcObject::Attachment, GcReason::Interrupted)
    );
    assert!(a[0].detail.contains("kn-a-eth1"), "{}", a[0].detail);
    // Nothing in the group: nothing ran ahead.
    assert!(ran_ahead(&atts, &HashSet::new()).is_empty());
}
