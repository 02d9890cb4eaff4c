use super::*;
use knid_core::ErrorKind;

#[test]
fn garbage_bytes_are_an_invalid_request() {
    let err = attach_request(&[0xff, 0xff, 0xff]).expect_err("garbage");
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.to_string().starts_with("invalid request:"), "{err}");
}

#[test]
fn a_good_request_round_trips_through_bytes() {
    let req = pb::AttachRequest {
        sandbox_id: "pod-1".into(),
        netns_path: "/run/netns/pod-1".into(),
        interfaces: vec![pb::InterfaceRequest::default()],
        ..Default::default()
    };
    let bytes = req.write_to_bytes().expect("encode");
    let got = attach_request(&bytes).expect("valid");
    assert_eq!(got.sandbox_id.as_str(), "pod-1");
    assert_eq!(got.interfaces[0].name.as_str(), "eth0");
}

#[test]
fn the_first_byte_picks_the_method_modulo_their_number() {
    let mut req = pb::InspectRequest::new();
    req.sandbox_id = "pod-1".into();
    let body = req.write_to_bytes().expect("encode");
    for first in [3, 3 + 13, 3 + 26] {
        let input = [&[first][..], &body].concat();
        assert!(
            matches!(runtime_request(&input), Ok(RuntimeRequest::Inspect(id)) if id.as_str() == "pod-1"),
            "{first}"
        );
    }
    let err = runtime_request(&[]).expect_err("empty");
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
}

#[test]
fn cni_input_is_environment_lines_then_stdin() {
    let input = b"CNI_COMMAND=VERSION\nCNI_COMMAND=ADD\n\n{\"cniVersion\":\"0.4.0\"}";
    match cni_invocation(input) {
        Ok(Invocation::Version(requested)) => assert_eq!(requested.as_deref(), Some("0.4.0")),
        other => panic!("{other:?}"),
    }
    let err = cni_invocation(b"CNI_COMMAND=ADD").expect_err("no stdin");
    assert_eq!(err.code, knid_core::cni::error::DECODE, "{err}");
}

#[test]
fn an_extensions_refusal_and_a_status_are_its_words() {
    let mut resp = pb::ExtensionCallResponse::new();
    resp.message = "policy says no".into();
    let mut frame = ttrpc::proto::Response::new();
    frame.payload = resp.write_to_bytes().expect("encode");
    frame.status.mut_or_insert_default().code = ttrpc::Code::OK.into();
    let body = frame.write_to_bytes().expect("encode");
    let input = [&[0][..], &body].concat();
    assert_eq!(extension_answer(&input), Err("policy says no".to_owned()));
    frame.status.mut_or_insert_default().code = ttrpc::Code::UNAVAILABLE.into();
    let input = [&[2][..], &frame.write_to_bytes().expect("encode")].concat();
    assert_eq!(extension_answer(&input), Err("Unavailable".to_owned()));
}

#[test]
fn a_blank_refusal_or_status_message_is_replaced_by_what_failed() {
    // fuzz/corpus/extension_answer/invalid_on_detach_status_message_blank: a status whose
    // message is a tab was shown to the operator as that tab.
    let mut frame = ttrpc::proto::Response::new();
    let status = frame.status.mut_or_insert_default();
    status.code = ttrpc::Code::INTERNAL.into();
    status.message = "\t".into();
    let input = [&[1][..], &frame.write_to_bytes().expect("encode")].concat();
    assert_eq!(extension_answer(&input), Err("Internal".to_owned()));
    let mut resp = pb::ExtensionCallResponse::new();
    resp.message = " \n".into();
    let mut frame = ttrpc::proto::Response::new();
    frame.payload = resp.write_to_bytes().expect("encode");
    let input = [&[0][..], &frame.write_to_bytes().expect("encode")].concat();
    assert_eq!(
        extension_answer(&input),
        Err("OnAttach answered not ok, without a message".to_owned())
    );
}
