use super::*;

#[test]
fn code_names_are_the_canonical_grpc_names() {
    assert_eq!(code_name(Code::NOT_FOUND), "NotFound");
    assert_eq!(code_name(Code::INVALID_ARGUMENT), "InvalidArgument");
    assert_eq!(code_name(Code::RESOURCE_EXHAUSTED), "ResourceExhausted");
}

#[test]
fn every_kind_maps_to_its_ttrpc_code() {
    let table = [
        (ErrorKind::InvalidArgument, Code::INVALID_ARGUMENT),
        (ErrorKind::NotFound, Code::NOT_FOUND),
        (ErrorKind::AlreadyExists, Code::ALREADY_EXISTS),
        (ErrorKind::FailedPrecondition, Code::FAILED_PRECONDITION),
        (ErrorKind::ResourceExhausted, Code::RESOURCE_EXHAUSTED),
        (ErrorKind::Unavailable, Code::UNAVAILABLE),
        (ErrorKind::DeadlineExceeded, Code::DEADLINE_EXCEEDED),
        (ErrorKind::Internal, Code::INTERNAL),
    ];
    for (kind, want) in table {
        assert_eq!(code(kind), want, "{kind:?}");
    }
}

#[test]
fn status_carries_code_and_cause_chain() {
    let cases = [
        (
            Error::InvalidArgument {
                field: "interfaces[0].mac".into(),
                rule: "must be a unicast address".into(),
            },
            Code::INVALID_ARGUMENT,
            "invalid interfaces[0].mac: must be a unicast address",
        ),
        (
            Error::NotFound("pod-1".into()),
            Code::NOT_FOUND,
            "sandbox pod-1 not found",
        ),
        (
            Error::Exhausted {
                network: "default".into(),
                family: "ipv4",
            },
            Code::RESOURCE_EXHAUSTED,
            "network default: ipv4 pool exhausted, no free address",
        ),
        (
            Error::DeadlineExceeded("attach"),
            Code::DEADLINE_EXCEEDED,
            "deadline exceeded before attach",
        ),
    ];
    for (err, want_code, want_message) in cases {
        match to_status(&err) {
            ttrpc::Error::RpcStatus(status) => {
                assert_eq!(status.code(), want_code, "{err:?}");
                assert_eq!(status.message, want_message);
            }
            other => panic!("not a status: {other:?}"),
        }
    }
}
