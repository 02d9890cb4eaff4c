use super::*;

#[test]
fn keeps_sandbox_names_a_whole_sandbox_or_one_with_a_kept_attachment() {
    let id = |s: &str| SandboxId::parse(s).expect("id");
    let keep = GcKeep {
        sandboxes: [id("whole")].into(),
        attachments: [(id("pod-a"), IfName::parse("net1").expect("ifname"))].into(),
        network: None,
        allow_detach_all: false,
    };
    assert!(keep.keeps_sandbox("whole"));
    assert!(keep.keeps_sandbox("pod-a"));
    assert!(
        !keep.keeps_sandbox("pod"),
        "a prefix of a kept id is not kept"
    );
    assert!(!keep.keeps_sandbox("pod-b"));
}

#[test]
fn a_report_files_not_ours_findings_as_left_and_the_rest_as_removed() {
    let found = |reason| GcFinding {
        sandbox_id: String::new(),
        ifname: String::new(),
        what: GcObject::HostLink,
        reason,
        detail: "kn0123456789".into(),
    };
    let mut report = GcReport::default();
    report.add(vec![found(GcReason::NoRecord), found(GcReason::NotOurs)]);
    assert_eq!(report.removed, [found(GcReason::NoRecord)]);
    assert_eq!(report.left, [found(GcReason::NotOurs)]);
    assert_eq!(GcReason::NotOurs.as_str(), "not-ours");
}
