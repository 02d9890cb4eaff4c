//! The requests that build a policy table or move it from one state to another, and its
//! elements read back.

use std::collections::BTreeMap;
use std::net::IpAddr;

use super::state::{Allow, Direction, PolicyState, PortRange};
use crate::nft::expr::{self, Expr, NFT_PAYLOAD_TRANSPORT_HEADER, REG32_00, REG_VERDICT};
use crate::nft::ruleset::{
    self, chain, concat_type, request, rule, set_elements, ElementData, SetElement, NLM_F_CREATE,
    TYPE_INET_PROTOCOL, TYPE_INET_SERVICE, TYPE_IP6ADDR, TYPE_IPADDR,
};
use crate::nft::wire::*;

const IPPROTO_ICMPV6: u8 = 58;
/// ICMPv6 types 133 to 137: router solicitation and advertisement, neighbour solicitation and
/// advertisement, redirect.
const ND_ROUTER_SOLICIT: u8 = 133;
const ND_REDIRECT: u8 = 137;

/// The base chain, on the forward hook.
pub(super) const CHAIN_FORWARD: &str = "forward";

/// The sets of one direction and family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum SetKind {
    /// Pods isolated: `ip saddr` (egress) or `ip daddr` (ingress).
    Isolated,
    /// pod . peer range, any protocol and port.
    Any,
    /// pod . peer range . protocol . port range.
    Ports,
    /// Verdict map: pod -> `goto` its drop chain.
    Drops,
}

impl SetKind {
    const ALL: [SetKind; 4] = [Self::Isolated, Self::Any, Self::Ports, Self::Drops];

    fn as_str(self) -> &'static str {
        match self {
            Self::Isolated => "isolated",
            Self::Any => "any",
            Self::Ports => "ports",
            Self::Drops => "drops",
        }
    }
}

fn family_suffix(v6: bool) -> char {
    if v6 {
        '6'
    } else {
        '4'
    }
}

/// `egress-any4`, `ingress-isolated6`, …
pub(super) fn set_name(kind: SetKind, direction: Direction, v6: bool) -> String {
    format!(
        "{}-{}{}",
        direction.as_str(),
        kind.as_str(),
        family_suffix(v6)
    )
}

/// `policy4`, `egress6`, …
fn family_chain(what: &str, v6: bool) -> String {
    format!("{what}{}", family_suffix(v6))
}

/// The chain counting a pod's dropped packets in one direction: `drop-egress-10.88.0.5`.
pub(super) fn drop_chain(direction: Direction, pod: IpAddr) -> String {
    format!("drop-{}-{pod}", direction.as_str())
}

/// The pod and direction of a drop chain's name.
pub(super) fn drop_chain_owner(name: &str) -> Option<(Direction, IpAddr)> {
    let rest = name.strip_prefix("drop-")?;
    Direction::ALL.into_iter().find_map(|d| {
        let pod = rest.strip_prefix(d.as_str())?.strip_prefix('-')?;
        Some((d, pod.parse().ok()?))
    })
}

/// The set's fields: nft's type id and length in bytes of each.
fn fields(kind: SetKind, v6: bool) -> Vec<(u32, u32)> {
    let addr = if v6 {
        (TYPE_IP6ADDR, 16)
    } else {
        (TYPE_IPADDR, 4)
    };
    match kind {
        SetKind::Isolated | SetKind::Drops => vec![addr],
        SetKind::Any => vec![addr, addr],
        SetKind::Ports => vec![addr, addr, (TYPE_INET_PROTOCOL, 1), (TYPE_INET_SERVICE, 2)],
    }
}

/// NEWSET of one set. A concatenation of ranges (interval, concat, the length of each field
/// in NFTA_SET_DESC_CONCAT) makes the kernel choose pipapo, which matches each field against
/// its own range; the key is each field padded to a 32-bit register.
pub(super) fn new_set(
    table: &str,
    kind: SetKind,
    direction: Direction,
    v6: bool,
    id: u32,
) -> Request {
    let fields = fields(kind, v6);
    let types: Vec<u32> = fields.iter().map(|f| f.0).collect();
    let key_len = fields.iter().map(|f| f.1.next_multiple_of(4)).sum();
    let flags = match kind {
        SetKind::Isolated => 0,
        SetKind::Drops => NFT_SET_MAP,
        SetKind::Any | SetKind::Ports => NFT_SET_INTERVAL | NFT_SET_CONCAT,
    };
    let mut a = Attrs::default();
    a.str(NFTA_SET_TABLE, table)
        .str(NFTA_SET_NAME, &set_name(kind, direction, v6))
        .be32(NFTA_SET_FLAGS, flags)
        .be32(NFTA_SET_KEY_TYPE, concat_type(&types))
        .be32(NFTA_SET_KEY_LEN, key_len);
    if kind == SetKind::Drops {
        a.be32(NFTA_SET_DATA_TYPE, NFT_DATA_VERDICT);
    }
    a.be32(NFTA_SET_ID, id);
    if fields.len() > 1 {
        a.nested(NFTA_SET_DESC, |d| {
            d.nested(NFTA_SET_DESC_CONCAT, |c| {
                for (_, len) in &fields {
                    c.nested(NFTA_LIST_ELEM, |e| {
                        e.be32(NFTA_SET_FIELD_LEN, *len);
                    });
                }
            });
        });
    }
    request(NFT_MSG_NEWSET, NLM_F_CREATE, a)
}

/// The rules of one family: `policy<f>` sends isolated pods' packets through `egress<f>` and
/// `ingress<f>`, each of which returns when a lookup allows the packet and drops it otherwise.
/// The pod's address is the key's first field in both directions.
pub(super) fn family_rules(table: &str, v6: bool) -> Vec<Request> {
    let regs_per_addr = if v6 { 4 } else { 1 };
    let policy = family_chain("policy", v6);
    let mut out = Vec::new();
    if v6 {
        // Neighbour discovery between pods on one bridge passes the forward hook too
        // (br_netfilter), untracked: a pod isolated either way must still resolve and answer.
        let mut nd = expr::l4proto_is(IPPROTO_ICMPV6);
        nd.extend(expr::field_between(
            NFT_PAYLOAD_TRANSPORT_HEADER,
            0,
            &[ND_ROUTER_SOLICIT],
            &[ND_REDIRECT],
        ));
        nd.push(expr::accept());
        out.push(rule(table, &policy, nd));
    }
    for direction in [Direction::Egress, Direction::Ingress] {
        let pod_is_source = direction == Direction::Egress;
        let set = |kind| set_name(kind, direction, v6);
        let chain = family_chain(direction.as_str(), v6);
        out.push(rule(
            table,
            &policy,
            vec![
                expr::addr_load(v6, pod_is_source, REG32_00),
                expr::lookup(&set(SetKind::Isolated), None),
                expr::jump(&chain),
            ],
        ));
        let pod_and_peer = || {
            vec![
                expr::addr_load(v6, pod_is_source, REG32_00),
                expr::addr_load(v6, !pod_is_source, REG32_00 + regs_per_addr),
            ]
        };
        let mut any = pod_and_peer();
        any.extend([expr::lookup(&set(SetKind::Any), None), expr::ret()]);
        let mut ports = pod_and_peer();
        ports.extend(expr::l4proto_and_dport_load(REG32_00 + 2 * regs_per_addr));
        ports.extend([expr::lookup(&set(SetKind::Ports), None), expr::ret()]);
        let count: Vec<Expr> = vec![
            expr::addr_load(v6, pod_is_source, REG32_00),
            expr::lookup(&set(SetKind::Drops), Some(REG_VERDICT)),
        ];
        for exprs in [any, ports, count, vec![expr::drop_packet()]] {
            out.push(rule(table, &chain, exprs));
        }
    }
    out
}

/// The requests that replace table `table` by `state` (normalized) in one transaction.
pub(super) fn replace(table: &str, state: &PolicyState) -> Vec<Request> {
    // Added before it is deleted, so the delete cannot fail; nothing of another table is
    // touched.
    let mut out = ruleset::delete(table);
    out.push(request(
        NFT_MSG_NEWTABLE,
        NLM_F_CREATE,
        ruleset::table_attrs(table),
    ));
    let mut id = 0;
    for v6 in [false, true] {
        for direction in Direction::ALL {
            for kind in SetKind::ALL {
                id += 1;
                out.push(new_set(table, kind, direction, v6, id));
            }
        }
    }
    out.push(chain(
        table,
        CHAIN_FORWARD,
        Some(("filter", NF_INET_FORWARD, 0)),
    ));
    for v6 in [false, true] {
        for what in ["policy", "egress", "ingress"] {
            out.push(chain(table, &family_chain(what, v6), None));
        }
    }
    let mut established = expr::ct_established_or_related();
    established.push(expr::accept());
    out.push(rule(table, CHAIN_FORWARD, established));
    for v6 in [false, true] {
        let mut to_family = expr::family_is(v6);
        to_family.push(expr::jump(&family_chain("policy", v6)));
        out.push(rule(table, CHAIN_FORWARD, to_family));
    }
    for v6 in [false, true] {
        out.extend(family_rules(table, v6));
    }
    out.extend(changes(table, &PolicyState::default(), state));
    out
}

/// The requests that move the table from `from` to `to` (both normalized): the elements and
/// drop chains of `from` only go first, so a new element may take the place of an old one
/// it overlaps; then those of `to` only come.
pub(super) fn changes(table: &str, from: &PolicyState, to: &PolicyState) -> Vec<Request> {
    let mut out = Vec::new();
    let gone: Vec<(Direction, IpAddr)> = from.isolated.difference(&to.isolated).copied().collect();
    let come: Vec<(Direction, IpAddr)> = to.isolated.difference(&from.isolated).copied().collect();
    out.extend(allow_elements(
        table,
        from.allows.difference(&to.allows),
        false,
    ));
    out.extend(isolation_elements(table, &gone, false));
    for (direction, pod) in &gone {
        let mut a = Attrs::default();
        a.str(NFTA_CHAIN_TABLE, table)
            .str(NFTA_CHAIN_NAME, &drop_chain(*direction, *pod));
        out.push(request(NFT_MSG_DESTROYCHAIN, 0, a));
    }
    for (direction, pod) in &come {
        let name = drop_chain(*direction, *pod);
        out.push(chain(table, &name, None));
        out.push(rule(
            table,
            &name,
            vec![expr::counter(), expr::drop_packet()],
        ));
    }
    out.extend(isolation_elements(table, &come, true));
    out.extend(allow_elements(
        table,
        to.allows.difference(&from.allows),
        true,
    ));
    out
}

/// The isolation elements of `pods` and their drop-counting map elements.
fn isolation_elements(table: &str, pods: &[(Direction, IpAddr)], add: bool) -> Vec<Request> {
    let mut sets: BTreeMap<String, Vec<SetElement>> = BTreeMap::new();
    for (direction, pod) in pods {
        let key = expr::addr_bytes(*pod);
        let v6 = pod.is_ipv6();
        sets.entry(set_name(SetKind::Isolated, *direction, v6))
            .or_default()
            .push(SetElement {
                key: key.clone(),
                key_end: None,
                data: None,
            });
        sets.entry(set_name(SetKind::Drops, *direction, v6))
            .or_default()
            .push(SetElement {
                key,
                key_end: None,
                data: Some(ElementData::Goto(drop_chain(*direction, *pod))),
            });
    }
    sets.into_iter()
        .flat_map(|(set, elements)| set_elements(table, &set, add, elements))
        .collect()
}

/// The interval elements of `allows`, by set.
fn allow_elements<'a>(
    table: &str,
    allows: impl Iterator<Item = &'a Allow>,
    add: bool,
) -> Vec<Request> {
    let mut sets: BTreeMap<String, Vec<SetElement>> = BTreeMap::new();
    for a in allows {
        let (kind, element) = allow_element(a);
        sets.entry(set_name(kind, a.direction, a.pod.is_ipv6()))
            .or_default()
            .push(element);
    }
    sets.into_iter()
        .flat_map(|(set, elements)| set_elements(table, &set, add, elements))
        .collect()
}

/// The element of one allow: pod . first peer [. protocol . first port] to pod . last peer
/// [. protocol . last port], each field padded to 4 bytes.
pub(super) fn allow_element(a: &Allow) -> (SetKind, SetElement) {
    let mut key = expr::addr_bytes(a.pod);
    let mut end = key.clone();
    key.extend(expr::addr_bytes(a.peers.0));
    end.extend(expr::addr_bytes(a.peers.1));
    let Some(p) = a.ports else {
        return (
            SetKind::Any,
            SetElement {
                key,
                key_end: Some(end),
                data: None,
            },
        );
    };
    for (bytes, port) in [(&mut key, p.first), (&mut end, p.last)] {
        bytes.extend([p.protocol, 0, 0, 0]);
        bytes.extend(port.to_be_bytes());
        bytes.extend([0, 0]);
    }
    (
        SetKind::Ports,
        SetElement {
            key,
            key_end: Some(end),
            data: None,
        },
    )
}

/// An address from the start of `bytes`.
pub(super) fn addr_from(bytes: &[u8], v6: bool) -> Option<IpAddr> {
    Some(if v6 {
        IpAddr::from(<[u8; 16]>::try_from(bytes.get(..16)?).ok()?)
    } else {
        IpAddr::from(<[u8; 4]>::try_from(bytes.get(..4)?).ok()?)
    })
}

/// The allow an element of an `any` or `ports` set stands for.
pub(super) fn allow_from(
    kind: SetKind,
    direction: Direction,
    v6: bool,
    e: &SetElement,
) -> Option<Allow> {
    let alen = if v6 { 16 } else { 4 };
    let end = e.key_end.as_deref().unwrap_or(&e.key);
    let pod = addr_from(&e.key, v6)?;
    let peers = (
        addr_from(e.key.get(alen..)?, v6)?,
        addr_from(end.get(alen..)?, v6)?,
    );
    let ports = match kind {
        SetKind::Ports => {
            let port = |b: &[u8]| -> Option<u16> {
                Some(u16::from_be_bytes([
                    *b.get(2 * alen + 4)?,
                    *b.get(2 * alen + 5)?,
                ]))
            };
            Some(PortRange {
                protocol: *e.key.get(2 * alen)?,
                first: port(&e.key)?,
                last: port(end)?,
            })
        }
        _ => None,
    };
    Some(Allow {
        direction,
        pod,
        peers,
        ports,
    })
}
