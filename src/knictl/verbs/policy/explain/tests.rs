use super::*;

fn name(namespace: &str, name: &str) -> pb::NamespacedName {
    pb::NamespacedName {
        namespace: namespace.into(),
        name: name.into(),
        ..Default::default()
    }
}

fn pod_end(pod: &str, ip: &str, local: bool, node: &str) -> pb::FlowEnd {
    let (ns, n) = pod.split_once('/').expect("namespace/name");
    pb::FlowEnd {
        pod: Some(name(ns, n)).into(),
        ip: ip.into(),
        local,
        node: node.into(),
        ..Default::default()
    }
}

fn decided(decision: PolicyDecision) -> pb::PolicySide {
    pb::PolicySide {
        decision: decision.into(),
        ..Default::default()
    }
}

#[test]
fn a_denied_flow_says_denied_and_which_policy_isolates_the_refusing_side() {
    let resp = pb::ExplainPolicyResponse {
        from: Some(pod_end("x/b", "10.244.2.3", true, "node-b")).into(),
        to: Some(pod_end("x/a", "10.244.1.2", false, "node-a")).into(),
        protocol: "tcp".into(),
        port: 80,
        egress: Some(decided(PolicyDecision::NOT_ISOLATED)).into(),
        ingress: Some(pb::PolicySide {
            isolated_by: vec![name("x", "deny-ingress")],
            ..decided(PolicyDecision::DENIED)
        })
        .into(),
        allowed: false,
        ..Default::default()
    };
    assert_eq!(
        verdict(&resp),
        "x/b (10.244.2.3, on this node) -> x/a (10.244.1.2, on node node-a) 80/TCP: DENIED\n  \
         egress of x/b:  no policy selects the pod: open\n  \
         ingress of x/a: denied: isolated by x/deny-ingress and no rule allows it\n"
    );
}

#[test]
fn an_allowed_flow_from_an_address_names_the_allowing_rule() {
    let resp = pb::ExplainPolicyResponse {
        from: Some(pb::FlowEnd {
            ip: "192.0.2.7".into(),
            ..Default::default()
        })
        .into(),
        to: Some(pod_end("y/web", "fd00:88::5", false, "")).into(),
        protocol: "udp".into(),
        port: 53,
        egress: Some(decided(PolicyDecision::NOT_A_POD)).into(),
        ingress: Some(pb::PolicySide {
            policy: Some(name("y", "dns")).into(),
            rule: 1,
            ..decided(PolicyDecision::ALLOWED)
        })
        .into(),
        allowed: true,
        ..Default::default()
    };
    assert_eq!(
        verdict(&resp),
        "192.0.2.7 (not a pod) -> y/web (fd00:88::5, on another node) 53/UDP: ALLOWED\n  \
         egress of 192.0.2.7: not a pod: no policy applies\n  \
         ingress of y/web:    allowed by y/dns rule 1\n"
    );
}
