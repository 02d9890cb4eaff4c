//! The nf_tables expressions knid's rules are made of, each as the kernel reads it (the
//! `nft --debug=netlink` listing of the same rule is its reference).

use std::net::IpAddr;

use ipnet::IpNet;

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

/// One expression, as plain data: [`list`] writes it into its rule's request. Building a rule
/// allocates its vector of expressions, and per expression nothing but a set's or a jump's
/// chain's name (a guard's ten rules, ~70 expressions built at every attach, name none).
#[derive(Debug, Clone)]
pub(crate) enum Expr {
    /// `meta` loading `key` into `dreg`.
    MetaLoad { key: u32, dreg: u32 },
    /// `meta` setting `key` from REG32_00.
    MetaSet { key: u32 },
    /// REG32_00 compared with `value` by `op`.
    Cmp { op: u32, value: Value },
    /// `len` bytes at `offset` of the header `base`, loaded into `dreg`.
    Payload {
        base: u32,
        offset: u32,
        len: u32,
        dreg: u32,
    },
    /// REG32_00 = (REG32_00 & mask) ^ xor.
    Bitwise { mask: Value, xor: Value },
    /// A verdict into the verdict register, with the chain of a jump or goto.
    Verdict { code: i32, chain: Option<String> },
    /// A lookup of the key from REG32_00 in `set`; a map's value into `dreg`.
    Lookup { set: String, dreg: Option<u32> },
    /// `ct` loading `key` into REG32_00.
    Ct { key: u32 },
    /// `fib daddr type` into REG32_00.
    FibDaddrType,
    /// An anonymous counter.
    Counter,
    /// `masquerade`.
    Masquerade,
    /// `dnat` to the address in REG32_00 and the port in `port_reg`.
    Dnat { v6: bool, port_reg: u32 },
    /// A reference to the named counter `name` (a guard's, named at compile time).
    CounterRef { name: &'static str },
}

/// A register operand (a comparison's value, a mask): up to 16 bytes (an IPv6 address) held in
/// place, longer ones on the heap.
#[derive(Debug, Clone)]
pub(crate) enum Value {
    Short { len: u8, bytes: [u8; 16] },
    Long(Box<[u8]>),
}

impl Value {
    fn of(value: &[u8]) -> Value {
        let mut bytes = [0; 16];
        match bytes.get_mut(..value.len()) {
            Some(head) => {
                head.copy_from_slice(value);
                Value::Short {
                    len: value.len() as u8,
                    bytes,
                }
            }
            None => Value::Long(value.into()),
        }
    }

    fn as_slice(&self) -> &[u8] {
        match self {
            Value::Short { len, bytes } => &bytes[..usize::from(*len)],
            Value::Long(bytes) => bytes,
        }
    }
}

impl Expr {
    /// Its name, as the kernel knows the expression type.
    fn name(&self) -> &'static str {
        match self {
            Expr::MetaLoad { .. } | Expr::MetaSet { .. } => "meta",
            Expr::Cmp { .. } => "cmp",
            Expr::Payload { .. } => "payload",
            Expr::Bitwise { .. } => "bitwise",
            Expr::Verdict { .. } => "immediate",
            Expr::Lookup { .. } => "lookup",
            Expr::Ct { .. } => "ct",
            Expr::FibDaddrType => "fib",
            Expr::Counter => "counter",
            Expr::Masquerade => "masq",
            Expr::Dnat { .. } => "nat",
            Expr::CounterRef { .. } => "objref",
        }
    }

    /// Whether it has attributes (NFTA_EXPR_DATA): all but `counter` and `masq`.
    fn has_data(&self) -> bool {
        !matches!(self, Expr::Counter | Expr::Masquerade)
    }

    /// Writes its attributes (NFTA_EXPR_DATA's content).
    fn write(&self, a: &mut Attrs) {
        match self {
            Expr::MetaLoad { key, dreg } => {
                a.be32(1, *dreg).be32(2, *key); // NFTA_META_DREG, NFTA_META_KEY
            }
            Expr::MetaSet { key } => {
                a.be32(2, *key).be32(3, REG32_00); // KEY, SREG
            }
            Expr::Cmp { op, value } => {
                a.be32(1, REG32_00).be32(2, *op).data(3, value.as_slice()); // SREG, OP, DATA
            }
            Expr::Payload {
                base,
                offset,
                len,
                dreg,
            } => {
                a.be32(1, *dreg)
                    .be32(2, *base)
                    .be32(3, *offset)
                    .be32(4, *len);
            }
            Expr::Bitwise { mask, xor } => {
                let mask = mask.as_slice();
                a.be32(1, REG32_00)
                    .be32(2, REG32_00)
                    .be32(3, mask.len() as u32)
                    .data(4, mask)
                    .data(5, xor.as_slice());
            }
            Expr::Verdict { code, chain } => {
                // NFTA_IMMEDIATE_DREG, NFTA_IMMEDIATE_DATA
                a.be32(1, REG_VERDICT).verdict(2, *code, chain.as_deref());
            }
            Expr::Lookup { set, dreg } => {
                a.str(1, set).be32(2, REG32_00); // NFTA_LOOKUP_SET, NFTA_LOOKUP_SREG
                if let Some(dreg) = dreg {
                    a.be32(3, *dreg); // NFTA_LOOKUP_DREG
                }
            }
            Expr::Ct { key } => {
                a.be32(1, REG32_00).be32(2, *key); // DREG, KEY
            }
            Expr::FibDaddrType => {
                a.be32(1, REG32_00)
                    .be32(2, NFT_FIB_RESULT_ADDRTYPE)
                    .be32(3, NFTA_FIB_F_DADDR);
            }
            Expr::Counter | Expr::Masquerade => {}
            Expr::Dnat { v6, port_reg } => {
                a.be32(1, NFT_NAT_DNAT)
                    .be32(2, u32::from(if *v6 { NFPROTO_IPV6 } else { NFPROTO_IPV4 }))
                    .be32(3, REG32_00)
                    .be32(5, *port_reg)
                    .be32(7, NAT_RANGE_FLAGS);
            }
            Expr::CounterRef { name } => {
                // NFTA_OBJREF_IMM_TYPE, NFTA_OBJREF_IMM_NAME
                a.be32(1, super::wire::NFT_OBJECT_COUNTER).str(2, name);
            }
        }
    }
}

/// NFTA_RULE_EXPRESSIONS of a rule made of `exprs`.
pub(crate) fn list(attrs: &mut Attrs, kind: u16, exprs: &[Expr]) {
    attrs.nested(kind, |l| {
        for e in exprs {
            l.nested(NFTA_LIST_ELEM, |one| {
                one.str(NFTA_EXPR_NAME, e.name());
                if e.has_data() {
                    one.nested(NFTA_EXPR_DATA, |data| e.write(data));
                }
            });
        }
    });
}

fn meta_load(key: u32, dreg: u32) -> Expr {
    Expr::MetaLoad { key, dreg }
}

fn cmp(op: u32, value: &[u8]) -> Expr {
    Expr::Cmp {
        op,
        value: Value::of(value),
    }
}

fn payload(base: u32, offset: u32, len: u32, dreg: u32) -> Expr {
    Expr::Payload {
        base,
        offset,
        len,
        dreg,
    }
}

/// reg = (reg & mask) ^ xor.
fn bitwise(mask: &[u8], xor: &[u8]) -> Expr {
    Expr::Bitwise {
        mask: Value::of(mask),
        xor: Value::of(xor),
    }
}

fn verdict(code: i32, chain: Option<&str>) -> Expr {
    Expr::Verdict {
        code,
        chain: chain.map(str::to_owned),
    }
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
    Expr::Lookup {
        set: set.to_owned(),
        dreg,
    }
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
        Expr::MetaSet { key: NFT_META_MARK },
    ]
}

/// `ct status dnat`.
pub(crate) fn ct_dnat() -> Vec<Expr> {
    vec![
        Expr::Ct { key: NFT_CT_STATUS },
        bitwise(&IPS_DST_NAT.to_ne_bytes(), &[0; 4]),
        cmp(NFT_CMP_NEQ, &[0; 4]),
    ]
}

/// `fib daddr type local`.
pub(crate) fn daddr_local() -> Vec<Expr> {
    vec![
        Expr::FibDaddrType,
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
    Expr::Counter
}

/// `ct state established,related`.
pub(crate) fn ct_established_or_related() -> Vec<Expr> {
    vec![
        Expr::Ct { key: NFT_CT_STATE },
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
    Expr::Masquerade
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
    out.push(Expr::Dnat { v6, port_reg });
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
pub(crate) fn count_and_drop(counter: &'static str) -> [Expr; 2] {
    [Expr::CounterRef { name: counter }, drop_packet()]
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
