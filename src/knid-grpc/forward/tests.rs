use super::*;

#[test]
fn only_knids_services_are_forwarded() {
    assert_eq!(
        split_path("/kni.KNI/AttachInterface"),
        Some(("kni.KNI", "AttachInterface"))
    );
    assert_eq!(
        split_path("/knid.v1.Runtime/Status"),
        Some(("knid.v1.Runtime", "Status"))
    );
    for other in [
        "/knid.v1.Extension/OnAttach",
        "/grpc.health.v1.Health/Check",
        "/kni.KNI/",
        "/kni.KNI/A/B",
        "kni.KNI/AttachInterface",
    ] {
        assert_eq!(split_path(other), None, "{other}");
    }
}

#[test]
fn knids_status_becomes_the_grpc_status_of_the_same_code() {
    let mut resp = ttrpc::proto::Response::new();
    let mut status = ttrpc::proto::Status::new();
    status.code = ttrpc::Code::NOT_FOUND.into();
    status.message = "sandbox x: not found".into();
    resp.status = protobuf::MessageField::some(status);
    let e = answer(resp).expect_err("NOT_FOUND");
    assert_eq!(e.code(), Code::NotFound);
    assert_eq!(e.message(), "sandbox x: not found");

    let ok = ttrpc::proto::Response {
        payload: vec![1, 2, 3],
        ..Default::default()
    };
    assert_eq!(
        answer(ok).expect("OK").into_inner(),
        Bytes::from_static(&[1, 2, 3])
    );
}

#[test]
fn knid_unreachable_is_unavailable_and_no_answer_in_time_is_deadline_exceeded() {
    assert_eq!(
        upstream_status(&UpstreamError::Closed, true).code(),
        Code::Unavailable
    );
    assert_eq!(
        upstream_status(&UpstreamError::NoAnswer(Duration::from_secs(1)), true).code(),
        Code::DeadlineExceeded
    );
    assert_eq!(
        upstream_status(&UpstreamError::NoAnswer(Duration::from_secs(1)), false).code(),
        Code::Unavailable
    );
}
