//! The nf_tables wire format: constants from include/uapi/linux/netfilter/nf_tables.h and
//! nfnetlink.h, an attribute writer and reader, and the framing of requests and batches.
//!
//! netlink-packet-core has no nf_tables messages and netlink-packet-netfilter only nflog and
//! conntrack, so requests are written here; replies are read with netlink-packet-core's
//! `NlasIterator`. Integers in nf_tables attributes are big-endian (NLA_PUT_BE32).

use netlink_packet_core::{NlaBuffer, NlasIterator, NLA_F_NESTED};

pub(crate) const NFNL_SUBSYS_NFTABLES: u16 = 10;
pub(crate) const NFNL_MSG_BATCH_BEGIN: u16 = 0x10;
pub(crate) const NFNL_MSG_BATCH_END: u16 = 0x11;

pub(crate) const NFT_MSG_NEWTABLE: u16 = 0;
pub(crate) const NFT_MSG_GETTABLE: u16 = 1;
pub(crate) const NFT_MSG_DELTABLE: u16 = 2;
pub(crate) const NFT_MSG_NEWCHAIN: u16 = 3;
pub(crate) const NFT_MSG_GETCHAIN: u16 = 4;
pub(crate) const NFT_MSG_NEWRULE: u16 = 6;
pub(crate) const NFT_MSG_GETRULE: u16 = 7;
pub(crate) const NFT_MSG_NEWSET: u16 = 9;
pub(crate) const NFT_MSG_NEWSETELEM: u16 = 12;
pub(crate) const NFT_MSG_GETSETELEM: u16 = 13;
pub(crate) const NFT_MSG_DELSETELEM: u16 = 14;
pub(crate) const NFT_MSG_NEWOBJ: u16 = 18;
pub(crate) const NFT_MSG_GETOBJ: u16 = 19;
/// Deletes a table (its chains and objects with it), and is no error when it is missing.
pub(crate) const NFT_MSG_DESTROYTABLE: u16 = 26;
/// Deletes a chain (its rules with it), and is no error when it is missing; its table must exist
/// (ENOENT otherwise, Linux 6.18: `Nft::remove_guards` retries without those).
pub(crate) const NFT_MSG_DESTROYCHAIN: u16 = 27;

pub(crate) const NFTA_TABLE_NAME: u16 = 1;
pub(crate) const NFTA_CHAIN_TABLE: u16 = 1;
pub(crate) const NFTA_CHAIN_NAME: u16 = 3;
pub(crate) const NFTA_CHAIN_HOOK: u16 = 4;
pub(crate) const NFTA_CHAIN_POLICY: u16 = 5;
pub(crate) const NFTA_CHAIN_TYPE: u16 = 7;
pub(crate) const NFTA_CHAIN_USERDATA: u16 = 12;
pub(crate) const NFTA_HOOK_HOOKNUM: u16 = 1;
pub(crate) const NFTA_HOOK_PRIORITY: u16 = 2;
pub(crate) const NFTA_HOOK_DEV: u16 = 3;
pub(crate) const NFTA_OBJ_TABLE: u16 = 1;
pub(crate) const NFTA_OBJ_NAME: u16 = 2;
pub(crate) const NFTA_OBJ_TYPE: u16 = 3;
pub(crate) const NFTA_OBJ_DATA: u16 = 4;
pub(crate) const NFT_OBJECT_COUNTER: u32 = 1;
pub(crate) const NFTA_COUNTER_BYTES: u16 = 1;
pub(crate) const NFTA_COUNTER_PACKETS: u16 = 2;
pub(crate) const NFTA_RULE_TABLE: u16 = 1;
pub(crate) const NFTA_RULE_CHAIN: u16 = 2;
pub(crate) const NFTA_RULE_EXPRESSIONS: u16 = 4;
pub(crate) const NFTA_LIST_ELEM: u16 = 1;
pub(crate) const NFTA_EXPR_NAME: u16 = 1;
pub(crate) const NFTA_EXPR_DATA: u16 = 2;
pub(crate) const NFTA_DATA_VALUE: u16 = 1;
pub(crate) const NFTA_DATA_VERDICT: u16 = 2;
pub(crate) const NFTA_VERDICT_CODE: u16 = 1;
pub(crate) const NFTA_VERDICT_CHAIN: u16 = 2;

pub(crate) const NFTA_SET_TABLE: u16 = 1;
pub(crate) const NFTA_SET_NAME: u16 = 2;
pub(crate) const NFTA_SET_FLAGS: u16 = 3;
pub(crate) const NFTA_SET_KEY_TYPE: u16 = 4;
pub(crate) const NFTA_SET_KEY_LEN: u16 = 5;
pub(crate) const NFTA_SET_DATA_TYPE: u16 = 6;
pub(crate) const NFTA_SET_DATA_LEN: u16 = 7;
pub(crate) const NFTA_SET_DESC: u16 = 9;
pub(crate) const NFTA_SET_ID: u16 = 10;
pub(crate) const NFTA_SET_DESC_CONCAT: u16 = 2;
pub(crate) const NFTA_SET_FIELD_LEN: u16 = 1;
pub(crate) const NFT_SET_INTERVAL: u32 = 0x4;
pub(crate) const NFT_SET_MAP: u32 = 0x8;
pub(crate) const NFT_SET_CONCAT: u32 = 0x80;
/// The data type of a verdict map's values.
pub(crate) const NFT_DATA_VERDICT: u32 = 0xffff_ff00;
pub(crate) const NFTA_SET_ELEM_LIST_TABLE: u16 = 1;
pub(crate) const NFTA_SET_ELEM_LIST_SET: u16 = 2;
pub(crate) const NFTA_SET_ELEM_LIST_ELEMENTS: u16 = 3;
pub(crate) const NFTA_SET_ELEM_KEY: u16 = 1;
pub(crate) const NFTA_SET_ELEM_DATA: u16 = 2;
pub(crate) const NFTA_SET_ELEM_KEY_END: u16 = 10;

/// NF_INET_* hook numbers.
pub(crate) const NF_INET_PRE_ROUTING: u32 = 0;
pub(crate) const NF_INET_FORWARD: u32 = 2;
pub(crate) const NF_INET_LOCAL_OUT: u32 = 3;
pub(crate) const NF_INET_POST_ROUTING: u32 = 4;
pub(crate) const NF_ACCEPT: u32 = 1;
pub(crate) const NF_DROP: u32 = 0;
/// NF_NETDEV_INGRESS.
pub(crate) const NF_NETDEV_INGRESS: u32 = 0;

/// Address families (NFPROTO_*).
pub(crate) const NFPROTO_INET: u8 = 1;
pub(crate) const NFPROTO_IPV4: u8 = 2;
pub(crate) const NFPROTO_NETDEV: u8 = 5;
pub(crate) const NFPROTO_IPV6: u8 = 10;

/// Attributes, appended with 4-byte alignment. Nested attributes carry NLA_F_NESTED, as the
/// kernel's strict validation of nf_tables requires. Every attribute, a nested one's content
/// included, is written in place in the one buffer: a header first, its length filled in once
/// the value is there (a guard's requests are hundreds of attributes, and a buffer per nesting
/// level was an allocation each, under the one malloc arena knid's threads share).
#[derive(Debug, Clone)]
pub(crate) struct Attrs(pub(crate) Vec<u8>);

/// What a request's attributes usually take: one allocation for most of them.
const TYPICAL_ATTRS_BYTES: usize = 256;

impl Default for Attrs {
    fn default() -> Self {
        Attrs(Vec::with_capacity(TYPICAL_ATTRS_BYTES))
    }
}

impl Attrs {
    /// Appends attribute `kind` with the value `fill` writes, then pads to 4 bytes.
    fn put(&mut self, kind: u16, fill: impl FnOnce(&mut Self)) -> &mut Self {
        let start = self.0.len();
        self.0.extend_from_slice(&[0, 0]);
        self.0.extend_from_slice(&kind.to_ne_bytes());
        fill(self);
        let len = (self.0.len() - start) as u16;
        self.0[start..start + 2].copy_from_slice(&len.to_ne_bytes());
        self.0.resize(self.0.len().next_multiple_of(4), 0);
        self
    }

    pub(crate) fn bytes(&mut self, kind: u16, value: &[u8]) -> &mut Self {
        self.put(kind, |a| a.0.extend_from_slice(value))
    }

    /// A NUL-terminated string (NLA_NUL_STRING / NLA_STRING with the NUL nft sends).
    pub(crate) fn str(&mut self, kind: u16, value: &str) -> &mut Self {
        self.put(kind, |a| {
            a.0.extend_from_slice(value.as_bytes());
            a.0.push(0);
        })
    }

    pub(crate) fn be32(&mut self, kind: u16, value: u32) -> &mut Self {
        self.bytes(kind, &value.to_be_bytes())
    }

    pub(crate) fn nested(&mut self, kind: u16, fill: impl FnOnce(&mut Attrs)) -> &mut Self {
        self.put(kind | NLA_F_NESTED, fill)
    }

    /// NFTA_DATA_VALUE nested in `kind`: the form of keys, cmp operands and masks.
    pub(crate) fn data(&mut self, kind: u16, value: &[u8]) -> &mut Self {
        self.nested(kind, |d| {
            d.bytes(NFTA_DATA_VALUE, value);
        })
    }

    /// NFTA_DATA_VERDICT nested in `kind`: a verdict (NF_DROP, NFT_JUMP, …) and the chain
    /// of a jump or goto.
    pub(crate) fn verdict(&mut self, kind: u16, code: i32, chain: Option<&str>) -> &mut Self {
        self.nested(kind, |d| {
            d.nested(NFTA_DATA_VERDICT, |v| {
                v.be32(NFTA_VERDICT_CODE, code as u32);
                if let Some(chain) = chain {
                    v.str(NFTA_VERDICT_CHAIN, chain);
                }
            });
        })
    }
}

/// One nf_tables request: message type (NFT_MSG_*), extra flags, family, attributes.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    pub(crate) kind: u16,
    pub(crate) flags: u16,
    pub(crate) family: u8,
    pub(crate) attrs: Attrs,
}

const NLM_F_REQUEST: u16 = 0x1;

/// Appends one netlink message: nlmsghdr, nfgenmsg (family, version 0, res_id), attributes.
pub(crate) fn put_message(
    buf: &mut Vec<u8>,
    kind: u16,
    flags: u16,
    seq: u32,
    family: u8,
    res_id: u16,
    attrs: &[u8],
) {
    let len = 16 + 4 + attrs.len();
    buf.extend_from_slice(&(len as u32).to_ne_bytes());
    buf.extend_from_slice(&kind.to_ne_bytes());
    buf.extend_from_slice(&(NLM_F_REQUEST | flags).to_ne_bytes());
    buf.extend_from_slice(&seq.to_ne_bytes());
    buf.extend_from_slice(&0u32.to_ne_bytes());
    buf.extend_from_slice(&[family, 0]);
    buf.extend_from_slice(&res_id.to_be_bytes());
    buf.extend_from_slice(attrs);
}

/// Encodes `requests` as one batch (BATCH_BEGIN, the requests, the last with NLM_F_ACK,
/// BATCH_END) numbered from `first_seq`: the kernel applies all of them or none. Returns the
/// sequence numbers acked.
pub(crate) fn encode_batch(requests: &[Request], first_seq: u32, buf: &mut Vec<u8>) -> Vec<u32> {
    const NLM_F_ACK: u16 = 0x4;
    buf.clear();
    let mut seq = first_seq;
    put_message(
        buf,
        NFNL_MSG_BATCH_BEGIN,
        0,
        seq,
        0,
        NFNL_SUBSYS_NFTABLES,
        &[],
    );
    // Only the last request asks for an ack: a refused request is answered with its error
    // whatever its flags, and the batch is applied whole or not at all, so the last one's ack
    // says all went in. An ack per request would queue one answer per rule, and a table of
    // thousands of rules overflowed the receive buffer (ENOBUFS) before knid could read them.
    let mut acked = Vec::with_capacity(1);
    for (i, r) in requests.iter().enumerate() {
        seq = seq.wrapping_add(1);
        let kind = (NFNL_SUBSYS_NFTABLES << 8) | r.kind;
        let ack = if i + 1 == requests.len() {
            NLM_F_ACK
        } else {
            0
        };
        put_message(buf, kind, r.flags | ack, seq, r.family, 0, &r.attrs.0);
        if ack != 0 {
            acked.push(seq);
        }
    }
    seq = seq.wrapping_add(1);
    put_message(
        buf,
        NFNL_MSG_BATCH_END,
        0,
        seq,
        0,
        NFNL_SUBSYS_NFTABLES,
        &[],
    );
    acked
}

/// Iterates over the attributes in `buf` as (type without flags, value).
pub(crate) fn attrs(buf: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    NlasIterator::new(buf)
        .map_while(|nla: std::result::Result<NlaBuffer<&[u8]>, _>| nla.ok())
        .map(|nla| {
            let (kind, len) = (nla.kind(), usize::from(nla.length()));
            let whole: &[u8] = nla.into_inner();
            let value = whole.get(4..len).unwrap_or_default();
            (kind & netlink_packet_core::NLA_TYPE_MASK, value)
        })
}
