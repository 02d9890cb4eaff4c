//! NetworkPolicies as the test API takes them: kube-apiserver's strict decoding, defaulting, and
//! each refusal of `ValidateNetworkPolicy`, worded as its 422 names the field.

use serde_json::{json, Value};

use super::tests::{get, start, Fixture};

fn with_namespace() -> Fixture {
    let f = start();
    f.api.put_namespace("web", &[]);
    f
}

/// The spec stored for `spec`, after defaulting.
fn stored_spec(f: &Fixture, spec: Value) -> Value {
    f.api
        .put_network_policy("web", "p", spec)
        .unwrap_or_else(|e| panic!("refused: {e}"));
    f.api.network_policy("web", "p").expect("stored")["spec"].clone()
}

/// The message `spec` is refused with.
fn refusal(f: &Fixture, spec: Value) -> String {
    match f.api.put_network_policy("web", "p", spec.clone()) {
        Ok(()) => panic!("accepted: {spec}"),
        Err(message) => message,
    }
}

/// An ingress rule with one port.
fn ingress_port(port: Value) -> Value {
    json!({"podSelector": {}, "ingress": [{"ports": [port]}]})
}

/// An ingress rule with one peer.
fn ingress_peer(peer: Value) -> Value {
    json!({"podSelector": {}, "ingress": [{"from": [peer]}]})
}

#[test]
fn policy_types_default_to_ingress_and_to_egress_when_there_are_egress_rules() {
    let f = with_namespace();
    let cases = [
        (json!({"podSelector": {}}), json!(["Ingress"])),
        (
            json!({"podSelector": {}, "egress": [{}]}),
            json!(["Ingress", "Egress"]),
        ),
        // An empty list is no egress rule: Go's len(Egress) is 0.
        (json!({"podSelector": {}, "egress": []}), json!(["Ingress"])),
        (
            json!({"podSelector": {}, "policyTypes": ["Egress"]}),
            json!(["Egress"]),
        ),
        (
            json!({"podSelector": {}, "egress": [{}], "policyTypes": []}),
            json!(["Ingress", "Egress"]),
        ),
    ];
    for (spec, types) in cases {
        assert_eq!(
            stored_spec(&f, spec.clone())["policyTypes"],
            types,
            "{spec}"
        );
    }
}

#[test]
fn ports_default_to_tcp_and_empty_lists_are_not_written_back() {
    let f = with_namespace();
    let spec = stored_spec(
        &f,
        json!({
            "podSelector": {"matchLabels": {"app": "db"}},
            "ingress": [
                {"ports": [{"port": 5432}, {"port": "dns", "protocol": "UDP"}, {}], "from": []},
                {}
            ],
            "egress": [],
        }),
    );
    assert_eq!(
        spec,
        json!({
            "podSelector": {"matchLabels": {"app": "db"}},
            "ingress": [
                {"ports": [
                    {"port": 5432, "protocol": "TCP"},
                    {"port": "dns", "protocol": "UDP"},
                    {"protocol": "TCP"}
                ]},
                {}
            ],
            "policyTypes": ["Ingress"],
        })
    );
}

#[test]
fn a_policy_without_pod_selector_selects_every_pod_as_on_the_real_server() {
    let f = with_namespace();
    assert_eq!(stored_spec(&f, json!({}))["podSelector"], json!({}));
}

#[test]
fn a_served_policy_is_the_defaulted_object() {
    let f = with_namespace();
    let spec = json!({
        "podSelector": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["db"]}]},
        "egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}],
                    "ports": [{"port": 53, "endPort": 60}]}],
    });
    f.api
        .put_network_policy("web", "egress-dns", spec)
        .expect("valid");
    let (status, policy) = get(
        &f.api,
        "/apis/networking.k8s.io/v1/namespaces/web/networkpolicies/egress-dns",
    );
    assert_eq!(status, 200);
    assert_eq!(policy["kind"], "NetworkPolicy");
    assert_eq!(policy["apiVersion"], "networking.k8s.io/v1");
    assert_eq!(policy["metadata"]["namespace"], "web");
    assert_eq!(policy["metadata"]["generation"], 1);
    assert_eq!(policy["metadata"]["uid"].as_str().map(str::len), Some(36));
    assert_eq!(
        policy["spec"]["egress"][0]["ports"],
        json!([{"port": 53, "endPort": 60, "protocol": "TCP"}])
    );
    assert_eq!(policy["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
    assert_eq!(
        policy["spec"]["egress"][0]["to"][0]["ipBlock"]["except"],
        json!(["10.1.0.0/16"])
    );
}

#[test]
fn an_update_keeps_the_uid_and_moves_the_generation_only_when_the_spec_changes() {
    let f = with_namespace();
    let put = |spec: Value| {
        f.api.put_network_policy("web", "p", spec).expect("valid");
        f.api.network_policy("web", "p").expect("stored")
    };
    let first = put(json!({"podSelector": {}}));
    let same = put(json!({"podSelector": {}}));
    let changed = put(json!({"podSelector": {"matchLabels": {"app": "x"}}}));
    let generations = [&first, &same, &changed].map(|p| p["metadata"]["generation"].clone());
    assert_eq!(generations, [json!(1), json!(1), json!(2)]);
    assert_eq!(changed["metadata"]["uid"], first["metadata"]["uid"]);
    assert_eq!(
        changed["metadata"]["creationTimestamp"],
        first["metadata"]["creationTimestamp"]
    );
    assert_ne!(
        changed["metadata"]["resourceVersion"],
        first["metadata"]["resourceVersion"]
    );
}

#[test]
fn invalid_names_are_refused_naming_metadata() {
    let f = with_namespace();
    let spec = json!({"podSelector": {}});
    let refused = f
        .api
        .put_network_policy("web", "Bad_Name", spec.clone())
        .expect_err("an invalid name");
    assert!(
        refused.starts_with(
            "NetworkPolicy.networking.k8s.io \"Bad_Name\" is invalid: metadata.name: Invalid \
             value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of"
        ),
        "{refused}"
    );
    let refused = f
        .api
        .put_network_policy("Web", "p", spec.clone())
        .expect_err("an invalid namespace");
    assert!(
        refused.contains(
            "metadata.namespace: Invalid value: \"Web\": a lowercase RFC 1123 label must"
        ),
        "{refused}"
    );
    let refused = f
        .api
        .put_network_policy("web", "", spec)
        .expect_err("no name");
    assert!(
        refused.contains("metadata.name: Required value: name or generateName is required"),
        "{refused}"
    );
}

#[test]
fn invalid_label_selectors_are_refused_at_their_field() {
    let f = with_namespace();
    let cases = [
        (
            json!({"podSelector": {"matchLabels": {"-app": "web"}}}),
            "spec.podSelector.matchLabels: Invalid value: \"-app\": name part must consist of \
             alphanumeric characters",
        ),
        (
            json!({"podSelector": {"matchLabels": {"app": "web!"}}}),
            "spec.podSelector.matchLabels: Invalid value: \"web!\": a valid label must be an \
             empty string or consist of",
        ),
        (
            json!({"podSelector": {"matchExpressions": [{"key": "app", "operator": "In"}]}}),
            "spec.podSelector.matchExpressions[0].values: Required value: must be specified \
             when `operator` is 'In' or 'NotIn'",
        ),
        (
            json!({"podSelector": {"matchExpressions": [
                {"key": "app", "operator": "In", "values": ["a"]},
                {"key": "app", "operator": "NotIn", "values": []}
            ]}}),
            "spec.podSelector.matchExpressions[1].values: Required value",
        ),
        (
            ingress_peer(json!({"podSelector": {"matchExpressions": [
                {"key": "app", "operator": "Exists", "values": ["a"]}
            ]}})),
            "spec.ingress[0].from[0].podSelector.matchExpressions[0].values: Forbidden: may not \
             be specified when `operator` is 'Exists' or 'DoesNotExist'",
        ),
        (
            ingress_peer(json!({"namespaceSelector": {"matchExpressions": [
                {"key": "team", "operator": "DoesNotExist", "values": ["a"]}
            ]}})),
            "spec.ingress[0].from[0].namespaceSelector.matchExpressions[0].values: Forbidden",
        ),
        (
            json!({"podSelector": {"matchExpressions": [{"key": "app", "operator": "Equals"}]}}),
            "spec.podSelector.matchExpressions[0].operator: Invalid value: \"Equals\": not a \
             valid selector operator",
        ),
        (
            json!({"podSelector": {"matchExpressions": [
                {"key": "a/b/c", "operator": "Exists"}
            ]}}),
            "spec.podSelector.matchExpressions[0].key: Invalid value: \"a/b/c\": a qualified \
             name must consist of",
        ),
        (
            json!({"podSelector": {"matchExpressions": [
                {"key": "app", "operator": "In", "values": ["ok", "not ok"]}
            ]}}),
            "spec.podSelector.matchExpressions[0].values[1]: Invalid value: \"not ok\": a valid \
             label must be",
        ),
    ];
    for (spec, expected) in cases {
        let refused = refusal(&f, spec.clone());
        assert!(refused.contains(expected), "{spec}:\n{refused}");
    }
}

#[test]
fn invalid_policy_types_are_refused_and_a_repeated_one_is_not() {
    let f = with_namespace();
    let refused = refusal(&f, json!({"podSelector": {}, "policyTypes": ["Both"]}));
    assert!(
        refused.contains(
            "spec.policyTypes[0]: Unsupported value: \"Both\": supported values: \"Ingress\", \
             \"Egress\""
        ),
        "{refused}"
    );
    let three = json!({"podSelector": {}, "policyTypes": ["Ingress", "Egress", "Ingress"]});
    let refused = refusal(&f, three);
    assert!(
        refused.contains(
            "spec.policyTypes: Invalid value: []networking.PolicyType{\"Ingress\", \"Egress\", \
             \"Ingress\"}: may not specify more than two policyTypes"
        ),
        "{refused}"
    );
    // ValidateNetworkPolicySpec checks the count and each value, not repeats.
    let twice = json!({"podSelector": {}, "policyTypes": ["Ingress", "Ingress"]});
    assert_eq!(
        stored_spec(&f, twice)["policyTypes"],
        json!(["Ingress", "Ingress"])
    );
}

#[test]
fn invalid_ports_are_refused_at_their_field() {
    let f = with_namespace();
    let at = "spec.ingress[0].ports[0]";
    let cases = [
        (
            json!({"port": 0}),
            format!("{at}.port: Invalid value: 0: must be between 1 and 65535, inclusive"),
        ),
        (
            json!({"port": 65536}),
            format!("{at}.port: Invalid value: 65536: must be between 1 and 65535, inclusive"),
        ),
        (
            json!({"port": "HTTP"}),
            format!(
                "{at}.port: Invalid value: \"HTTP\": must contain only alpha-numeric characters \
                 (a-z, 0-9), and hyphens (-)"
            ),
        ),
        (
            json!({"port": "web--app"}),
            format!("{at}.port: Invalid value: \"web--app\": must not contain consecutive hyphens"),
        ),
        (
            json!({"port": "-web"}),
            format!("{at}.port: Invalid value: \"-web\": must not begin or end with a hyphen"),
        ),
        (
            json!({"port": "8080"}),
            format!("{at}.port: Invalid value: \"8080\": must contain at least one letter (a-z)"),
        ),
        (
            json!({"port": "a-very-long-name"}),
            format!(
                "{at}.port: Invalid value: \"a-very-long-name\": must be no more than 15 \
                 characters"
            ),
        ),
        (
            json!({"port": 80, "protocol": "ICMP"}),
            format!(
                "{at}.protocol: Unsupported value: \"ICMP\": supported values: \"TCP\", \"UDP\", \
                 \"SCTP\""
            ),
        ),
        (
            json!({"port": 80, "endPort": 79}),
            format!("{at}.endPort: Invalid value: 79: must be greater than or equal to `port`"),
        ),
        (
            json!({"port": 80, "endPort": 70000}),
            format!("{at}.endPort: Invalid value: 70000: must be between 1 and 65535, inclusive"),
        ),
        (
            json!({"port": "http", "endPort": 90}),
            format!(
                "{at}.endPort: Invalid value: 90: may not be specified when `port` is \
                 non-numeric"
            ),
        ),
        (
            json!({"endPort": 90}),
            format!(
                "{at}.endPort: Invalid value: 90: may not be specified when `port` is not \
                 specified"
            ),
        ),
    ];
    for (port, expected) in cases {
        let refused = refusal(&f, ingress_port(port.clone()));
        assert!(refused.contains(&expected), "{port}:\n{refused}");
    }
    let egress = json!({"podSelector": {}, "egress": [{"ports": [{"port": 53}, {"port": 0}]}]});
    let refused = refusal(&f, egress);
    assert!(
        refused.contains("spec.egress[0].ports[1].port: Invalid value: 0"),
        "{refused}"
    );
    for good in [
        json!({"port": "http-alt"}),
        json!({"port": 1, "endPort": 65535}),
    ] {
        stored_spec(&f, ingress_port(good));
    }
}

#[test]
fn invalid_peers_and_ip_blocks_are_refused_at_their_field() {
    let f = with_namespace();
    let at = "spec.ingress[0].from[0]";
    let cidr_error = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)";
    let cases = [
        (
            json!({"ipBlock": {"cidr": "10.0.0.0/8"}, "podSelector": {}}),
            format!("{at}: Forbidden: may not specify both ipBlock and another peer"),
        ),
        (
            json!({"ipBlock": {"cidr": "10.0.0.0/8"}, "namespaceSelector": {}}),
            format!("{at}: Forbidden: may not specify both ipBlock and another peer"),
        ),
        (
            json!({}),
            format!("{at}: Required value: must specify a peer"),
        ),
        (
            json!({"ipBlock": {"cidr": ""}}),
            format!("{at}.ipBlock.cidr: Required value"),
        ),
        (
            json!({"ipBlock": {"cidr": "10.0.0.0/33"}}),
            format!("{at}.ipBlock.cidr: Invalid value: \"10.0.0.0/33\": {cidr_error}"),
        ),
        (
            json!({"ipBlock": {"cidr": "10.0.0.1"}}),
            format!("{at}.ipBlock.cidr: Invalid value: \"10.0.0.1\": {cidr_error}"),
        ),
        (
            json!({"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16", "bogus"]}}),
            format!("{at}.ipBlock.except[1]: Invalid value: \"bogus\": {cidr_error}"),
        ),
        (
            json!({"ipBlock": {"cidr": "10.0.0.0/8", "except": ["192.168.0.0/24"]}}),
            format!(
                "{at}.ipBlock.except[0]: Invalid value: \"192.168.0.0/24\": must be a strict \
                 subset of `cidr`"
            ),
        ),
        (
            json!({"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.0.0.0/8"]}}),
            format!("{at}.ipBlock.except[0]: Invalid value: \"10.0.0.0/8\": must be a strict"),
        ),
        (
            json!({"ipBlock": {"cidr": "10.0.0.0/16", "except": ["10.0.0.0/8"]}}),
            format!("{at}.ipBlock.except[0]: Invalid value: \"10.0.0.0/8\": must be a strict"),
        ),
        (
            json!({"ipBlock": {"cidr": "fd00::/64", "except": ["10.0.0.0/24"]}}),
            format!("{at}.ipBlock.except[0]: Invalid value: \"10.0.0.0/24\": must be a strict"),
        ),
    ];
    for (peer, expected) in cases {
        let refused = refusal(&f, ingress_peer(peer.clone()));
        assert!(refused.contains(&expected), "{peer}:\n{refused}");
    }
    let egress = json!({"podSelector": {}, "egress": [{"to": [{"podSelector": {}}, {}]}]});
    let refused = refusal(&f, egress);
    assert!(
        refused.contains("spec.egress[0].to[1]: Required value: must specify a peer"),
        "{refused}"
    );
    let good = json!({"ipBlock": {"cidr": "fd00::/48", "except": ["fd00::/64"]}});
    stored_spec(&f, ingress_peer(good));
    let both = json!({"podSelector": {}, "namespaceSelector": {"matchLabels": {"team": "a"}}});
    stored_spec(&f, ingress_peer(both));
}

#[test]
fn every_error_is_listed_and_a_refused_write_changes_nothing() {
    let f = with_namespace();
    let before = super::tests::rv_of(&get(&f.api, "/api/v1/namespaces").1);
    let spec = json!({
        "podSelector": {},
        "ingress": [{"ports": [{"port": 0}], "from": [{}]}],
    });
    let refused = refusal(&f, spec);
    assert_eq!(
        refused,
        "NetworkPolicy.networking.k8s.io \"p\" is invalid: [spec.ingress[0].ports[0].port: \
         Invalid value: 0: must be between 1 and 65535, inclusive, spec.ingress[0].from[0]: \
         Required value: must specify a peer]"
    );
    assert_eq!(f.api.network_policy("web", "p"), None);
    let after = super::tests::rv_of(&get(&f.api, "/api/v1/namespaces").1);
    assert_eq!(after, before, "no new resourceVersion");
}

#[test]
fn unknown_fields_and_wrong_types_are_refused_as_strict_decoding_does() {
    let f = with_namespace();
    let refused = refusal(&f, json!({"podSelector": {}, "ingress": [{"froms": []}]}));
    assert_eq!(
        refused,
        "NetworkPolicy in version \"v1\" cannot be handled as a NetworkPolicy: strict decoding \
         error: unknown field \"spec.ingress[0].froms\""
    );
    let refused = refusal(&f, ingress_port(json!({"port": 80, "endPort": "90"})));
    assert!(
        refused.ends_with(
            "json: cannot unmarshal string into Go struct field \
             NetworkPolicyPort.spec.ingress.ports.endPort of type int32"
        ),
        "{refused}"
    );
    let refused = refusal(&f, ingress_port(json!({"port": true})));
    assert!(refused.contains("cannot unmarshal bool"), "{refused}");
    let refused = refusal(&f, json!({"podSelector": {"matchLabels": {"app": 1}}}));
    assert!(refused.contains("cannot unmarshal number 1"), "{refused}");
}

#[test]
#[should_panic(expected = "namespaces \"ghost\" not found")]
fn a_policy_in_a_namespace_that_does_not_exist_is_a_test_mistake() {
    let f = start();
    let _ = f
        .api
        .put_network_policy("ghost", "p", json!({"podSelector": {}}));
}
