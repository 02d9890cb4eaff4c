use serde_json::json;

use super::*;

/// What `nft -j list ruleset` printed after `iptables -P FORWARD DROP`, `iptables -I FORWARD -i
/// knid0 -j ACCEPT`, `iptables -I FORWARD -o kn+ -j ACCEPT` and a conntrack rule (iptables-nft
/// 1.8.9, nft 1.0.6, in a scratch netns).
fn iptables_nft_ruleset() -> Value {
    json!({"nftables": [
        {"metainfo": {"version": "1.0.6", "release_name": "Lester Gooch #5", "json_schema_version": 1}},
        {"table": {"family": "ip", "name": "filter", "handle": 1}},
        {"chain": {"family": "ip", "table": "filter", "name": "FORWARD", "handle": 1, "type": "filter", "hook": "forward", "prio": 0, "policy": "drop"}},
        {"rule": {"family": "ip", "table": "filter", "chain": "FORWARD", "handle": 3, "expr": [{"match": {"op": "==", "left": {"meta": {"key": "oifname"}}, "right": "kn*"}}, {"counter": {"packets": 0, "bytes": 0}}, {"accept": null}]}},
        {"rule": {"family": "ip", "table": "filter", "chain": "FORWARD", "handle": 2, "expr": [{"match": {"op": "==", "left": {"meta": {"key": "iifname"}}, "right": "knid0"}}, {"counter": {"packets": 0, "bytes": 0}}, {"accept": null}]}},
        {"rule": {"family": "ip", "table": "filter", "chain": "FORWARD", "handle": 4, "expr": [{"xt": {"type": "match", "name": "conntrack"}}, {"counter": {"packets": 0, "bytes": 0}}, {"accept": null}]}}
    ]})
}

#[test]
fn a_dropping_forward_chain_is_found_with_the_interfaces_it_accepts() {
    let chains = dropping_chains(&iptables_nft_ruleset());
    assert_eq!(
        chains,
        [DroppingChain {
            family: "ip".into(),
            table: "filter".into(),
            chain: "FORWARD".into(),
            accepts_in: vec!["knid0".into()],
            accepts_out: vec!["kn*".into()],
            accepts_established: false,
        }]
    );
}

#[test]
fn accepting_chains_and_other_hooks_are_not_dropping() {
    let ruleset = json!({"nftables": [
        {"chain": {"family": "ip", "table": "filter", "name": "FORWARD", "hook": "forward", "policy": "accept"}},
        {"chain": {"family": "inet", "table": "fw", "name": "input", "hook": "input", "policy": "drop"}},
        {"chain": {"family": "inet", "table": "fw", "name": "fwd", "hook": "forward", "policy": "drop"}},
        {"rule": {"family": "inet", "table": "fw", "chain": "fwd", "expr": [
            {"match": {"op": "in", "left": {"ct": {"key": "state"}}, "right": ["established", "related"]}},
            {"accept": null}]}},
        {"rule": {"family": "inet", "table": "fw", "chain": "fwd", "expr": [
            {"match": {"op": "==", "left": {"meta": {"key": "iifname"}}, "right": {"set": ["knid0", "br1"]}}},
            {"accept": null}]}},
        {"rule": {"family": "inet", "table": "fw", "chain": "fwd", "expr": [
            {"match": {"op": "==", "left": {"meta": {"key": "iifname"}}, "right": "eth9"}},
            {"drop": null}]}}
    ]});
    let chains = dropping_chains(&ruleset);
    assert_eq!(chains.len(), 1, "{chains:?}");
    let c = &chains[0];
    assert_eq!((c.family.as_str(), c.chain.as_str()), ("inet", "fwd"));
    assert_eq!(c.accepts_in, ["knid0", "br1"]);
    assert!(c.accepts_established);
    assert!(c.accepts_out.is_empty(), "a drop rule accepts nothing");
}

#[test]
fn a_wildcard_covers_the_names_it_starts() {
    assert!(covers("kn*", "knid0"));
    assert!(covers("kn*", "kn*"));
    assert!(covers("knid0", "knid0"));
    assert!(!covers("knid0", "kn*"));
    assert!(!covers("br*", "knid0"));
}
