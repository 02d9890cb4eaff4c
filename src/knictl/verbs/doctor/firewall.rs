//! doctor's look at the host firewall. A forward hook that drops by default (Docker sets
//! iptables' FORWARD policy to DROP; some hardening guides do the same) drops the traffic knid's
//! pods need forwarded: all of a routed pod's, every pod's to and from the outside, and, where
//! br_netfilter hands bridged frames to the firewall, even the traffic between pods on one
//! bridge. knid never changes another table's rules, so doctor finds such a chain and gives the
//! rules that let knid's interfaces through.
//!
//! The ruleset is read with `nft -j list ruleset`, which shows iptables-nft's rules too. Only
//! rules directly in the dropping base chain count as accepting: a jump into another chain
//! (`DOCKER-USER`) is not followed.

use std::process::Command;

use knid_transport::pb;
use serde_json::Value;

use super::Finding;

const CHECK: &str = "firewall";

/// A base chain on the forward hook whose policy is drop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DroppingChain {
    /// `ip`, `ip6` or `inet`.
    pub family: String,
    /// Its table.
    pub table: String,
    /// Its name.
    pub chain: String,
    /// Interface names (or `kn*` wildcards) its own rules accept as `iifname`.
    pub accepts_in: Vec<String>,
    /// The same as `oifname`.
    pub accepts_out: Vec<String>,
    /// Whether a rule accepts established and related connections.
    pub accepts_established: bool,
}

/// The forward-hook base chains of `ruleset` (the JSON `nft -j list ruleset` prints) whose
/// policy is drop, with the interfaces their own rules accept.
pub fn dropping_chains(ruleset: &Value) -> Vec<DroppingChain> {
    let items = ruleset["nftables"].as_array().cloned().unwrap_or_default();
    let mut chains: Vec<DroppingChain> = items
        .iter()
        .filter_map(|item| item.get("chain"))
        .filter(|c| {
            c["hook"] == "forward"
                && c["policy"] == "drop"
                && matches!(c["family"].as_str(), Some("ip" | "ip6" | "inet"))
        })
        .map(|c| DroppingChain {
            family: c["family"].as_str().unwrap_or_default().to_owned(),
            table: c["table"].as_str().unwrap_or_default().to_owned(),
            chain: c["name"].as_str().unwrap_or_default().to_owned(),
            accepts_in: Vec::new(),
            accepts_out: Vec::new(),
            accepts_established: false,
        })
        .collect();
    for rule in items.iter().filter_map(|item| item.get("rule")) {
        let Some(chain) = chains.iter_mut().find(|c| {
            rule["family"] == c.family.as_str()
                && rule["table"] == c.table.as_str()
                && rule["chain"] == c.chain.as_str()
        }) else {
            continue;
        };
        let exprs = rule["expr"].as_array().cloned().unwrap_or_default();
        if !exprs.iter().any(|e| e.get("accept").is_some()) {
            continue;
        }
        let matches: Vec<&Value> = exprs.iter().filter_map(|e| e.get("match")).collect();
        if matches.len() != 1
            || matches[0]["op"]
                .as_str()
                .is_some_and(|op| op != "==" && op != "in")
        {
            continue;
        }
        let m = matches[0];
        match m["left"]["meta"]["key"].as_str() {
            Some("iifname") => chain.accepts_in.extend(names(&m["right"])),
            Some("oifname") => chain.accepts_out.extend(names(&m["right"])),
            _ if m["left"]["ct"]["key"] == "state" => {
                let states = names(&m["right"]);
                chain.accepts_established |= states.iter().any(|s| s == "established");
            }
            _ => {}
        }
    }
    chains
}

/// A match's right side: one name, or a set of them.
fn names(right: &Value) -> Vec<String> {
    match right {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
        Value::Object(o) => o.get("set").map(names).unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// Whether `pattern` (an interface name, or a prefix ending in `*` as nft writes wildcards)
/// covers `name` (itself possibly such a wildcard).
fn covers(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.trim_end_matches('*').starts_with(prefix),
        None => pattern == name,
    }
}

/// The interfaces knid forwards pod traffic through: each bridge network's bridge, and `kn*`
/// (the host ends of routed pods) when a routed network is configured.
fn knid_interfaces(networks: &pb::NetworksResponse) -> Vec<String> {
    let mut out: Vec<String> = networks
        .networks
        .iter()
        .filter(|n| n.kind == "bridge" && !n.bridge.is_empty())
        .map(|n| n.bridge.clone())
        .collect();
    if networks.networks.iter().any(|n| n.kind == "routed") {
        out.push("kn*".to_owned());
    }
    out.sort();
    out.dedup();
    out
}

/// The forward hook does not drop knid's pods' traffic.
pub fn firewall(networks: &pb::NetworksResponse, out: &mut Vec<Finding>) {
    let interfaces = knid_interfaces(networks);
    if interfaces.is_empty() {
        return;
    }
    let ruleset = match Command::new("nft").args(["-j", "list", "ruleset"]).output() {
        Ok(o) if o.status.success() => serde_json::from_slice::<Value>(&o.stdout),
        Ok(o) => {
            out.push(Finding::warn(
                CHECK,
                format!(
                    "cannot read the firewall: nft -j list ruleset failed: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                ),
                Vec::new(),
            ));
            return;
        }
        Err(e) => {
            out.push(Finding::warn(
                CHECK,
                format!("cannot read the firewall ({e}): install nftables to let doctor check it"),
                Vec::new(),
            ));
            return;
        }
    };
    let ruleset = match ruleset {
        Ok(value) => value,
        Err(e) => {
            out.push(Finding::warn(
                CHECK,
                format!("nft -j printed no JSON: {e}"),
                Vec::new(),
            ));
            return;
        }
    };
    let bridged = bridged_frames_filtered();
    let mut dropped = false;
    for chain in dropping_chains(&ruleset) {
        let missing: Vec<&String> = interfaces
            .iter()
            .filter(|name| {
                let inbound = chain.accepts_in.iter().any(|p| covers(p, name));
                let outbound =
                    chain.accepts_established || chain.accepts_out.iter().any(|p| covers(p, name));
                !(inbound && outbound)
            })
            .collect();
        if missing.is_empty() {
            continue;
        }
        dropped = true;
        let what = format!("{} {} {}", chain.family, chain.table, chain.chain);
        let between = if bridged {
            ", and between pods on one bridge: br_netfilter hands bridged frames to it"
        } else {
            ""
        };
        let mut fixes: Vec<String> = missing
            .iter()
            .flat_map(|name| {
                [
                    format!("nft insert rule {what} iifname \"{name}\" accept"),
                    format!("nft insert rule {what} oifname \"{name}\" accept"),
                ]
            })
            .collect();
        fixes.push(
            "make them permanent where the firewall is configured (Docker: the DOCKER-USER \
             chain; firewalld: a trusted zone for the interfaces)"
                .to_owned(),
        );
        out.push(Finding::fail(
            CHECK,
            format!(
                "the forward chain {what} drops by default and accepts nothing of {}: it drops \
                 the pod traffic the node forwards (to and from the outside, between routed \
                 pods{between})",
                missing
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            fixes,
        ));
    }
    if !dropped {
        out.push(Finding::ok(
            CHECK,
            format!(
                "no forward chain drops the traffic of {}",
                interfaces.join(", ")
            ),
        ));
    }
}

/// Whether br_netfilter passes bridged IPv4 frames to the firewall in this namespace.
fn bridged_frames_filtered() -> bool {
    std::fs::read_to_string("/proc/sys/net/bridge/bridge-nf-call-iptables")
        .is_ok_and(|v| v.trim() == "1")
}

#[cfg(test)]
mod tests;
