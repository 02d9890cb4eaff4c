use super::*;

fn name(namespace: &str, name: &str) -> pb::NamespacedName {
    pb::NamespacedName {
        namespace: namespace.into(),
        name: name.into(),
        ..Default::default()
    }
}

#[test]
fn a_listing_shows_rules_per_direction_the_pods_here_and_the_summary_line() {
    let resp = pb::ListPoliciesResponse {
        synced: true,
        applied_at: 1_795_899_601_000,
        policies_known: 3,
        namespaces_known: 3,
        pods_known: 9,
        policies: vec![
            pb::PolicySummary {
                policy: Some(name("x", "deny-ingress")).into(),
                selector: "<all>".into(),
                isolates_ingress: true,
                selects: vec![name("x", "a"), name("x", "b")],
                ..Default::default()
            },
            pb::PolicySummary {
                policy: Some(name("y", "web")).into(),
                selector: "app=web".into(),
                isolates_ingress: true,
                ingress_rules: 1,
                isolates_egress: true,
                egress_rules: 2,
                refused_rules: vec!["spec.ingress[1].from[0].ipBlock: bad CIDR".into()],
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    let text = listing(&resp, None);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "POLICY          SELECTOR  INGRESS  EGRESS   PODS HERE"
    );
    assert_eq!(
        lines[1],
        "x/deny-ingress  <all>     0 rules  -        x/a x/b"
    );
    assert_eq!(lines[2], "y/web           app=web   1 rule   2 rules  -");
    assert_eq!(
        lines[3],
        "y/web: rule not enforced (allows nothing): spec.ingress[1].from[0].ipBlock: bad CIDR"
    );
    assert_eq!(
        lines[4],
        "(policies 3, namespaces 3, pods 9; table applied 2026-11-28T21:00:01Z; in sync)"
    );
}

#[test]
fn an_empty_unsynced_listing_says_so_and_names_the_pod_asked_about() {
    let resp = pb::ListPoliciesResponse {
        error: "nft: Device or resource busy".into(),
        refused: vec![pb::RefusedPolicy {
            policy: Some(name("z", "broken")).into(),
            reason: "unreadable pod selector".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let text = listing(&resp, Some("x/a"));
    assert!(text.starts_with("no NetworkPolicy selects x/a\n"), "{text}");
    assert!(
        text.contains("z/broken: not enforced at all: unreadable pod selector\n"),
        "{text}"
    );
    assert!(
        text.contains("table not applied: nft: Device or resource busy\n"),
        "{text}"
    );
    assert!(
        text.ends_with(
            "table not changed since knid started; NOT in sync yet: policies may be missing)\n"
        ),
        "{text}"
    );
    assert!(listing(&resp, None).starts_with("no NetworkPolicy known\n"));
}
