use super::test_server::{assert_sent_timeout, serve};
use super::*;

#[test]
fn answers_and_status_codes_come_back_typed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("knid.sock");
    let server = serve(&path);
    let client = RuntimeClient::connect(&path).expect("connect");

    let mut req = pb::InspectRequest::new();
    req.sandbox_id = "known".into();
    let sandbox = client
        .inspect(&req, Duration::from_secs(5))
        .expect("inspect known");
    assert_eq!((sandbox.id.as_str(), sandbox.generation), ("known", 7));

    req.sandbox_id = "ghost".into();
    let err = client
        .inspect(&req, Duration::from_secs(5))
        .expect_err("inspect unknown");
    assert_eq!(err.code(), Some(ttrpc::Code::NOT_FOUND));
    assert!(err.to_string().contains("sandbox ghost not found"), "{err}");

    // Unimplemented methods answer too (the generated default), with a status code.
    let err = client
        .networks(Duration::from_secs(5))
        .expect_err("networks is not implemented by the fake");
    assert!(err.code().is_some(), "{err:?}");
    server.shutdown();
}

#[test]
fn timeout_is_sent_to_the_server() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("knid.sock");
    let server = serve(&path);
    let client = RuntimeClient::connect(&path).expect("connect");
    let status = client.status(Duration::from_secs(3)).expect("status");
    assert!(status.ready);
    assert_sent_timeout(&status.version, 3_000_000_000);
    server.shutdown();
}

#[test]
fn connecting_to_a_missing_socket_is_a_connect_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let err = RuntimeClient::connect(&dir.path().join("none.sock"))
        .err()
        .expect("connected to nothing");
    assert!(matches!(err, ClientError::Connect { .. }), "{err:?}");
    assert_eq!(err.code(), None);
}
