use super::*;
use netlink_packet_route::link::LinkMessage;

#[test]
fn message_len_rejects_short_and_overlong_lengths() {
    let mut msg = vec![0u8; 20];
    msg[..4].copy_from_slice(&20u32.to_ne_bytes());
    assert_eq!(message_len(&msg), Some(20));
    msg[..4].copy_from_slice(&21u32.to_ne_bytes());
    assert_eq!(message_len(&msg), None);
    msg[..4].copy_from_slice(&15u32.to_ne_bytes());
    assert_eq!(message_len(&msg), None);
    assert_eq!(message_len(&[1, 0]), None);
}

#[test]
fn encode_sets_request_flag_sequence_and_length() {
    let bytes = encode_for_test(
        RouteNetlinkMessage::GetLink(LinkMessage::default()),
        NLM_F_DUMP,
    );
    assert_eq!(
        hex(&bytes),
        "20 00 00 00 12 00 01 03 01 00 00 00 00 00 00 00\n\
         00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00"
    );
}

#[test]
fn rtnl_can_move_to_another_thread() {
    fn assert_send<T: Send>() {}
    assert_send::<Rtnl>();
}

#[test]
fn only_get_requests_count_as_gets() {
    assert!(is_get(
        &RouteNetlinkMessage::GetLink(LinkMessage::default())
    ));
    assert!(!is_get(&RouteNetlinkMessage::NewLink(
        LinkMessage::default()
    )));
}

/// The bytes of an NLMSG_ERROR message with error code `code` (0: an ack), as the kernel sends
/// it, the request's header echoed.
fn error_bytes(code: i32) -> Vec<u8> {
    let mut err = netlink_packet_core::ErrorMessage::default();
    err.code = std::num::NonZeroI32::new(code);
    err.header = vec![0; 16];
    let mut msg = NetlinkMessage::new(
        netlink_packet_core::NetlinkHeader::default(),
        NetlinkPayload::<RouteNetlinkMessage>::Error(err),
    );
    msg.finalize();
    let mut bytes = vec![0; msg.buffer_len()];
    msg.serialize(&mut bytes);
    bytes
}

#[test]
fn an_ack_is_told_from_its_bytes_as_the_full_read_tells_it() {
    let ends = |bytes: &[u8]| {
        let parsed = NetlinkMessage::<RouteNetlinkMessage>::deserialize(bytes).expect("parse");
        (
            is_plain_ack(&RawHeader::of(bytes), bytes),
            reply_end::read(&parsed),
        )
    };
    assert_eq!(ends(&error_bytes(0)), (true, End::Done));
    let (plain, end) = ends(&error_bytes(-libc::EPERM));
    assert!(!plain);
    assert!(
        matches!(end, End::Refused { errno, .. } if errno == libc::EPERM),
        "{end:?}"
    );
    // Data is no ack, whatever its first bytes.
    let data = encode_for_test(RouteNetlinkMessage::NewLink(LinkMessage::default()), 0);
    assert!(!is_plain_ack(&RawHeader::of(&data), &data));
    // An error message cut before its code is left to the full read.
    let ack = error_bytes(0);
    assert!(!is_plain_ack(&RawHeader::of(&ack), &ack[..18]));
}
