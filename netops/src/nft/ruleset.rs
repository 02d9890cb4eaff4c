//! What knid's own table holds, in this crate's terms, and the requests that build it or
//! change its port-mapping elements.

use std::net::{IpAddr, Ipv4Addr};

use ipnet::{IpNet, Ipv4Net};

use super::expr::{self, Expr};
use super::wire::*;

/// The packet-mark bit of connections to a host port whose source is a pod of the node or the
/// node's loopback: their replies must come back through the node, so `postrouting`
/// masquerades them. CNI portmap's default (`markMasqBit` 13), clear of kube-proxy's 0x4000
/// and 0x8000.
pub const HAIRPIN_MARK: u32 = 0x2000;

/// The base chains and regular chains of the table.
pub const CHAIN_PREROUTING: &str = "prerouting";
/// Locally generated traffic to a host port.
pub const CHAIN_OUTPUT: &str = "output";
/// Masquerade.
pub const CHAIN_POSTROUTING: &str = "postrouting";
/// The host-port lookups, jumped to for traffic to a local address.
pub const CHAIN_HOSTPORTS: &str = "hostports";

/// The per-network masquerade chain's name.
pub fn masquerade_chain(network: &str) -> String {
    format!("masq-{network}")
}

/// The four maps of host ports: (name, IPv6, keyed by the host address too).
pub const PORT_MAPS: [(&str, bool, bool); 4] = [
    ("hostports4-ip", false, true),
    ("hostports4", false, false),
    ("hostports6-ip", true, true),
    ("hostports6", true, false),
];

/// Egress masquerade of one network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Masquerade {
    /// Names its chain (`masq-<name>`).
    pub name: String,
    /// Sources masqueraded: the network's subnets.
    pub sources: Vec<IpNet>,
    /// Destinations left alone (the network's subnets, configured ones).
    pub except: Vec<IpNet>,
}

/// A transport protocol of a port mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
    /// SCTP.
    Sctp,
}

impl Protocol {
    /// The IP protocol number.
    pub fn number(self) -> u8 {
        match self {
            Self::Tcp => 6,
            Self::Udp => 17,
            Self::Sctp => 132,
        }
    }

    fn from_number(n: u8) -> Option<Self> {
        match n {
            6 => Some(Self::Tcp),
            17 => Some(Self::Udp),
            132 => Some(Self::Sctp),
            _ => None,
        }
    }
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Tcp => "tcp",
            Self::Udp => "udp",
            Self::Sctp => "sctp",
        })
    }
}

/// One host port forwarded to a pod address: one map element.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PortMap {
    /// Protocol.
    pub protocol: Protocol,
    /// The node address it is reachable on; every local address when `None`.
    pub host_ip: Option<IpAddr>,
    /// Host port.
    pub host_port: u16,
    /// The pod address; its family picks the map.
    pub target: IpAddr,
    /// The pod's port.
    pub target_port: u16,
}

/// `tcp/8080 -> 10.88.0.5:80`, `udp/53 on 192.0.2.1 -> 10.88.0.5:53`.
impl std::fmt::Display for PortMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.protocol, self.host_port)?;
        if let Some(ip) = self.host_ip {
            write!(f, " on {ip}")?;
        }
        write!(
            f,
            " -> {}",
            std::net::SocketAddr::new(self.target, self.target_port)
        )
    }
}

impl PortMap {
    /// The map this element lives in.
    pub fn map_name(&self) -> &'static str {
        let v6 = self.target.is_ipv6();
        let with_ip = self.host_ip.is_some();
        PORT_MAPS
            .iter()
            .find(|(_, six, ip)| *six == v6 && *ip == with_ip)
            .map(|(name, ..)| *name)
            .unwrap_or("hostports4")
    }

    fn key(&self) -> Vec<u8> {
        let mut key = self.host_ip.map(expr::addr_bytes).unwrap_or_default();
        key.extend_from_slice(&[self.protocol.number(), 0, 0, 0]);
        key.extend_from_slice(&self.host_port.to_be_bytes());
        key.extend_from_slice(&[0, 0]);
        key
    }

    fn value(&self) -> Vec<u8> {
        let mut value = expr::addr_bytes(self.target);
        value.extend_from_slice(&self.target_port.to_be_bytes());
        value.extend_from_slice(&[0, 0]);
        value
    }

    #[cfg(test)]
    pub(crate) fn key_for_test(&self) -> Vec<u8> {
        self.key()
    }

    #[cfg(test)]
    pub(crate) fn value_for_test(&self) -> Vec<u8> {
        self.value()
    }

    /// Reads an element of map `set` back.
    pub(crate) fn from_element(set: &str, key: &[u8], value: &[u8]) -> Option<Self> {
        let (_, v6, with_ip) = PORT_MAPS.iter().find(|(name, ..)| *name == set)?;
        let alen = if *v6 { 16 } else { 4 };
        let ip = |b: &[u8]| -> Option<IpAddr> {
            Some(if *v6 {
                IpAddr::from(<[u8; 16]>::try_from(b).ok()?)
            } else {
                IpAddr::from(<[u8; 4]>::try_from(b).ok()?)
            })
        };
        let (host_ip, rest) = if *with_ip {
            (Some(ip(key.get(..alen)?)?), key.get(alen..)?)
        } else {
            (None, key)
        };
        let protocol = Protocol::from_number(*rest.first()?)?;
        let host_port = u16::from_be_bytes([*rest.get(4)?, *rest.get(5)?]);
        let target = ip(value.get(..alen)?)?;
        let target_port = u16::from_be_bytes([*value.get(alen)?, *value.get(alen + 1)?]);
        Some(Self {
            protocol,
            host_ip,
            host_port,
            target,
            target_port,
        })
    }
}

/// Everything knid's table holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ruleset {
    /// The table's name (family `inet`).
    pub table: String,
    /// Egress masquerade, per network.
    pub masquerade: Vec<Masquerade>,
    /// Sources of hairpin traffic to host ports (every pod subnet; 127.0.0.0/8 is added).
    pub hairpin_sources: Vec<IpNet>,
    /// The host ports.
    pub port_maps: Vec<PortMap>,
}

pub(crate) fn table_attrs(table: &str) -> Attrs {
    let mut a = Attrs::default();
    a.str(NFTA_TABLE_NAME, table);
    a
}

/// A request of the `inet` family.
pub(crate) fn request(kind: u16, flags: u16, attrs: Attrs) -> Request {
    Request {
        kind,
        flags,
        family: NFPROTO_INET,
        attrs,
    }
}

pub(crate) const NLM_F_CREATE: u16 = 0x400;
/// NLM_F_APPEND: a new rule goes after the chain's others.
const NLM_F_APPEND: u16 = 0x800;

/// Where a base chain hooks: the chain type (`nat`, `filter`), NF_INET_* hook, priority. Its
/// policy is accept.
pub(crate) type Hook = (&'static str, u32, i32);

/// A regular chain, or with `hook` a base chain.
pub(crate) fn chain(table: &str, name: &str, hook: Option<Hook>) -> Request {
    let mut a = Attrs::default();
    a.str(NFTA_CHAIN_TABLE, table).str(NFTA_CHAIN_NAME, name);
    if let Some((kind, hooknum, priority)) = hook {
        a.nested(NFTA_CHAIN_HOOK, |h| {
            h.be32(NFTA_HOOK_HOOKNUM, hooknum)
                .be32(NFTA_HOOK_PRIORITY, priority as u32);
        });
        a.be32(NFTA_CHAIN_POLICY, NF_ACCEPT)
            .str(NFTA_CHAIN_TYPE, kind);
    }
    request(NFT_MSG_NEWCHAIN, NLM_F_CREATE, a)
}

/// A rule appended to `chain`.
pub(crate) fn rule(table: &str, chain: &str, exprs: Vec<Expr>) -> Request {
    let mut a = Attrs::default();
    a.str(NFTA_RULE_TABLE, table).str(NFTA_RULE_CHAIN, chain);
    expr::list(&mut a, NFTA_RULE_EXPRESSIONS, &exprs);
    request(NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND, a)
}

/// nft's datatype ids (TYPE_* of nftables' datatype.h), joined as concatenations are (6 bits
/// each): only `nft list` reads them.
pub(crate) fn concat_type(types: &[u32]) -> u32 {
    types.iter().fold(0, |acc, t| (acc << 6) | t)
}
pub(crate) const TYPE_IPADDR: u32 = 7;
pub(crate) const TYPE_IP6ADDR: u32 = 8;
pub(crate) const TYPE_INET_PROTOCOL: u32 = 12;
pub(crate) const TYPE_INET_SERVICE: u32 = 13;

fn map(table: &str, name: &str, v6: bool, with_ip: bool, id: u32) -> Request {
    let (addr_type, alen) = if v6 {
        (TYPE_IP6ADDR, 16)
    } else {
        (TYPE_IPADDR, 4)
    };
    let mut key_types = Vec::new();
    let mut key_len = 8;
    if with_ip {
        key_types.push(addr_type);
        key_len += alen;
    }
    key_types.extend([TYPE_INET_PROTOCOL, TYPE_INET_SERVICE]);
    let mut a = Attrs::default();
    a.str(NFTA_SET_TABLE, table)
        .str(NFTA_SET_NAME, name)
        .be32(NFTA_SET_FLAGS, NFT_SET_MAP)
        .be32(NFTA_SET_KEY_TYPE, concat_type(&key_types))
        .be32(NFTA_SET_KEY_LEN, key_len)
        .be32(
            NFTA_SET_DATA_TYPE,
            concat_type(&[addr_type, TYPE_INET_SERVICE]),
        )
        .be32(NFTA_SET_DATA_LEN, alen + 4)
        .be32(NFTA_SET_ID, id);
    request(NFT_MSG_NEWSET, NLM_F_CREATE, a)
}

/// One element of a set or map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SetElement {
    /// Its key (each field of a concatenation padded to 4 bytes).
    pub(crate) key: Vec<u8>,
    /// The last key of its range, in an interval set.
    pub(crate) key_end: Option<Vec<u8>>,
    /// Its value, in a map (left out of a delete).
    pub(crate) data: Option<ElementData>,
}

/// The value of a map element.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ElementData {
    /// Bytes (a data map).
    Value(Vec<u8>),
    /// `goto <chain>` (a verdict map).
    Goto(String),
}

/// Elements per request stay below this many bytes: NFTA_SET_ELEM_LIST_ELEMENTS is one
/// attribute, whose length is 16 bits.
const ELEMENTS_PER_REQUEST_BYTES: usize = 60 * 1024;

/// The requests that add (`NEWSETELEM`) or delete (`DELSETELEM`) `elements` of set `set`:
/// one, or more when they do not fit in one attribute.
pub(crate) fn set_elements(
    table: &str,
    set: &str,
    add: bool,
    elements: impl IntoIterator<Item = SetElement>,
) -> Vec<Request> {
    let (kind, flags) = if add {
        // Without NLM_F_EXCL an identical element is accepted (a replayed attach); one with
        // other data is refused (EEXIST).
        (NFT_MSG_NEWSETELEM, NLM_F_CREATE)
    } else {
        (NFT_MSG_DELSETELEM, 0)
    };
    let flush = |list: &mut Attrs, out: &mut Vec<Request>| {
        let mut a = Attrs::default();
        a.str(NFTA_SET_ELEM_LIST_TABLE, table)
            .str(NFTA_SET_ELEM_LIST_SET, set)
            .nested(NFTA_SET_ELEM_LIST_ELEMENTS, |l| {
                l.0.append(&mut list.0);
            });
        out.push(request(kind, flags, a));
    };
    let mut out = Vec::new();
    let mut list = Attrs::default();
    for element in elements {
        let mut one = Attrs::default();
        one.nested(NFTA_LIST_ELEM, |e| {
            e.data(NFTA_SET_ELEM_KEY, &element.key);
            if let Some(end) = &element.key_end {
                e.data(NFTA_SET_ELEM_KEY_END, end);
            }
            match (&element.data, add) {
                (Some(ElementData::Value(v)), true) => {
                    e.data(NFTA_SET_ELEM_DATA, v);
                }
                (Some(ElementData::Goto(chain)), true) => {
                    e.verdict(NFTA_SET_ELEM_DATA, expr::NFT_GOTO, Some(chain));
                }
                _ => {}
            }
        });
        if !list.0.is_empty() && list.0.len() + one.0.len() > ELEMENTS_PER_REQUEST_BYTES {
            flush(&mut list, &mut out);
        }
        list.0.append(&mut one.0);
    }
    if !list.0.is_empty() {
        flush(&mut list, &mut out);
    }
    out
}

/// The requests that add or delete `maps`' elements, one request per map touched.
pub(crate) fn elements(table: &str, maps: &[PortMap], add: bool) -> Vec<Request> {
    let mut out = Vec::new();
    for (set, ..) in PORT_MAPS {
        let mine = maps
            .iter()
            .filter(|m| m.map_name() == set)
            .map(|m| SetElement {
                key: m.key(),
                key_end: None,
                data: Some(ElementData::Value(m.value())),
            });
        out.extend(set_elements(table, set, add, mine));
    }
    out
}

/// The requests that replace the table by `ruleset` in one transaction: add (so the delete
/// cannot fail), delete, then build it again. Nothing of another table is touched.
pub(crate) fn replace(ruleset: &Ruleset) -> Vec<Request> {
    let t = ruleset.table.as_str();
    let mut out = vec![
        request(NFT_MSG_NEWTABLE, NLM_F_CREATE, table_attrs(t)),
        request(NFT_MSG_DELTABLE, 0, table_attrs(t)),
        request(NFT_MSG_NEWTABLE, NLM_F_CREATE, table_attrs(t)),
    ];
    for (id, (name, v6, with_ip)) in PORT_MAPS.into_iter().enumerate() {
        out.push(map(t, name, v6, with_ip, id as u32 + 1));
    }
    // Priorities: dstnat (-100) and srcnat (100), where nat chains usually sit.
    out.push(chain(
        t,
        CHAIN_PREROUTING,
        Some(("nat", NF_INET_PRE_ROUTING, -100)),
    ));
    out.push(chain(
        t,
        CHAIN_OUTPUT,
        Some(("nat", NF_INET_LOCAL_OUT, -100)),
    ));
    out.push(chain(t, CHAIN_HOSTPORTS, None));
    out.push(chain(
        t,
        CHAIN_POSTROUTING,
        Some(("nat", NF_INET_POST_ROUTING, 100)),
    ));
    for m in &ruleset.masquerade {
        out.push(chain(t, &masquerade_chain(&m.name), None));
    }
    for base in [CHAIN_PREROUTING, CHAIN_OUTPUT] {
        let mut e = expr::daddr_local();
        e.push(expr::jump(CHAIN_HOSTPORTS));
        out.push(rule(t, base, e));
    }
    // Locally generated connections from 127.0.0.1 (IPv4 only: the kernel never routes ::1
    // off the node) are masqueraded to the node's address on the pod's side.
    let loopback = Ipv4Net::new(Ipv4Addr::new(127, 0, 0, 0), 8)
        .ok()
        .map(IpNet::V4);
    for source in ruleset.hairpin_sources.iter().chain(loopback.iter()) {
        let mut e = expr::addr_in(source, true);
        e.extend(expr::mark_set(HAIRPIN_MARK));
        out.push(rule(t, CHAIN_HOSTPORTS, e));
    }
    for (name, v6, with_ip) in PORT_MAPS {
        out.push(rule(
            t,
            CHAIN_HOSTPORTS,
            expr::dnat_lookup(name, v6, with_ip),
        ));
    }
    let mut hairpin = expr::mark_has(HAIRPIN_MARK);
    hairpin.extend(expr::ct_dnat());
    hairpin.push(expr::masquerade());
    out.push(rule(t, CHAIN_POSTROUTING, hairpin));
    for m in &ruleset.masquerade {
        let chain_name = masquerade_chain(&m.name);
        for source in &m.sources {
            let mut e = expr::addr_in(source, true);
            e.push(expr::jump(&chain_name));
            out.push(rule(t, CHAIN_POSTROUTING, e));
        }
        for except in m.except.iter().chain(never_masqueraded().iter()) {
            let mut e = expr::addr_in(except, false);
            e.push(expr::ret());
            out.push(rule(t, &chain_name, e));
        }
        out.push(rule(t, &chain_name, vec![expr::masquerade()]));
    }
    out.extend(elements(t, &ruleset.port_maps, true));
    out
}

/// Destinations no masquerade applies to: multicast, link-local, the IPv4 broadcast.
pub fn never_masqueraded() -> Vec<IpNet> {
    [
        "224.0.0.0/4",
        "169.254.0.0/16",
        "255.255.255.255/32",
        "ff00::/8",
        "fe80::/10",
    ]
    .iter()
    .filter_map(|n| n.parse().ok())
    .collect()
}

/// The request that deletes the table.
pub(crate) fn delete(table: &str) -> Vec<Request> {
    vec![
        request(NFT_MSG_NEWTABLE, NLM_F_CREATE, table_attrs(table)),
        request(NFT_MSG_DELTABLE, 0, table_attrs(table)),
    ]
}

/// The dump request of a table's chains, or of one set's elements.
pub(crate) fn dump_chains(table: &str) -> Request {
    request(NFT_MSG_GETCHAIN, 0, table_attrs_chain(table))
}

fn table_attrs_chain(table: &str) -> Attrs {
    let mut a = Attrs::default();
    a.str(NFTA_CHAIN_TABLE, table);
    a
}

/// GETTABLE of one table (not a dump).
pub(crate) fn get_table(table: &str) -> Request {
    request(NFT_MSG_GETTABLE, 0, table_attrs(table))
}

/// Dumps the elements of set `set`.
pub(crate) fn dump_elements(table: &str, set: &str) -> Request {
    let mut a = Attrs::default();
    a.str(NFTA_SET_ELEM_LIST_TABLE, table)
        .str(NFTA_SET_ELEM_LIST_SET, set);
    request(NFT_MSG_GETSETELEM, 0, a)
}
