use std::borrow::Cow;

use super::*;

fn record(ifname: &str) -> AttachmentRecord {
    AttachmentRecord {
        sandbox_id: "pod".to_owned(),
        ifname: ifname.to_owned(),
        ..Default::default()
    }
}

fn names(recs: &[AttachmentRecord]) -> Vec<&str> {
    recs.iter().map(|r| r.ifname.as_str()).collect()
}

#[test]
fn a_round_whose_links_are_all_gone_forgets_the_batch_itself() {
    let batch = [record("eth0"), record("eth1")];
    let (gone, left) = split_gone(&batch, &[false, false]);
    assert!(matches!(gone, Cow::Borrowed(_)), "a copy of the batch");
    assert_eq!(names(&gone), ["eth0", "eth1"]);
    assert!(left.is_empty());
}

#[test]
fn links_still_there_are_left_for_the_next_round_in_batch_order() {
    let batch = [
        record("eth0"),
        record("eth1"),
        record("eth2"),
        record("eth3"),
    ];
    let (gone, left) = split_gone(&batch, &[false, true, false, true]);
    assert_eq!(names(&gone), ["eth0", "eth2"]);
    assert_eq!(names(&left), ["eth1", "eth3"]);
    let (gone, left) = split_gone(&batch, &[true; 4]);
    assert!(gone.is_empty());
    assert_eq!(names(&left), ["eth0", "eth1", "eth2", "eth3"]);
}
