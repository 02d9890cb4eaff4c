use super::*;

#[test]
fn a_condition_made_now_is_stamped_with_the_current_time() {
    let before = now_ms();
    let c = Condition::now("NetworkReady", false, "BridgeMissing", "knid0 is gone");
    let after = now_ms();
    assert_eq!(
        (
            c.kind.as_str(),
            c.status,
            c.reason.as_str(),
            c.message.as_str()
        ),
        ("NetworkReady", false, "BridgeMissing", "knid0 is gone")
    );
    assert!(
        before <= c.since_ms && c.since_ms <= after,
        "{before} <= {} <= {after}",
        c.since_ms
    );
    assert!(before > 0, "the clock is after the Unix epoch");
}
