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
mod tests {
    use super::*;

    fn tlv(kind: u16, value: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&((NLA_HDRLEN + value.len()) as u16).to_ne_bytes());
        out.extend_from_slice(&kind.to_ne_bytes());
        out.extend_from_slice(value);
        out.resize(align4(out.len()), 0);
        out
    }

    fn header(len: u32) -> Vec<u8> {
        let mut h = len.to_ne_bytes().to_vec();
        h.extend_from_slice(&[16, 0, 5, 6, 1, 0, 0, 0, 0, 0, 0, 0]);
        h
    }

    #[test]
    fn capped_error_message_text_is_found_after_the_header() {
        let mut payload = header(40);
        payload.extend(tlv(NLMSGERR_ATTR_MSG, b"Unknown device type\0"));
        payload.extend(tlv(2, &7u32.to_ne_bytes()));
        let text = from_error(NLM_F_CAPPED | NLM_F_ACK_TLVS, &payload);
        assert_eq!(text.as_deref(), Some("Unknown device type"));
    }

    #[test]
    fn uncapped_error_skips_the_whole_echoed_request() {
        // A 22-byte request (padded to 24) echoed in full, then an offset TLV, then the message.
        let mut payload = header(22);
        payload.extend_from_slice(&[0xaa; 8]);
        payload.extend(tlv(2, &20u32.to_ne_bytes()));
        payload.extend(tlv(NLMSGERR_ATTR_MSG, b"Invalid MTU\0"));
        assert_eq!(
            from_error(NLM_F_ACK_TLVS, &payload).as_deref(),
            Some("Invalid MTU")
        );
    }

    #[test]
    fn no_tlv_flag_means_no_text_even_if_bytes_follow() {
        let mut payload = header(16);
        payload.extend(tlv(NLMSGERR_ATTR_MSG, b"ignored\0"));
        assert_eq!(from_error(NLM_F_CAPPED, &payload), None);
    }

    #[test]
    fn truncated_or_garbage_tlvs_give_none_not_a_panic() {
        let mut payload = header(16);
        payload.extend_from_slice(&[200, 0, 1, 0, b'x']);
        assert_eq!(from_error(NLM_F_CAPPED | NLM_F_ACK_TLVS, &payload), None);
        assert_eq!(from_error(NLM_F_CAPPED | NLM_F_ACK_TLVS, &[1, 2]), None);
        assert_eq!(from_error(NLM_F_ACK_TLVS, &[0xff, 0xff, 0, 0]), None);
        assert_eq!(from_error(NLM_F_ACK_TLVS, &[]), None);
    }

    #[test]
    fn done_message_tlvs_are_read_directly() {
        let tlvs = tlv(
            NLMSGERR_ATTR_MSG,
            b"Invalid header for route dump request\0",
        );
        assert_eq!(
            from_done(NLM_F_ACK_TLVS, &tlvs).as_deref(),
            Some("Invalid header for route dump request")
        );
        assert_eq!(from_done(0, &tlvs), None);
    }
}
