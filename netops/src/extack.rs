//! Extended-ack parsing: the kernel's error text after an NLMSG_ERROR or NLMSG_DONE.
//!
//! netlink-packet-core leaves the bytes after the error code unparsed, so this reads the
//! NLMSGERR_ATTR_* TLVs (include/uapi/linux/netlink.h) itself.

const NLMSG_HDRLEN: usize = 16;
const NLA_HDRLEN: usize = 4;
const NLA_TYPE_MASK: u16 = 0x3fff;
const NLMSGERR_ATTR_MSG: u16 = 1;
/// The error message holds only the request's header (NETLINK_CAP_ACK).
const NLM_F_CAPPED: u16 = 0x100;
/// TLVs follow the echoed request.
const NLM_F_ACK_TLVS: u16 = 0x200;

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// Finds the extack message in an NLMSG_ERROR payload. `flags` are the error message's own
/// header flags, `after_code` the bytes that follow its 4-byte error code (the echoed request,
/// whole or capped to its header, then the TLVs).
pub(crate) fn from_error(flags: u16, after_code: &[u8]) -> Option<String> {
    if flags & NLM_F_ACK_TLVS == 0 {
        return None;
    }
    let echoed = if flags & NLM_F_CAPPED != 0 {
        NLMSG_HDRLEN
    } else {
        let len = after_code.get(..4)?;
        align4(u32::from_ne_bytes([len[0], len[1], len[2], len[3]]) as usize)
    };
    message_in_tlvs(after_code.get(echoed..)?)
}

/// Finds the extack message in the TLVs that follow an NLMSG_DONE's error code.
pub(crate) fn from_done(flags: u16, tlvs: &[u8]) -> Option<String> {
    if flags & NLM_F_ACK_TLVS == 0 {
        return None;
    }
    message_in_tlvs(tlvs)
}

fn message_in_tlvs(mut tlvs: &[u8]) -> Option<String> {
    while tlvs.len() >= NLA_HDRLEN {
        let len = u16::from_ne_bytes([tlvs[0], tlvs[1]]) as usize;
        let kind = u16::from_ne_bytes([tlvs[2], tlvs[3]]) & NLA_TYPE_MASK;
        if len < NLA_HDRLEN || len > tlvs.len() {
            return None;
        }
        if kind == NLMSGERR_ATTR_MSG {
            let value = &tlvs[NLA_HDRLEN..len];
            let text = value.split(|b| *b == 0).next().unwrap_or_default();
            let text = String::from_utf8_lossy(text).trim().to_owned();
            return (!text.is_empty()).then_some(text);
        }
        tlvs = tlvs.get(align4(len)..).unwrap_or_default();
    }
    None
}

#[cfg(test)]
mod tests;
