use std::collections::BTreeMap;

use knid_store::{AttachmentState as RecState, IpRecord, PodRecord};
use protobuf::{EnumOrUnknown, MessageField};

use super::*;

fn attachment(sandbox_id: &str, ifname: &str, network: &str, mac: &str) -> AttachmentRecord {
    AttachmentRecord {
        sandbox_id: sandbox_id.into(),
        ifname: ifname.into(),
        network: network.into(),
        kind: "veth".into(),
        state: EnumOrUnknown::new(RecState::ATTACHED),
        mac: mac.into(),
        ips: vec![IpRecord {
            address: "10.88.0.5/16".into(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn sandbox(id: &str, labels: &[(&str, &str)]) -> SandboxRecord {
    SandboxRecord {
        id: id.into(),
        pod: MessageField::some(PodRecord {
            name: format!("pod-of-{id}"),
            ..Default::default()
        }),
        labels: labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        ..Default::default()
    }
}

/// `good` attached on `default` with label app=web; `bad` with an attachment whose MAC is
/// empty (on `default`, label app=db); `lost` with only an undecodable attachment record.
fn records() -> (Sandboxes, Attachments) {
    let bad_rec = attachment("bad", "eth0", "default", "");
    let sandboxes = Sandboxes {
        usable: vec![
            sandbox("good", &[("app", "web")]),
            sandbox("bad", &[("app", "db")]),
        ],
        corrupt: Vec::new(),
    };
    let attachments = Attachments {
        usable: vec![attachment("good", "eth0", "default", "02:00:00:00:00:01")],
        corrupt: vec![
            CorruptAttachment {
                sandbox_id: "bad".into(),
                ifname: "eth0".into(),
                record: Some(bad_rec),
                detail: "invalid mac \"\"".into(),
            },
            CorruptAttachment {
                sandbox_id: "lost".into(),
                ifname: "eth0".into(),
                record: None,
                detail: "does not decode: truncated".into(),
            },
        ],
    };
    (sandboxes, attachments)
}

fn listed(filter: &ListFilter) -> Vec<(String, Option<String>)> {
    let (sandboxes, attachments) = records();
    summaries(sandboxes, attachments, filter)
        .into_iter()
        .map(|s| (s.id, s.error))
        .collect()
}

#[test]
fn a_corrupt_record_is_listed_with_its_error_beside_the_others() {
    let (sandboxes, attachments) = records();
    let all = summaries(sandboxes, attachments, &ListFilter::default());
    let ids: Vec<&str> = all.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["bad", "good", "lost"]);
    let good = &all[1];
    assert_eq!(good.state, Some(AttachmentState::Attached));
    assert_eq!(good.error, None);
    assert_eq!(good.ips, ["10.88.0.5".parse::<IpAddr>().expect("ip")]);
    let bad = &all[0];
    assert_eq!(bad.state, None);
    assert_eq!(
        bad.error.as_deref(),
        Some("corrupt record bad/eth0: invalid mac \"\"")
    );
    // What can still be read of it.
    assert_eq!(bad.pod.name, "pod-of-bad");
    assert_eq!(bad.interfaces, ["eth0"]);
    assert_eq!(bad.networks, ["default"]);
    let lost = &all[2];
    assert_eq!(
        lost.error.as_deref(),
        Some("corrupt record lost/eth0: does not decode: truncated")
    );
}

#[test]
fn a_filter_hides_a_corrupt_sandbox_only_by_what_can_be_read_of_it() {
    let by_label = |k: &str, v: &str| ListFilter {
        labels: BTreeMap::from([(k.to_owned(), v.to_owned())]),
        ..ListFilter::default()
    };
    // `bad`'s labels are readable and rule it out; `lost` has no sandbox record to read.
    let ids: Vec<String> = listed(&by_label("app", "web"))
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(ids, ["good", "lost"]);
    // Its state cannot be read: a state filter never hides it.
    let attached = ListFilter {
        state: Some(AttachmentState::Attached),
        ..ListFilter::default()
    };
    assert_eq!(listed(&attached).len(), 3);
    // `bad`'s network is readable; `lost`'s is not.
    let other = ListFilter {
        network: Some("other".into()),
        ..ListFilter::default()
    };
    let ids: Vec<String> = listed(&other).into_iter().map(|(id, _)| id).collect();
    assert_eq!(ids, ["lost"]);
}

#[test]
fn detached_interfaces_are_not_shown() {
    let mut reaping = attachment("good", "eth1", "default", "02:00:00:00:00:02");
    reaping.state = EnumOrUnknown::new(RecState::REAPING);
    let kept = live(vec![
        attachment("good", "eth0", "default", "02:00:00:00:00:01"),
        reaping,
    ]);
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].ifname, "eth0");
}
