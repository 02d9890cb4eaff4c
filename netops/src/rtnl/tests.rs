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
