use super::*;

#[test]
fn keeps_sandbox_names_a_whole_sandbox_or_one_with_a_kept_attachment() {
    let id = |s: &str| SandboxId::parse(s).expect("id");
    let keep = GcKeep {
        sandboxes: [id("whole")].into(),
        attachments: [(id("pod-a"), IfName::parse("net1").expect("ifname"))].into(),
        network: None,
    };
    assert!(keep.keeps_sandbox("whole"));
    assert!(keep.keeps_sandbox("pod-a"));
    assert!(
        !keep.keeps_sandbox("pod"),
        "a prefix of a kept id is not kept"
    );
    assert!(!keep.keeps_sandbox("pod-b"));
}
