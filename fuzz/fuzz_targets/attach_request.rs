//! Decoding + validating an Attach request must never panic, and whatever it accepts must hold
//! every rule again (stated independently in `knid_fuzz`); what it refuses is InvalidArgument.
#![no_main]

use knid_core::ErrorKind;
use knid_transport::pb;
use libfuzzer_sys::fuzz_target;
use protobuf::Message;

fuzz_target!(|data: &[u8]| match knid_transport::fuzz::attach_request(data) {
    Ok(req) => {
        let sent = pb::AttachRequest::parse_from_bytes(data).expect("accepted, so it parses");
        let macs: Vec<&str> = sent.interfaces.iter().map(|i| i.mac.as_str()).collect();
        knid_fuzz::check_attach(&req, &macs);
    }
    Err(e) => assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}"),
});
