//! Replays the seed corpus of the netlink-reply fuzz target (fuzz/corpus/netlink_reply/) on
//! stable: each seed is deserialized by netlink-packet-route and read by
//! `knid_netops::decode::reply`, as the target does. `valid_*` seeds deserialize and knid reads
//! something from them, `skipped_*` ones deserialize into data knid skips, `invalid_*` ones do
//! not deserialize.

use knid_netops::decode::{reply, End, Reply};
use netlink_packet_core::NetlinkMessage;
use netlink_packet_route::RouteNetlinkMessage;
use testkit::fuzz_corpus::corpus;

#[test]
fn netlink_reply_seeds_keep_their_verdicts() {
    for seed in corpus("netlink_reply", &["valid", "skipped", "invalid"]) {
        let name = &seed.name;
        let msg = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&seed.bytes);
        match (seed.verdict, msg) {
            ("invalid", Err(_)) => {}
            ("invalid", Ok(msg)) => panic!("{name} should not deserialize: {msg:?}"),
            (_, Err(e)) => panic!("{name} should deserialize: {e}"),
            ("skipped", Ok(msg)) => assert_eq!(reply(&msg), Reply::Skipped, "{name}"),
            (_, Ok(msg)) => {
                let got = reply(&msg);
                assert!(
                    !matches!(got, Reply::Skipped | Reply::End(End::Unknown)),
                    "{name} should be read, got {got:?}"
                );
            }
        }
    }
}

#[test]
fn an_error_with_extack_is_read_with_its_text() {
    let seed = corpus("netlink_reply", &["valid", "skipped", "invalid"])
        .into_iter()
        .find(|s| s.name == "valid_error_with_extack")
        .expect("seed");
    let msg = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&seed.bytes).expect("valid");
    assert_eq!(
        reply(&msg),
        Reply::End(End::Refused {
            errno: 17,
            extack: Some("File exists: link knid0".to_owned())
        })
    );
}
