use super::*;
use crate::client::test_server::{assert_sent_timeout, serve};
use std::os::unix::net::{UnixListener, UnixStream};
use ttrpc::proto::{MESSAGE_HEADER_LENGTH, MESSAGE_TYPE_REQUEST};

const T: Duration = Duration::from_secs(5);

fn inspect_req(id: &str) -> pb::InspectRequest {
    let mut req = pb::InspectRequest::new();
    req.sandbox_id = id.into();
    req
}

#[test]
fn calls_on_one_connection_get_their_answers_and_statuses() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("knid.sock");
    let server = serve(&path);
    let mut client = OneshotClient::connect(&path, T).expect("connect");

    let sandbox = client.inspect(&inspect_req("known"), T).expect("inspect");
    assert_eq!((sandbox.id.as_str(), sandbox.generation), ("known", 7));
    let err = client
        .inspect(&inspect_req("ghost"), T)
        .expect_err("ghost is unknown");
    assert_eq!(err.code(), Some(Code::NOT_FOUND), "{err}");
    assert!(!err.is_unreachable());
    assert!(err.to_string().contains("sandbox ghost not found"), "{err}");
    // The third call on the same connection: stream ids keep advancing.
    let status = client.status(Duration::from_secs(3)).expect("status");
    assert!(status.ready);
    assert_sent_timeout(&status.version, 3_000_000_000);
    assert_eq!(client.next_stream_id, 7);
    server.shutdown();
}

#[test]
fn a_missing_socket_is_unreachable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let err = OneshotClient::connect(&dir.path().join("none.sock"), T).expect_err("nothing");
    assert!(matches!(err, OneshotError::Connect { .. }), "{err:?}");
    assert!(err.is_unreachable());
    assert!(err.to_string().contains("none.sock"), "{err}");
}

/// Accepts one connection on `listener` and reads one frame from it: the connection, the
/// frame's header and its body.
fn accept_request(listener: &UnixListener) -> (UnixStream, MessageHeader, Vec<u8>) {
    let (mut conn, _) = listener.accept().expect("accept");
    let mut head = [0u8; MESSAGE_HEADER_LENGTH];
    conn.read_exact(&mut head).expect("read header");
    let header = MessageHeader::from(head);
    let mut body = vec![0u8; header.length as usize];
    conn.read_exact(&mut body).expect("read body");
    (conn, header, body)
}

/// A server on a raw socket: reads one request frame, checks it, answers with `answer`.
fn raw_server(
    path: &Path,
    answer: impl FnOnce(u32) -> Vec<u8> + Send + 'static,
) -> std::thread::JoinHandle<()> {
    let listener = UnixListener::bind(path).expect("bind");
    std::thread::spawn(move || {
        let (mut conn, header, body) = accept_request(&listener);
        assert_eq!(header.type_, MESSAGE_TYPE_REQUEST);
        assert_eq!(header.stream_id % 2, 1, "client stream ids are odd");
        let req = Request::parse_from_bytes(&body).expect("a ttrpc request");
        assert_eq!(
            (req.service.as_str(), req.method.as_str()),
            (RUNTIME_SERVICE, "Status")
        );
        let _ = conn.write_all(&answer(header.stream_id));
        // Hold the connection until the client gives up.
        let _ = conn.read(&mut [0u8; 1]);
    })
}

/// Runs `call`, which must fail with a timeout no sooner than `at_least` and before `within`
/// (a bound far above the call's own timeout: a check that it ended, not a measurement).
fn assert_times_out(
    call: impl FnOnce() -> Result<pb::StatusResponse, OneshotError>,
    at_least: Duration,
    within: Duration,
) {
    let started = Instant::now();
    let err = call().expect_err("no whole answer");
    let took = started.elapsed();
    assert!(matches!(err, OneshotError::Timeout { .. }), "{err:?}");
    assert!(err.is_unreachable());
    assert!(took >= at_least && took < within, "{took:?}");
}

fn frame(stream_id: u32, type_: u8, payload: &[u8]) -> Vec<u8> {
    let header = MessageHeader {
        length: payload.len() as u32,
        stream_id,
        type_,
        flags: 0,
    };
    encode(header, payload)
}

fn ok_response(ready: bool) -> Vec<u8> {
    let mut status = pb::StatusResponse::new();
    status.ready = ready;
    let mut response = Response::new();
    response.payload = status.write_to_bytes().expect("encode");
    response.status.mut_or_insert_default().code = Code::OK.into();
    response.write_to_bytes().expect("encode")
}

#[test]
fn frames_of_other_streams_are_skipped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("raw.sock");
    let server = raw_server(&path, |id| {
        let mut out = frame(id + 2, MESSAGE_TYPE_RESPONSE, &ok_response(false));
        out.extend(frame(id, MESSAGE_TYPE_RESPONSE, &ok_response(true)));
        out
    });
    let mut client = OneshotClient::connect(&path, T).expect("connect");
    assert!(
        client.status(T).expect("status").ready,
        "took the other stream's answer"
    );
    drop(client);
    server.join().expect("raw server");
}

#[test]
fn an_oversized_frame_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("raw.sock");
    let server = raw_server(&path, |id| {
        let mut out = ((MESSAGE_LENGTH_MAX + 1) as u32).to_be_bytes().to_vec();
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&[MESSAGE_TYPE_RESPONSE, 0]);
        out
    });
    let mut client = OneshotClient::connect(&path, T).expect("connect");
    let err = client.status(T).expect_err("oversized");
    assert!(
        matches!(err, OneshotError::Oversized { len } if len == MESSAGE_LENGTH_MAX + 1),
        "{err:?}"
    );
    drop(client);
    server.join().expect("raw server");
}

#[test]
fn a_silent_server_times_out_and_a_closing_one_is_closed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wait = Duration::from_millis(200);
    silent_server_times_out(&dir.path().join("silent.sock"), T, wait, wait);

    let path = dir.path().join("closing.sock");
    let listener = UnixListener::bind(&path).expect("bind");
    let closer = std::thread::spawn(move || drop(listener.accept().expect("accept")));
    let mut client = OneshotClient::connect(&path, T).expect("connect");
    closer.join().expect("closer");
    let err = client.status(T).expect_err("closed");
    assert!(
        matches!(err, OneshotError::Closed { .. } | OneshotError::Io { .. }),
        "{err:?}"
    );
    assert!(err.is_unreachable());
}

/// A server that answers a Status call with `answer`'s bytes in `pieces` writes, `gap` apart.
fn trickling_server(path: &Path, pieces: usize, gap: Duration) -> std::thread::JoinHandle<()> {
    let listener = UnixListener::bind(path).expect("bind");
    std::thread::spawn(move || {
        let (mut conn, header, _) = accept_request(&listener);
        let answer = frame(header.stream_id, MESSAGE_TYPE_RESPONSE, &ok_response(true));
        for piece in answer.chunks(answer.len().div_ceil(pieces)) {
            std::thread::sleep(gap);
            if conn.write_all(piece).is_err() {
                return;
            }
        }
        let _ = conn.read(&mut [0u8; 1]);
    })
}

#[test]
fn an_answer_in_pieces_is_put_back_together() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("pieces.sock");
    // Header and body apart, and the header itself split.
    let server = trickling_server(&path, 7, Duration::from_millis(20));
    let mut client = OneshotClient::connect(&path, T).expect("connect");
    assert!(client.status(T).expect("status").ready);
    assert_eq!(client.frames.pending(), 0, "bytes left over");
    drop(client);
    server.join().expect("trickling server");
}

#[test]
fn a_trickling_server_cannot_stretch_the_call() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("trickle.sock");
    // Each piece comes well within the call's timeout; all of them would take 2 s.
    let server = trickling_server(&path, 20, Duration::from_millis(100));
    let mut client = OneshotClient::connect(&path, T).expect("connect");
    let wait = Duration::from_millis(300);
    assert_times_out(|| client.status(wait), wait, Duration::from_millis(1500));
    drop(client);
    server.join().expect("trickling server");
}

#[test]
fn a_call_without_a_timeout_waits_as_long_as_the_connection_allows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let io_timeout = Duration::from_millis(200);
    let path = dir.path().join("silent.sock");
    silent_server_times_out(&path, io_timeout, Duration::ZERO, io_timeout);
}

/// A Status call with `timeout` on a connection with `io_timeout`, to a server that reads the
/// request and never answers: a timeout, no sooner than `at_least`.
fn silent_server_times_out(
    path: &Path,
    io_timeout: Duration,
    timeout: Duration,
    at_least: Duration,
) {
    let server = raw_server(path, |_| Vec::new());
    let mut client = OneshotClient::connect(path, io_timeout).expect("connect");
    assert_times_out(|| client.status(timeout), at_least, Duration::from_secs(3));
    drop(client);
    server.join().expect("raw server");
}
