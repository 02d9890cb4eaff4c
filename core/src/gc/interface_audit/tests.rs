use super::*;

fn changed(n: usize) -> Vec<Changed> {
    (0..n)
        .map(|i| Changed {
            sandbox_id: format!("pod-{i}"),
            ifname: "eth0".into(),
            difference: Difference::Down {
                ifname: "eth0".into(),
                place: "netns /run/netns/p".into(),
            },
        })
        .collect()
}

#[test]
fn the_condition_holds_until_a_round_finds_a_changed_interface() {
    let audit = InterfaceAudit::default();
    assert!(audit.condition().status);
    audit.replace(changed(1));
    let c = audit.condition();
    assert_eq!((c.kind.as_str(), c.status), (CONDITION, false));
    assert_eq!(c.reason, "InterfacesChanged");
    assert!(
        c.message
            .contains("pod-0/eth0: interface eth0 in netns /run/netns/p is down"),
        "{}",
        c.message
    );
    audit.replace(Vec::new());
    assert!(audit.condition().status, "cleared by the next round");
}

#[test]
fn the_message_names_a_few_and_counts_the_rest() {
    let audit = InterfaceAudit::default();
    audit.replace(changed(NAMED + 3));
    let message = audit.condition().message;
    assert!(
        message.starts_with(&format!("{} attached", NAMED + 3)),
        "{message}"
    );
    assert!(message.ends_with("and 3 more"), "{message}");
    assert!(!message.contains(&format!("pod-{NAMED}/")), "{message}");
}
