//! The nf_tables expressions knid's rules are made of, each as the kernel reads it (the
//! `nft --debug=netlink` listing of the same rule is its reference).

use std::net::IpAddr;

use ipnet::IpNet;
use netlink_packet_core::NLA_F_NESTED;

use super::wire::{
    Attrs, NFPROTO_IPV4, NFPROTO_IPV6, NFTA_DATA_VALUE, NFTA_EXPR_DATA, NFTA_EXPR_NAME,
    NFTA_LIST_ELEM,
};

/// The verdict register, and the first 32-bit data register (NFT_REG32_00).
pub(crate) const REG_VERDICT: u32 = 0;
pub(crate) const REG32_00: u32 = 8;

const NFT_META_PROTOCOL: u32 = 1;
const NFT_META_MARK: u32 = 3;
const NFT_META_NFPROTO: u32 = 15;
const NFT_META_L4PROTO: u32 = 16;
/// Where a payload expression reads: the link-layer, network or transport header.
pub(crate) const NFT_PAYLOAD_LL_HEADER: u32 = 0;
pub(crate) const NFT_PAYLOAD_NETWORK_HEADER: u32 = 1;
pub(crate) const NFT_PAYLOAD_TRANSPORT_HEADER: u32 = 2;
const NFT_CMP_EQ: u32 = 0;
const NFT_CMP_NEQ: u32 = 1;
const NFT_CMP_LTE: u32 = 3;
const NFT_CMP_GTE: u32 = 5;
const NFT_CT_STATE: u32 = 0;
const NFT_CT_STATUS: u32 = 2;
/// NF_CT_STATE_BIT(IP_CT_ESTABLISHED) | NF_CT_STATE_BIT(IP_CT_RELATED).
const CT_STATE_ESTABLISHED_RELATED: u32 = 0x2 | 0x4;
/// IPS_DST_NAT: the connection's destination was translated.
const IPS_DST_NAT: u32 = 0x20;
const NFT_FIB_RESULT_ADDRTYPE: u32 = 3;
const NFTA_FIB_F_DADDR: u32 = 2;
const RTN_LOCAL: u32 = 2;
const NFT_JUMP: i32 = -3;
pub(crate) const NFT_GOTO: i32 = -4;
const NFT_RETURN: i32 = -5;
const NFT_NAT_DNAT: u32 = 1;
/// NF_NAT_RANGE_MAP_IPS | NF_NAT_RANGE_PROTO_SPECIFIED.
const NAT_RANGE_FLAGS: u32 = 0x1 | 0x2;

/// One expression: its name and its attributes.
#[derive(Debug, Clone)]
pub(crate) struct Expr {
    name: &'static str,
    data: Attrs,
}

/// What one expression's attributes take at most, but for a long `cmp` or `immediate`.
const EXPR_BYTES: usize = 64;

fn expr(name: &'static str, fill: impl FnOnce(&mut Attrs)) -> Expr {
    let mut data = Attrs(Vec::with_capacity(EXPR_BYTES));
    fill(&mut data);
    Expr { name, data }
}

/// NFTA_RULE_EXPRESSIONS of a rule made of `exprs`.
pub(crate) fn list(attrs: &mut Attrs, kind: u16, exprs: &[Expr]) {
    attrs.nested(kind, |l| {
        for e in exprs {
            l.nested(NFTA_LIST_ELEM, |one| {
                one.str(NFTA_EXPR_NAME, e.name);
                if !e.data.0.is_empty() {
                    one.bytes(NFTA_EXPR_DATA | NLA_F_NESTED, &e.data.0);
                }
            });
        }
    });
}

fn meta_load(key: u32, dreg: u32) -> Expr {
    expr("meta", |a| {
        a.be32(1, dreg).be32(2, key); // NFTA_META_DREG, NFTA_META_KEY
    })
}

fn cmp(op: u32, value: &[u8]) -> Expr {
    expr("cmp", |a| {
        a.be32(1, REG32_00).be32(2, op).data(3, value); // SREG, OP, DATA
    })
}

fn payload(base: u32, offset: u32, len: u32, dreg: u32) -> Expr {
    expr("payload", |a| {
        a.be32(1, dreg).be32(2, base).be32(3, offset).be32(4, len);
    })
}

/// reg = (reg & mask) ^ xor.
fn bitwise(mask: &[u8], xor: &[u8]) -> Expr {
    expr("bitwise", |a| {
        a.be32(1, REG32_00)
            .be32(2, REG32_00)
            .be32(3, mask.len() as u32)
            .data(4, mask)
            .data(5, xor);
    })
}

fn verdict(code: i32, chain: Option<&str>) -> Expr {
    expr("immediate", |a| {
        // NFTA_IMMEDIATE_DREG, NFTA_IMMEDIATE_DATA
        a.be32(1, REG_VERDICT).verdict(2, code, chain);
    })
}

/// `meta nfproto ipv4|ipv6`.
pub(crate) fn family_is(v6: bool) -> Vec<Expr> {
    let proto = if v6 { NFPROTO_IPV6 } else { NFPROTO_IPV4 };
    vec![
        meta_load(NFT_META_NFPROTO, REG32_00),
        cmp(NFT_CMP_EQ, &[proto]),
    ]
}

/// `ip saddr|daddr` (or `ip6 …`) loaded into `reg` and the registers after it (4 for IPv6).
pub(crate) fn addr_load(v6: bool, source: bool, reg: u32) -> Expr {
    let (offset, len) = match (v6, source) {
        (false, true) => (12, 4),
        (false, false) => (16, 4),
        (true, true) => (8, 16),
        (true, false) => (24, 16),
    };
    payload(NFT_PAYLOAD_NETWORK_HEADER, offset, len, reg)
}

/// `meta l4proto . th dport` loaded into `reg` and `reg + 1`, each zero-padded to a register.
/// A packet whose transport header cannot be read (a later fragment, a truncated header)
/// ends the rule there: the payload expression breaks, so a lookup of it never matches.
pub(crate) fn l4proto_and_dport_load(reg: u32) -> Vec<Expr> {
    vec![
        meta_load(NFT_META_L4PROTO, reg),
        payload(NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2, reg + 1),
    ]
}

/// `lookup` of the key in the registers from REG32_00 in set `set`; with `dreg`, the map's
/// value goes there (REG_VERDICT for a verdict map).
pub(crate) fn lookup(set: &str, dreg: Option<u32>) -> Expr {
    expr("lookup", |a| {
        a.str(1, set).be32(2, REG32_00); // NFTA_LOOKUP_SET, NFTA_LOOKUP_SREG
        if let Some(dreg) = dreg {
            a.be32(3, dreg); // NFTA_LOOKUP_DREG
        }
    })
}

/// `ip saddr|daddr <net>` (or `ip6 …`), the family checked first.
pub(crate) fn addr_in(net: &IpNet, source: bool) -> Vec<Expr> {
    let v6 = matches!(net, IpNet::V6(_));
    let mut out = family_is(v6);
    out.push(addr_load(v6, source, REG32_00));
    let (addr, mask) = match net {
        IpNet::V4(n) => (n.network().octets().to_vec(), n.netmask().octets().to_vec()),
        IpNet::V6(n) => (n.network().octets().to_vec(), n.netmask().octets().to_vec()),
    };
    if mask.iter().any(|b| *b != 0xff) {
        out.push(bitwise(&mask, &vec![0; mask.len()]));
    }
    out.push(cmp(NFT_CMP_EQ, &addr));
    out
}

/// `meta mark & bit == bit`.
pub(crate) fn mark_has(bit: u32) -> Vec<Expr> {
    vec![
        meta_load(NFT_META_MARK, REG32_00),
        bitwise(&bit.to_ne_bytes(), &[0; 4]),
        cmp(NFT_CMP_NEQ, &[0; 4]),
    ]
}

/// `meta mark set meta mark | bit`.
pub(crate) fn mark_set(bit: u32) -> Vec<Expr> {
    vec![
        meta_load(NFT_META_MARK, REG32_00),
        bitwise(&(!bit).to_ne_bytes(), &bit.to_ne_bytes()),
        expr("meta", |a| {
            a.be32(2, NFT_META_MARK).be32(3, REG32_00); // KEY, SREG
        }),
    ]
}

/// `ct status dnat`.
pub(crate) fn ct_dnat() -> Vec<Expr> {
    vec![
        expr("ct", |a| {
            a.be32(1, REG32_00).be32(2, NFT_CT_STATUS); // DREG, KEY
        }),
        bitwise(&IPS_DST_NAT.to_ne_bytes(), &[0; 4]),
        cmp(NFT_CMP_NEQ, &[0; 4]),
    ]
}

/// `fib daddr type local`.
pub(crate) fn daddr_local() -> Vec<Expr> {
    vec![
        expr("fib", |a| {
            a.be32(1, REG32_00)
                .be32(2, NFT_FIB_RESULT_ADDRTYPE)
                .be32(3, NFTA_FIB_F_DADDR);
        }),
        cmp(NFT_CMP_EQ, &RTN_LOCAL.to_ne_bytes()),
    ]
}

/// `jump <chain>`.
pub(crate) fn jump(chain: &str) -> Expr {
    verdict(NFT_JUMP, Some(chain))
}

/// `accept`.
pub(crate) fn accept() -> Expr {
    verdict(super::wire::NF_ACCEPT as i32, None)
}

/// `drop`.
pub(crate) fn drop_packet() -> Expr {
    verdict(super::wire::NF_DROP as i32, None)
}

/// `counter`: an anonymous counter of the rule, read back with the rule.
pub(crate) fn counter() -> Expr {
    expr("counter", |_| {})
}

/// `ct state established,related`.
pub(crate) fn ct_established_or_related() -> Vec<Expr> {
    vec![
        expr("ct", |a| {
            a.be32(1, REG32_00).be32(2, NFT_CT_STATE); // DREG, KEY
        }),
        bitwise(&CT_STATE_ESTABLISHED_RELATED.to_ne_bytes(), &[0; 4]),
        cmp(NFT_CMP_NEQ, &[0; 4]),
    ]
}

/// `return`.
pub(crate) fn ret() -> Expr {
    verdict(NFT_RETURN, None)
}

/// `masquerade`.
pub(crate) fn masquerade() -> Expr {
    expr("masq", |_| {})
}

/// `dnat ip|ip6 to [ip daddr .] meta l4proto . th dport map @<set>`: the key is loaded into
/// consecutive 32-bit registers from REG32_00 (a field shorter than 4 bytes takes a whole
/// register, zero-padded), the map's value (address . port) replaces it.
pub(crate) fn dnat_lookup(set: &str, v6: bool, with_daddr: bool) -> Vec<Expr> {
    let mut out = family_is(v6);
    let mut reg = REG32_00;
    if with_daddr {
        out.push(addr_load(v6, false, reg));
        reg += if v6 { 4 } else { 1 };
    }
    out.extend(l4proto_and_dport_load(reg));
    out.push(lookup(set, Some(REG32_00)));
    let port_reg = REG32_00 + if v6 { 4 } else { 1 };
    out.push(expr("nat", |a| {
        a.be32(1, NFT_NAT_DNAT)
            .be32(2, u32::from(if v6 { NFPROTO_IPV6 } else { NFPROTO_IPV4 }))
            .be32(3, REG32_00)
            .be32(5, port_reg)
            .be32(7, NAT_RANGE_FLAGS);
    }));
    out
}

/// `meta protocol <ethertype>`: the frame's protocol once a VLAN tag is taken off.
pub(crate) fn protocol_is(ethertype: u16) -> Vec<Expr> {
    vec![
        meta_load(NFT_META_PROTOCOL, REG32_00),
        cmp(NFT_CMP_EQ, &ethertype.to_be_bytes()),
    ]
}

/// `meta l4proto <proto>`.
pub(crate) fn l4proto_is(proto: u8) -> Vec<Expr> {
    vec![
        meta_load(NFT_META_L4PROTO, REG32_00),
        cmp(NFT_CMP_EQ, &[proto]),
    ]
}

/// `@base,offset == value` (offset in bytes, the value's length read).
pub(crate) fn field_is(base: u32, offset: u32, value: &[u8]) -> Vec<Expr> {
    vec![
        payload(base, offset, value.len() as u32, REG32_00),
        cmp(NFT_CMP_EQ, value),
    ]
}

/// `@base,offset first-last`: the field, compared as big-endian bytes, within the range.
pub(crate) fn field_between(base: u32, offset: u32, first: &[u8], last: &[u8]) -> Vec<Expr> {
    vec![
        payload(base, offset, first.len() as u32, REG32_00),
        cmp(NFT_CMP_GTE, first),
        cmp(NFT_CMP_LTE, last),
    ]
}

/// `@base,offset != { allowed… }` without a set: the field is loaded once and compared with
/// each allowed value, so the rule goes on only when none is equal. A pod holds a handful of
/// addresses; a set per pod would cost a set object and its elements in every attach.
pub(crate) fn field_not_in(base: u32, offset: u32, len: u32, allowed: &[Vec<u8>]) -> Vec<Expr> {
    let mut out = vec![payload(base, offset, len, REG32_00)];
    out.extend(allowed.iter().map(|v| cmp(NFT_CMP_NEQ, v)));
    out
}

/// `counter name <counter> drop`.
pub(crate) fn count_and_drop(counter: &str) -> Vec<Expr> {
    vec![
        expr("objref", |a| {
            // NFTA_OBJREF_IMM_TYPE, NFTA_OBJREF_IMM_NAME
            a.be32(1, super::wire::NFT_OBJECT_COUNTER).str(2, counter);
        }),
        drop_packet(),
    ]
}

/// The bytes of an address as a register holds it.
pub(crate) fn addr_bytes(addr: IpAddr) -> Vec<u8> {
    match addr {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}

/// Reads the NFTA_DATA_VALUE inside a data attribute.
pub(crate) fn data_value(nested: &[u8]) -> Option<Vec<u8>> {
    super::wire::attrs(nested)
        .find(|(kind, _)| *kind == NFTA_DATA_VALUE)
        .map(|(_, v)| v.to_vec())
}
