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
