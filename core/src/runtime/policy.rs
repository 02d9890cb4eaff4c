//! What `knictl policy` asks of the runtime: the NetworkPolicies knid knows and the pods of
//! this node each selects, and the check of one flow against them (`explain`).

use std::net::IpAddr;

use super::Runtime;
use crate::error::{Error, Result};
use crate::node::policy::compile::{compile, LocalPod};
use crate::node::policy::objects::{protocol_number, Key, World};
use crate::node::policy::{explain, local, Endpoint, Explanation, Summary};

/// One policy as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyEntry {
    /// Its namespace and name.
    pub key: Key,
    /// Its pod selector, as kubectl writes it.
    pub selector: String,
    /// Number of ingress rules when it isolates for ingress.
    pub ingress_rules: Option<usize>,
    /// Number of egress rules when it isolates for egress.
    pub egress_rules: Option<usize>,
    /// The pods of this node it selects (namespace/name).
    pub selects: Vec<Key>,
    /// Rules that could not be read (each allows nothing), by field.
    pub refused_rules: Vec<String>,
}

/// What `knictl policy ls` shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicyListing {
    /// Whether every watched kind has been listed since start.
    pub synced: bool,
    /// The last error applying the table.
    pub error: Option<String>,
    /// When the table last changed (ms since the epoch; 0: not since start).
    pub applied_at_ms: i64,
    /// Objects known: policies, namespaces, pods.
    pub counts: (usize, usize, usize),
    /// The policies (of the pod asked about, when one was).
    pub policies: Vec<PolicyEntry>,
    /// Policies not enforced at all, and why.
    pub refused: Vec<(Key, String)>,
    /// The kernel's table against what knid installed.
    pub kernel: KernelCheck,
}

/// The kernel's policy table against what knid installed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum KernelCheck {
    /// The same.
    #[default]
    Matches,
    /// knid has installed nothing yet (the objects are not all listed since start, and none
    /// were recorded).
    NotInstalled,
    /// They differ: what is missing or extra, in a few words.
    Differs(String),
    /// The kernel's table could not be read.
    Unreadable(String),
}

/// One end of a flow as `explain` resolved it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The pod, if the end is one.
    pub pod: Option<Key>,
    /// The address used.
    pub ip: IpAddr,
    /// Whether the pod runs on this node (its side is enforced here).
    pub local: bool,
    /// The node the pod runs on, as the API has it (`None` when the API does not know it).
    pub node: Option<String>,
}

/// What `knictl policy explain` shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyVerdict {
    /// The source.
    pub from: Resolved,
    /// The destination.
    pub to: Resolved,
    /// IP protocol number.
    pub protocol: u8,
    /// Destination port.
    pub port: u16,
    /// Each side's decision and the result.
    pub explanation: Explanation,
}

impl Runtime {
    fn policy_state(&self) -> Result<(Summary, Vec<LocalPod>)> {
        let Some(policies) = &self.ctx.policies else {
            return Err(Error::Unavailable(
                "NetworkPolicy is not enforced here: cluster mode is off or [cluster] \
                 network_policy = false"
                    .into(),
            ));
        };
        Ok((policies.summary(), local::pods(&self.ctx.store)?))
    }

    /// The policies knid knows, with the pods of this node each selects; with `pod`
    /// (`namespace/name`), only those selecting that pod.
    pub fn list_policies(&self, pod: Option<&str>) -> Result<PolicyListing> {
        let (summary, local) = self.policy_state()?;
        let world = &summary.world;
        // The pod asked about, with its labels (looked up once, not per policy).
        let wanted = match pod.map(|p| parse_pod(p, "pod")).transpose()? {
            Some(key) => {
                let labels = crate::node::policy::compile::pod_view(world, &local, &key)
                    .map(|p| p.labels)
                    .unwrap_or_default();
                Some((key, labels))
            }
            None => None,
        };
        let compiled = compile(world, &local);
        let mut policies = Vec::new();
        for (key, policy) in &world.policies {
            let selects: Vec<Key> = compiled
                .selected
                .values()
                .filter(|s| s.ingress.contains(key) || s.egress.contains(key))
                .map(|s| s.key.clone())
                .collect();
            if let Some((want, labels)) = &wanted {
                if policy.namespace != want.0 || !policy.selector.matches(labels) {
                    continue;
                }
            }
            policies.push(PolicyEntry {
                key: key.clone(),
                selector: policy.selector.describe(),
                ingress_rules: policy.ingress.as_ref().map(Vec::len),
                egress_rules: policy.egress.as_ref().map(Vec::len),
                selects,
                refused_rules: policy.refused.clone(),
            });
        }
        Ok(PolicyListing {
            synced: summary.synced,
            error: summary.error.clone(),
            applied_at_ms: summary.applied_at_ms,
            counts: (
                world.policies.len(),
                world.namespaces.len(),
                world.pods.len(),
            ),
            policies,
            refused: summary.refused.clone(),
            kernel: kernel_check(summary.installed.as_deref()),
        })
    }

    /// Checks a new connection from `from` to `to` (each `namespace/name` or an address) on
    /// `port` (`80/tcp`, `53/udp`, `9000/sctp`; TCP when no protocol is given).
    pub fn explain_policy(&self, from: &str, to: &str, port: &str) -> Result<PolicyVerdict> {
        let (summary, local) = self.policy_state()?;
        let world = &summary.world;
        let (port, protocol) = parse_port(port)?;
        let from_end = resolve(world, &local, from, "from", None)?;
        let to_end = resolve(world, &local, to, "to", Some(from_end.ip.is_ipv6()))?;
        // A pod named first picks its address of the other end's family.
        let from_end = match (&from_end.pod, from_end.ip.is_ipv6() == to_end.ip.is_ipv6()) {
            (Some(_), false) => resolve(world, &local, from, "from", Some(to_end.ip.is_ipv6()))?,
            _ => from_end,
        };
        if from_end.ip.is_ipv6() != to_end.ip.is_ipv6() {
            return Err(Error::InvalidArgument {
                field: "to".into(),
                rule: format!(
                    "{} and {} are of different families",
                    from_end.ip, to_end.ip
                ),
            });
        }
        let explanation = explain(
            world,
            &local,
            &Endpoint {
                pod: from_end.pod.clone(),
                ip: from_end.ip,
            },
            &Endpoint {
                pod: to_end.pod.clone(),
                ip: to_end.ip,
            },
            protocol,
            port,
        );
        Ok(PolicyVerdict {
            from: from_end,
            to: to_end,
            protocol,
            port,
            explanation,
        })
    }
}

/// The kernel's table (read now) against `installed`.
fn kernel_check(installed: Option<&knid_netops::nft::PolicyState>) -> KernelCheck {
    let Some(want) = installed else {
        return KernelCheck::NotInstalled;
    };
    let have = knid_netops::nft::Nft::open()
        .and_then(|mut nft| nft.policy_state(crate::node::policy::TABLE));
    match have {
        Err(e) => KernelCheck::Unreadable(e.to_string()),
        Ok(None) => KernelCheck::Differs(format!(
            "table inet {} is missing",
            crate::node::policy::TABLE
        )),
        Ok(Some(have)) if &have == want => KernelCheck::Matches,
        Ok(Some(have)) => {
            let missing_iso = want.isolated.difference(&have.isolated).count();
            let extra_iso = have.isolated.difference(&want.isolated).count();
            let missing = want.allows.difference(&have.allows).count();
            let extra = have.allows.difference(&want.allows).count();
            KernelCheck::Differs(format!(
                "{missing_iso} isolated pod direction(s) missing, {extra_iso} extra; {missing} \
                 allowed flow(s) missing, {extra} extra"
            ))
        }
    }
}

/// `namespace/name`, both parts non-empty; the error names `field`.
pub fn parse_pod(text: &str, field: &str) -> Result<Key> {
    match text.split_once('/') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok((ns.to_owned(), name.to_owned()))
        }
        _ => Err(Error::InvalidArgument {
            field: field.into(),
            rule: format!("{text:?} is not namespace/name"),
        }),
    }
}

/// `80/tcp` → (80, TCP): a port 1-65535 and `tcp`, `udp` or `sctp` in any case (TCP when
/// none is given); the error names `port`.
pub fn parse_port(text: &str) -> Result<(u16, u8)> {
    let bad = |rule: String| Error::InvalidArgument {
        field: "port".into(),
        rule,
    };
    let (number, protocol) = text.split_once('/').unwrap_or((text, "tcp"));
    let port: u16 = number
        .parse()
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| bad(format!("{number:?} is not a port (1-65535)")))?;
    let protocol = protocol_number(Some(&protocol.to_ascii_uppercase()))
        .ok_or_else(|| bad(format!("{protocol:?} is not tcp, udp or sctp")))?;
    Ok((port, protocol))
}

/// `text` (`namespace/name` or an address) as an end of a flow; a pod's address of family
/// `v6` when given.
fn resolve(
    world: &World,
    local: &[LocalPod],
    text: &str,
    field: &str,
    v6: Option<bool>,
) -> Result<Resolved> {
    if let Ok(ip) = text.parse::<IpAddr>() {
        let local_pod = local.iter().find(|l| l.ips.contains(&ip));
        let pod = local_pod.map(|l| l.key.clone()).or_else(|| {
            world
                .pods
                .iter()
                .find(|(_, p)| p.ips.contains(&ip))
                .map(|(k, _)| k.clone())
        });
        return Ok(Resolved {
            node: pod.as_ref().and_then(|k| node_of(world, k)),
            pod,
            ip,
            local: local_pod.is_some(),
        });
    }
    let key = parse_pod(text, field)?;
    let view = crate::node::policy::compile::pod_view(world, local, &key).ok_or_else(|| {
        Error::InvalidArgument {
            field: field.into(),
            rule: format!("pod {text} is not known (neither attached here nor in the API)"),
        }
    })?;
    let ip = view
        .ips
        .iter()
        .copied()
        .find(|ip| v6.is_none_or(|v6| ip.is_ipv6() == v6))
        .or_else(|| view.ips.first().copied())
        .ok_or_else(|| Error::InvalidArgument {
            field: field.into(),
            rule: format!("pod {text} has no address"),
        })?;
    Ok(Resolved {
        local: local.iter().any(|l| l.key == key),
        node: node_of(world, &key),
        pod: Some(key),
        ip,
    })
}

/// The node the API says `pod` runs on.
fn node_of(world: &World, pod: &Key) -> Option<String> {
    world
        .pods
        .get(pod)
        .map(|p| p.node.clone())
        .filter(|n| !n.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_and_pods_are_read_or_refused_by_field() {
        assert_eq!(parse_port("80").expect("80"), (80, 6));
        assert_eq!(parse_port("53/udp").expect("udp"), (53, 17));
        assert_eq!(parse_port("9/SCTP").expect("sctp"), (9, 132));
        for bad in ["0", "http", "80/icmp", "70000/tcp"] {
            let e = parse_port(bad).expect_err(bad).to_string();
            assert!(e.starts_with("invalid port:"), "{e}");
        }
        assert_eq!(
            parse_pod("x/a", "from").expect("pod"),
            ("x".into(), "a".into())
        );
        for bad in ["x", "/a", "x/", "x/a/b"] {
            let e = parse_pod(bad, "from").expect_err(bad).to_string();
            assert!(e.starts_with("invalid from:"), "{e}");
        }
    }
}
