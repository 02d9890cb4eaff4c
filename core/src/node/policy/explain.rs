//! The answer to "why was this connection refused?": one flow (source, destination, protocol,
//! port) checked against the compiled rules of both its ends, naming the policy and rule that
//! let it through on each side, or the policies that isolate the side that refuses it.

use std::fmt;
use std::net::IpAddr;

use super::compile::{compile_for, Compiled, Direction, LocalPod};
use super::objects::{Key, World};
use super::ranges;

/// One end of a flow: a pod (when known) and the address used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The pod, when the address is a known pod's.
    pub pod: Option<Key>,
    /// The address.
    pub ip: IpAddr,
}

/// What one side of a flow decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Side {
    /// The end is not a pod policy knows of (an address outside the cluster's pods, the node).
    NotAPod,
    /// No policy selects the pod for this direction: it is open.
    NotIsolated,
    /// Allowed by this policy's rule (its index among the direction's rules).
    Allowed {
        /// The policy.
        policy: Key,
        /// The rule.
        rule: usize,
    },
    /// The pod is isolated by these policies and none of their rules allows the flow.
    Denied {
        /// The isolating policies.
        by: Vec<Key>,
    },
}

impl Side {
    fn passes(&self) -> bool {
        !matches!(self, Side::Denied { .. })
    }
}

/// The answer for one flow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    /// The source pod's egress.
    pub egress: Side,
    /// The destination pod's ingress.
    pub ingress: Side,
    /// Whether the flow may start.
    pub allowed: bool,
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Side::NotAPod => write!(f, "not a pod: no policy applies"),
            Side::NotIsolated => write!(f, "no policy selects the pod: open"),
            Side::Allowed { policy, rule } => {
                write!(f, "allowed by {}/{} rule {rule}", policy.0, policy.1)
            }
            Side::Denied { by } => {
                let names: Vec<String> = by.iter().map(|k| format!("{}/{}", k.0, k.1)).collect();
                write!(
                    f,
                    "denied: isolated by {} and no rule allows it",
                    names.join(", ")
                )
            }
        }
    }
}

/// Checks `protocol`/`port` from `from` to `to`.
pub fn explain(
    world: &World,
    local: &[LocalPod],
    from: &Endpoint,
    to: &Endpoint,
    protocol: u8,
    port: u16,
) -> Explanation {
    let egress = side(world, local, from, to.ip, Direction::Egress, protocol, port);
    let ingress = side(
        world,
        local,
        to,
        from.ip,
        Direction::Ingress,
        protocol,
        port,
    );
    let allowed = egress.passes() && ingress.passes();
    Explanation {
        egress,
        ingress,
        allowed,
    }
}

/// What `end`'s policies of `direction` say of the flow with `peer`.
fn side(
    world: &World,
    local: &[LocalPod],
    end: &Endpoint,
    peer: IpAddr,
    direction: Direction,
    protocol: u8,
    port: u16,
) -> Side {
    let Some(key) = &end.pod else {
        return Side::NotAPod;
    };
    let labels = super::compile::pod_view(world, local, key)
        .map(|p| p.labels)
        .unwrap_or_default();
    let target = LocalPod {
        sandbox: String::new(),
        key: key.clone(),
        labels,
        ips: vec![end.ip],
    };
    let compiled = compile_for(world, local, std::slice::from_ref(&target));
    decide(&compiled, end.ip, peer, direction, protocol, port)
}

/// The decision of `compiled` on one flow of the pod at `pod`.
pub fn decide(
    compiled: &Compiled,
    pod: IpAddr,
    peer: IpAddr,
    direction: Direction,
    protocol: u8,
    port: u16,
) -> Side {
    if !compiled.isolated.contains(&(direction, pod)) {
        return Side::NotIsolated;
    }
    let allowing = compiled.grants.iter().find(|g| {
        g.direction == direction
            && g.pod == pod
            && ranges::contains(&g.peers, peer)
            && g.ports.is_none_or(|(proto, first, last)| {
                proto == protocol && first <= port && port <= last
            })
    });
    match allowing {
        Some(g) => Side::Allowed {
            policy: compiled.policies[g.origin.0].clone(),
            rule: g.origin.1,
        },
        None => {
            let by = compiled
                .selected
                .values()
                .flat_map(|s| match direction {
                    Direction::Ingress => s.ingress.iter(),
                    Direction::Egress => s.egress.iter(),
                })
                .cloned()
                .collect();
            Side::Denied { by }
        }
    }
}
