use super::*;
use knid_core::policy::Explanation;

fn key(ns: &str, name: &str) -> Key {
    (ns.to_owned(), name.to_owned())
}

fn field_of(result: Result<impl std::fmt::Debug, Error>) -> String {
    match result {
        Err(Error::InvalidArgument { field, .. }) => field,
        other => panic!("not InvalidArgument: {other:?}"),
    }
}

#[test]
fn list_policies_request_takes_no_pod_or_namespace_slash_name() {
    let mut req = pb::ListPoliciesRequest::new();
    assert_eq!(list_policies_request(&req).expect("no pod"), None);
    req.pod = "x/a".into();
    assert_eq!(
        list_policies_request(&req).expect("pod").as_deref(),
        Some("x/a")
    );
    for bad in [
        "x",
        "x/",
        "/a",
        "x/a/b",
        "x/a\n",
        &format!("x/{}", "a".repeat(254)),
    ] {
        req.pod = bad.into();
        assert_eq!(field_of(list_policies_request(&req)), "pod", "{bad:?}");
    }
}

#[test]
fn explain_policy_request_names_the_bad_end_or_port() {
    let good = pb::ExplainPolicyRequest {
        from: "x/b".into(),
        to: "10.244.1.2".into(),
        port: "80/tcp".into(),
        ..Default::default()
    };
    let q = explain_policy_request(&good).expect("valid");
    assert_eq!(
        (q.from.as_str(), q.to.as_str(), q.port.as_str()),
        ("x/b", "10.244.1.2", "80/tcp")
    );
    let ipv6 = pb::ExplainPolicyRequest {
        from: "fd00::1".into(),
        to: "y/a".into(),
        port: "53/UDP".into(),
        ..Default::default()
    };
    explain_policy_request(&ipv6).expect("an IPv6 source and a UDP port");
    let cases: [(&str, &str, &str, &str); 7] = [
        ("", "x/a", "80", "from"),
        ("pod", "x/a", "80", "from"),
        ("x/b", "10.244.1.300", "80", "to"),
        ("x/b", "x/a", "", "port"),
        ("x/b", "x/a", "0", "port"),
        ("x/b", "x/a", "80/icmp", "port"),
        ("x/b", "x/a", "70000/tcp", "port"),
    ];
    for (from, to, port, field) in cases {
        let req = pb::ExplainPolicyRequest {
            from: from.into(),
            to: to.into(),
            port: port.into(),
            ..Default::default()
        };
        assert_eq!(
            field_of(explain_policy_request(&req)),
            field,
            "{from:?} {to:?} {port:?}"
        );
    }
    let req = pb::ExplainPolicyRequest {
        from: "pod".into(),
        ..good
    };
    let message = explain_policy_request(&req).expect_err("bad").to_string();
    assert!(
        message.contains("neither namespace/name nor an IP address"),
        "{message}"
    );
}

#[test]
fn a_listing_keeps_counts_rule_numbers_and_the_pods_each_policy_selects() {
    let listing = PolicyListing {
        synced: true,
        error: Some("nft: busy".into()),
        applied_at_ms: 1_795_900_801_000,
        counts: (3, 3, 9),
        policies: vec![
            PolicyEntry {
                key: key("x", "deny-ingress"),
                selector: "<all>".into(),
                ingress_rules: Some(0),
                egress_rules: None,
                selects: vec![key("x", "b"), key("x", "a")],
                refused_rules: vec![],
            },
            PolicyEntry {
                key: key("y", "web"),
                selector: "app=web".into(),
                ingress_rules: Some(2),
                egress_rules: Some(1),
                selects: vec![],
                refused_rules: vec!["spec.ingress[2]: bad CIDR".into()],
            },
        ],
        refused: vec![(key("z", "broken"), "unreadable pod selector".into())],
        kernel: knid_core::KernelCheck::Differs("table inet knid-policy is missing".into()),
    };
    let out = list_policies_response(&listing);
    assert!(out.synced);
    assert_eq!(out.error, "nft: busy");
    assert_eq!(out.applied_at, 1_795_900_801_000);
    assert_eq!(
        (out.policies_known, out.namespaces_known, out.pods_known),
        (3, 3, 9)
    );
    let deny = &out.policies[0];
    assert_eq!(
        (deny.policy.namespace.as_str(), deny.policy.name.as_str()),
        ("x", "deny-ingress")
    );
    assert_eq!(deny.selector, "<all>");
    assert_eq!((deny.isolates_ingress, deny.ingress_rules), (true, 0));
    assert_eq!((deny.isolates_egress, deny.egress_rules), (false, 0));
    let selects: Vec<&str> = deny.selects.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(selects, ["a", "b"]);
    let web = &out.policies[1];
    assert_eq!((web.ingress_rules, web.egress_rules), (2, 1));
    assert!(web.isolates_egress && web.selects.is_empty());
    assert_eq!(web.refused_rules, ["spec.ingress[2]: bad CIDR"]);
    assert_eq!(out.refused[0].policy.name, "broken");
    assert_eq!(out.refused[0].reason, "unreadable pod selector");
    assert_eq!(
        out.kernel.enum_value_or_default(),
        pb::PolicyTableCheck::DIFFERS
    );
    assert_eq!(out.kernel_detail, "table inet knid-policy is missing");
}

#[test]
fn an_empty_listing_is_zeros_and_no_error() {
    let out = list_policies_response(&PolicyListing::default());
    assert!(!out.synced && out.error.is_empty() && out.applied_at == 0);
    assert!(out.policies.is_empty() && out.refused.is_empty());
}

fn end(pod: Option<Key>, ip: &str, local: bool, node: Option<&str>) -> Resolved {
    Resolved {
        pod,
        ip: ip.parse().expect("ip"),
        local,
        node: node.map(str::to_owned),
    }
}

#[test]
fn a_denied_verdict_names_each_sides_decision_and_the_isolating_policies() {
    let verdict = PolicyVerdict {
        from: end(Some(key("x", "b")), "10.244.2.3", true, Some("node-b")),
        to: end(Some(key("x", "a")), "10.244.1.2", false, Some("node-a")),
        protocol: 6,
        port: 80,
        explanation: Explanation {
            egress: Side::NotIsolated,
            ingress: Side::Denied {
                by: vec![key("x", "deny-ingress"), key("x", "default-deny")],
            },
            allowed: false,
        },
    };
    let out = explain_policy_response(&verdict);
    assert!(!out.allowed);
    assert_eq!((out.protocol.as_str(), out.port), ("tcp", 80));
    assert_eq!(out.from.pod.name, "b");
    assert_eq!(
        (out.from.ip.as_str(), out.from.local, out.from.node.as_str()),
        ("10.244.2.3", true, "node-b")
    );
    assert_eq!(
        (out.to.ip.as_str(), out.to.local, out.to.node.as_str()),
        ("10.244.1.2", false, "node-a")
    );
    assert_eq!(
        out.egress.decision.enum_value(),
        Ok(pb::PolicyDecision::NOT_ISOLATED)
    );
    assert_eq!(
        out.ingress.decision.enum_value(),
        Ok(pb::PolicyDecision::DENIED)
    );
    let by: Vec<&str> = out
        .ingress
        .isolated_by
        .iter()
        .map(|k| k.name.as_str())
        .collect();
    assert_eq!(by, ["deny-ingress", "default-deny"]);
    assert!(out.ingress.policy.is_none());
}

#[test]
fn an_allowed_verdict_names_the_policy_and_rule_and_an_address_is_no_pod() {
    let verdict = PolicyVerdict {
        from: end(None, "192.0.2.7", false, None),
        to: end(Some(key("y", "web")), "fd00:88::5", true, None),
        protocol: 132,
        port: 9000,
        explanation: Explanation {
            egress: Side::NotAPod,
            ingress: Side::Allowed {
                policy: key("y", "web"),
                rule: 1,
            },
            allowed: true,
        },
    };
    let out = explain_policy_response(&verdict);
    assert!(out.allowed);
    assert_eq!((out.protocol.as_str(), out.port), ("sctp", 9000));
    assert!(out.from.pod.is_none());
    assert_eq!(
        (out.from.ip.as_str(), out.from.node.as_str()),
        ("192.0.2.7", "")
    );
    assert_eq!(
        out.egress.decision.enum_value(),
        Ok(pb::PolicyDecision::NOT_A_POD)
    );
    assert_eq!(
        out.ingress.decision.enum_value(),
        Ok(pb::PolicyDecision::ALLOWED)
    );
    assert_eq!(
        (
            out.ingress.policy.namespace.as_str(),
            out.ingress.policy.name.as_str(),
            out.ingress.rule
        ),
        ("y", "web", 1)
    );
    assert!(out.ingress.isolated_by.is_empty());
}
