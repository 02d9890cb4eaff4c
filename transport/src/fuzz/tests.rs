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
    for first in [3, 3 + 17, 3 + 34] {
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
fn the_method_table_names_every_rpc_of_the_runtime_service() {
    let proto = include_str!("../../proto/knid/v1/runtime.proto");
    let mut rpcs: Vec<&str> = proto
        .lines()
        .filter_map(|l| l.trim().strip_prefix("rpc "))
        .filter_map(|l| l.split_once('(').map(|(name, _)| name))
        .collect();
    let mut table = RUNTIME_METHODS.to_vec();
    assert!(rpcs.len() >= 17, "read {rpcs:?}");
    rpcs.sort_unstable();
    table.sort_unstable();
    assert_eq!(table, rpcs);
}

#[test]
fn the_policy_questions_are_checked_before_knid_looks_anything_up() {
    let mut req = pb::ExplainPolicyRequest::new();
    req.from = "x/b".into();
    req.to = "10.244.1.2".into();
    req.port = "80/tcp".into();
    let input = [&[14][..], &req.write_to_bytes().expect("encode")].concat();
    assert!(
        matches!(runtime_request(&input), Ok(RuntimeRequest::ExplainPolicy(q)) if q.from == "x/b")
    );
    req.port = "http".into();
    let input = [&[14][..], &req.write_to_bytes().expect("encode")].concat();
    let err = runtime_request(&input).expect_err("bad port");
    assert!(err.to_string().starts_with("invalid port:"), "{err}");
    let pod = pb::ListPoliciesRequest {
        pod: "x/a".into(),
        ..Default::default()
    };
    let input = [&[13][..], &pod.write_to_bytes().expect("encode")].concat();
    assert!(
        matches!(runtime_request(&input), Ok(RuntimeRequest::ListPolicies(Some(p))) if p == "x/a")
    );
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
