//! An extension's answer (the first byte picks OnAttach, OnDetach or Health; the rest is the
//! body of its response frame): reading it never panics, a yes is only ever a decodable OK
//! answer saying ok, and a no always carries text for the operator.
#![no_main]

use knid_transport::fuzz::{extension_answer, EXTENSION_METHODS};
use knid_transport::pb;
use libfuzzer_sys::fuzz_target;
use protobuf::Message;
use ttrpc::proto::{Code, Response};

fuzz_target!(|data: &[u8]| match extension_answer(data) {
    Ok(()) => {
        let response = Response::parse_from_bytes(&data[1..]).expect("a yes is a response");
        let code = response.status.get_or_default().code.enum_value_or(Code::UNKNOWN);
        assert_eq!(code, Code::OK);
        let ok = match EXTENSION_METHODS[usize::from(data[0]) % EXTENSION_METHODS.len()] {
            "Health" => pb::HealthResponse::parse_from_bytes(&response.payload).map(|r| r.ok),
            _ => pb::ExtensionCallResponse::parse_from_bytes(&response.payload).map(|r| r.ok),
        };
        assert!(matches!(ok, Ok(true)), "a yes that is not ok: {ok:?}");
    }
    Err(text) => assert!(!text.trim().is_empty(), "a refusal without words"),
});
