//! The server over real sockets, driven with hand-made frames.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use protobuf::Message;
use ttrpc::proto::{
    Code, MessageHeader, Request, Response, MESSAGE_TYPE_REQUEST, MESSAGE_TYPE_RESPONSE,
};

use super::*;
use crate::client::test_server::{FakeRuntime, SLOW, STUCK};
use crate::pb;

struct Fixture {
    _dir: tempfile::TempDir,
    path: PathBuf,
    server: Option<Server>,
}

impl Fixture {
    fn start(settings: ApiSettings) -> Self {
        Self::start_with(settings, Timeouts::default())
    }

    fn start_with(settings: ApiSettings, timeouts: Timeouts) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("knid.sock");
        let listener = crate::socket::bind_listener(&path, 0o660, None).expect("bind");
        let methods = pb::create_runtime(Arc::new(FakeRuntime));
        let server = Server::start_with(listener, methods, settings, timeouts).expect("start");
        Self {
            _dir: dir,
            path,
            server: Some(server),
        }
    }

    fn connect(&self) -> UnixStream {
        connect(&self.path)
    }

    fn pool(&self) -> &pool::Pool {
        self.server
            .as_ref()
            .and_then(|s| s.pool.as_ref())
            .expect("the server runs")
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            server.shutdown();
        }
    }
}

fn frame(stream_id: u32, type_: u8, payload: &[u8]) -> Vec<u8> {
    let mut bytes: Vec<u8> = MessageHeader {
        length: payload.len() as u32,
        stream_id,
        type_,
        flags: 0,
    }
    .into();
    bytes.extend_from_slice(payload);
    bytes
}

fn request(
    stream_id: u32,
    service: &str,
    method: &str,
    payload: &[u8],
    timeout_nano: i64,
) -> Vec<u8> {
    let mut req = Request::new();
    req.service = service.into();
    req.method = method.into();
    req.payload = payload.to_vec();
    req.timeout_nano = timeout_nano;
    frame(
        stream_id,
        MESSAGE_TYPE_REQUEST,
        &req.write_to_bytes().expect("encode"),
    )
}

fn status_request(stream_id: u32, timeout_nano: i64) -> Vec<u8> {
    let payload = pb::StatusRequest::new().write_to_bytes().expect("encode");
    request(
        stream_id,
        "knid.v1.Runtime",
        "Status",
        &payload,
        timeout_nano,
    )
}

/// Reads one response frame: its stream id and the Response.
fn read_response(stream: &mut UnixStream) -> (u32, Response) {
    let mut header = [0u8; 10];
    stream
        .read_exact(&mut header)
        .expect("read a response header");
    let header = MessageHeader::from(header);
    assert_eq!(header.type_, MESSAGE_TYPE_RESPONSE);
    let mut payload = vec![0; header.length as usize];
    stream
        .read_exact(&mut payload)
        .expect("read a response payload");
    (
        header.stream_id,
        Response::parse_from_bytes(&payload).expect("a Response"),
    )
}

fn code(response: &Response) -> Code {
    response.status.code.enum_value_or(Code::UNKNOWN)
}

/// A Status call on `stream` answers OK, with the timeout its handler saw.
fn assert_status_ok(stream: &mut UnixStream, stream_id: u32) -> i64 {
    stream
        .write_all(&status_request(stream_id, 0))
        .expect("write");
    let (id, response) = read_response(stream);
    assert_eq!((id, code(&response)), (stream_id, Code::OK), "{response:?}");
    let status = pb::StatusResponse::parse_from_bytes(&response.payload).expect("StatusResponse");
    status.version.parse().expect("timeout")
}

/// The peer closed the connection: a read gets end-of-file (or a reset).
fn assert_closed(stream: &mut UnixStream) {
    let mut buf = [0u8; 16];
    match stream.read(&mut buf) {
        Ok(0) => {}
        Ok(n) => panic!("read {n} bytes from a connection that should be closed"),
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}"),
    }
}

fn our_ids() -> (u32, u32) {
    (
        nix::unistd::geteuid().as_raw(),
        nix::unistd::getegid().as_raw(),
    )
}

#[test]
fn a_request_without_a_deadline_runs_under_request_timeout() {
    let fixture = Fixture::start(ApiSettings {
        allowed_uids: vec![our_ids().0],
        ..ApiSettings::default()
    });
    let mut stream = fixture.connect();
    let seen = assert_status_ok(&mut stream, 1);
    assert!(
        seen <= 120_000_000_000 && seen > 119_000_000_000,
        "handler saw {seen} ns"
    );
}

#[test]
fn a_peer_whose_uid_and_gid_are_not_allowed_is_closed_unanswered() {
    let (uid, gid) = our_ids();
    let fixture = Fixture::start(ApiSettings {
        allowed_uids: vec![uid.wrapping_add(4242)],
        allowed_gids: vec![gid.wrapping_add(4242)],
        ..ApiSettings::default()
    });
    let mut stream = fixture.connect();
    // The write may land in the socket buffer before the server closes it.
    let _ = stream.write_all(&status_request(1, 0));
    assert_closed(&mut stream);
}

#[test]
fn a_peer_whose_gid_is_allowed_is_served_whatever_its_uid() {
    let (uid, gid) = our_ids();
    let fixture = Fixture::start(ApiSettings {
        allowed_uids: vec![uid.wrapping_add(4242)],
        allowed_gids: vec![gid],
        ..ApiSettings::default()
    });
    assert_status_ok(&mut fixture.connect(), 1);
}

#[test]
fn connections_past_max_connections_are_closed_and_the_open_ones_served() {
    let fixture = Fixture::start(ApiSettings {
        allowed_uids: vec![our_ids().0],
        max_connections: 2,
        ..ApiSettings::default()
    });
    let mut first = fixture.connect();
    let mut second = fixture.connect();
    assert_status_ok(&mut first, 1);
    assert_status_ok(&mut second, 1);
    let mut third = fixture.connect();
    assert_closed(&mut third);
    assert_status_ok(&mut first, 3);
    // A closed connection frees its place.
    drop(second);
    let mut fourth = None;
    for _ in 0..100 {
        let mut stream = fixture.connect();
        let _ = stream.write_all(&status_request(1, 0));
        let mut header = [0u8; 10];
        if stream.read_exact(&mut header).is_ok() {
            fourth = Some(stream);
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(fourth.is_some(), "no place freed by closing a connection");
}

#[test]
fn bad_frames_get_their_status_and_the_connection_keeps_working() {
    let fixture = Fixture::start(ApiSettings {
        allowed_uids: vec![our_ids().0],
        max_request_bytes: 4096,
        ..ApiSettings::default()
    });
    let mut stream = fixture.connect();

    // Over the cap: ResourceExhausted naming the size and the limit, the payload skipped.
    stream
        .write_all(&frame(1, MESSAGE_TYPE_REQUEST, &[0xAB; 10_000]))
        .expect("write");
    let (id, response) = read_response(&mut stream);
    assert_eq!((id, code(&response)), (1, Code::RESOURCE_EXHAUSTED));
    assert!(
        response.status.message.contains("10000") && response.status.message.contains("4096"),
        "{}",
        response.status.message
    );
    assert_status_ok(&mut stream, 3);

    // Not a ttrpc Request.
    stream
        .write_all(&frame(5, MESSAGE_TYPE_REQUEST, &[0xFF; 7]))
        .expect("write");
    let (id, response) = read_response(&mut stream);
    assert_eq!((id, code(&response)), (5, Code::INVALID_ARGUMENT));

    // An unknown service and an unknown method.
    for (sid, service, method) in [(7, "no.Such", "Status"), (9, "knid.v1.Runtime", "Nope")] {
        stream
            .write_all(&request(sid, service, method, &[], 0))
            .expect("write");
        let (id, response) = read_response(&mut stream);
        assert_eq!((id, code(&response)), (sid, Code::UNIMPLEMENTED));
        assert!(response.status.message.contains(method), "{response:?}");
    }

    // A known method whose payload is not its request message.
    stream
        .write_all(&request(11, "knid.v1.Runtime", "Status", &[0xFF; 5], 0))
        .expect("write");
    let (id, response) = read_response(&mut stream);
    assert_eq!((id, code(&response)), (11, Code::INVALID_ARGUMENT));

    // Frames that are not requests are ignored: the next answer is the next request's.
    stream
        .write_all(&frame(13, 0x7F, b"whatever"))
        .expect("write");
    stream
        .write_all(&frame(15, MESSAGE_TYPE_RESPONSE, &[0; 5000]))
        .expect("write");
    assert_status_ok(&mut stream, 17);
}

#[test]
fn a_half_closed_connection_still_gets_its_answers() {
    let fixture = Fixture::start(ApiSettings {
        allowed_uids: vec![our_ids().0],
        ..ApiSettings::default()
    });
    let mut stream = fixture.connect();
    let mut both = status_request(1, 0);
    both.extend(status_request(3, 0));
    stream.write_all(&both).expect("write");
    stream
        .shutdown(std::net::Shutdown::Write)
        .expect("half-close");
    let mut ids = [read_response(&mut stream).0, read_response(&mut stream).0];
    ids.sort_unstable();
    assert_eq!(ids, [1, 3]);
    assert_closed(&mut stream);
}

#[test]
fn a_frame_cut_short_by_close_is_dropped_and_others_are_served() {
    let fixture = Fixture::start(ApiSettings {
        allowed_uids: vec![our_ids().0],
        ..ApiSettings::default()
    });
    let mut cut = fixture.connect();
    let whole = status_request(1, 0);
    cut.write_all(&whole[..whole.len() - 3]).expect("write");
    drop(cut);
    assert_status_ok(&mut fixture.connect(), 1);
}

/// Settings that let this test process connect.
fn ours() -> ApiSettings {
    ApiSettings {
        allowed_uids: vec![our_ids().0],
        ..ApiSettings::default()
    }
}

/// Short deadlines, so that tests see peers disconnected without waiting ten seconds.
fn short() -> Timeouts {
    Timeouts {
        write: Duration::from_secs(2),
        read: Duration::from_secs(2),
    }
}

fn inspect_request(stream_id: u32, sandbox_id: &str) -> Vec<u8> {
    let mut req = pb::InspectRequest::new();
    req.sandbox_id = sandbox_id.into();
    let payload = req.write_to_bytes().expect("encode");
    request(stream_id, "knid.v1.Runtime", "Inspect", &payload, 0)
}

/// Whether knid has closed `stream`: a frame it would ignore cannot be written any more.
fn is_closed(stream: &UnixStream) -> bool {
    let mut stream = stream;
    stream.set_nonblocking(true).expect("non-blocking");
    let written = stream.write(&frame(0, 0x7F, b""));
    stream.set_nonblocking(false).expect("blocking");
    matches!(written, Err(e) if e.kind() != std::io::ErrorKind::WouldBlock)
}

/// Waits (up to a minute) for knid to close `stream`.
fn wait_closed(stream: &UnixStream) {
    let until = std::time::Instant::now() + Duration::from_secs(60);
    while !is_closed(stream) {
        assert!(
            std::time::Instant::now() < until,
            "knid never closed the connection"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_client_that_reads_none_of_its_answers_stalls_nobody_and_is_disconnected() {
    let fixture = Fixture::start_with(ours(), short());
    // Pipelines thousands of requests and never reads: its answers fill its socket.
    let hostile = fixture.connect();
    let burst: Vec<u8> = (0..4000u32)
        .flat_map(|i| status_request(2 * i + 1, 0))
        .collect();
    let writer = {
        let mut hostile = hostile.try_clone().expect("clone");
        std::thread::spawn(move || {
            // knid stops reading it part-way; the rest of the write fails once it is closed.
            let _ = hostile.write_all(&burst);
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    // Another client is served throughout, while the hostile connection is still open: before
    // the fix, its requests waited behind handler threads blocked writing to the hostile one.
    let mut innocent = fixture.connect();
    for i in 0..200 {
        assert_status_ok(&mut innocent, 2 * i + 1);
    }
    assert!(
        !is_closed(&hostile),
        "the innocent client was served only after the hostile connection was dropped"
    );
    // The hostile connection goes once its answers have gone unread for the write timeout...
    wait_closed(&hostile);
    writer.join().expect("writer");
    // ...and the innocent one is still open and served.
    assert_status_ok(&mut innocent, 1001);
}

#[test]
fn a_connection_over_its_in_flight_limit_is_paused_not_refused() {
    let fixture = Fixture::start(ours());
    let mut stream = fixture.connect();
    let n = 3 * MAX_IN_FLIGHT_PER_CONNECTION as u32;
    let burst: Vec<u8> = (0..n)
        .flat_map(|i| inspect_request(2 * i + 1, "slow"))
        .collect();
    let writer = {
        let mut stream = stream.try_clone().expect("clone");
        std::thread::spawn(move || stream.write_all(&burst).expect("write the burst"))
    };
    let mut codes = std::collections::BTreeMap::new();
    for _ in 0..n {
        let (_, response) = read_response(&mut stream);
        *codes.entry(format!("{:?}", code(&response))).or_insert(0) += 1;
    }
    writer.join().expect("writer");
    // Every one ran (Inspect of an unknown sandbox): none was refused Unavailable.
    assert_eq!(
        codes,
        [("NOT_FOUND".to_owned(), n)].into_iter().collect(),
        "slow = {SLOW:?}"
    );
}

#[test]
fn a_frame_left_unfinished_is_disconnected_after_the_read_timeout_and_others_are_served() {
    let fixture = Fixture::start_with(ours(), short());
    let mut slow = fixture.connect();
    let whole = status_request(1, 0);
    // Slowloris: half a frame, then nothing.
    slow.write_all(&whole[..whole.len() / 2]).expect("write");
    let mut other = fixture.connect();
    assert_status_ok(&mut other, 1);
    assert_closed(&mut slow);
    assert_status_ok(&mut other, 3);
}

#[test]
fn an_oversized_request_is_refused_by_the_io_thread_even_when_every_handler_is_busy() {
    let fixture = Fixture::start(ApiSettings {
        max_request_bytes: 1024,
        ..ours()
    });
    let mut busy = fixture.connect();
    let burst: Vec<u8> = (0..MAX_HANDLER_THREADS as u32)
        .flat_map(|i| inspect_request(2 * i + 1, "slow"))
        .collect();
    busy.write_all(&burst).expect("write");
    let mut big = fixture.connect();
    big.write_all(&frame(1, MESSAGE_TYPE_REQUEST, &[0; 2048]))
        .expect("write");
    let (id, response) = read_response(&mut big);
    assert_eq!((id, code(&response)), (1, Code::RESOURCE_EXHAUSTED));
    for _ in 0..MAX_HANDLER_THREADS {
        read_response(&mut busy);
    }
}

#[test]
fn many_connections_pipelining_at_once_get_every_answer_without_a_stall() {
    let fixture = Fixture::start(ours());
    // The I/O role passes from thread to thread with every request: a hand-over to a thread that
    // never takes it would leave every connection unread, and a read here time out.
    let clients: Vec<_> = (0..16u32)
        .map(|c| {
            let mut stream = fixture.connect();
            stream
                .set_read_timeout(Some(Duration::from_secs(2)))
                .expect("read timeout");
            std::thread::spawn(move || {
                for round in 0..20u32 {
                    // Slow and quick requests mixed, several in flight on each connection.
                    let burst: Vec<u8> = (0..4u32)
                        .flat_map(|i| {
                            let id = 2 * (round * 4 + i) + 1;
                            if (c + i) % 4 == 0 {
                                inspect_request(id, "slow")
                            } else {
                                status_request(id, 0)
                            }
                        })
                        .collect();
                    stream.write_all(&burst).expect("write");
                    let mut ids: Vec<u32> = (0..4).map(|_| read_response(&mut stream).0).collect();
                    ids.sort_unstable();
                    let want: Vec<u32> = (0..4u32).map(|i| 2 * (round * 4 + i) + 1).collect();
                    assert_eq!(ids, want, "connection {c}, round {round}");
                }
            })
        })
        .collect();
    for client in clients {
        client.join().expect("a client");
    }
    // The server still serves a newcomer.
    assert_status_ok(&mut fixture.connect(), 1);
}

#[test]
fn a_request_that_runs_long_holds_up_no_other_connection() {
    let fixture = Fixture::start(ours());
    let mut other = fixture.connect();
    other
        .set_read_timeout(Some(STUCK / 3))
        .expect("read timeout");
    // A few calls first, so that a follower waits to take the I/O role over.
    for i in 0..5 {
        assert_status_ok(&mut other, 2 * i + 1);
    }
    let mut stuck = fixture.connect();
    stuck
        .write_all(&inspect_request(1, "stuck"))
        .expect("write");
    std::thread::sleep(SLOW);
    // The other connection is read and answered while the thread that read the stuck request
    // runs it: the I/O role went to another thread (handed over first, or parked and taken by
    // the follower on the lookout when the other connection's call came).
    for i in 5..50 {
        assert_status_ok(&mut other, 2 * i + 1);
    }
    assert_answered_later(
        &mut stuck,
        1,
        "the stuck request was answered before the other connection's calls ran out",
    );
}

/// The stuck request `stream_id` on `stream` is not answered yet (`why` says what came first
/// otherwise); then its answer (NotFound) comes.
fn assert_answered_later(stream: &mut UnixStream, stream_id: u32, why: &str) {
    stream.set_nonblocking(true).expect("nonblocking");
    let mut byte = [0u8; 1];
    assert_eq!(
        stream.read(&mut byte).map_err(|e| e.kind()),
        Err(std::io::ErrorKind::WouldBlock),
        "{why} ({STUCK:?})"
    );
    stream.set_nonblocking(false).expect("blocking");
    let (id, response) = read_response(stream);
    assert_eq!((id, code(&response)), (stream_id, Code::NOT_FOUND));
}

#[test]
fn a_lone_callers_requests_run_with_the_io_role_parked() {
    let fixture = Fixture::start(ours());
    let mut caller = fixture.connect();
    // The first calls start the follower that then waits on the lookout.
    for i in 0..3 {
        assert_status_ok(&mut caller, 2 * i + 1);
    }
    let before = fixture.pool().parks();
    for i in 3..23 {
        // Each call once the last one's thread took the role back and a follower watches: a
        // call sent sooner is read by the follower the lookout woke, as it should be, and on a
        // busy machine that would be most of them.
        testkit::wait_for(
            &format!("a follower to watch the lookout before call {i}"),
            Duration::from_secs(10),
            || fixture.pool().would_park(),
        );
        assert_status_ok(&mut caller, 2 * i + 1);
    }
    // Chores falling due take a call or two off.
    let parked = fixture.pool().parks() - before;
    assert!(
        parked >= 15,
        "{parked} of 20 calls ran with the role parked"
    );
}

#[test]
fn a_deadline_that_falls_due_while_the_role_is_parked_is_kept() {
    let fixture = Fixture::start_with(ours(), short());
    let mut caller = fixture.connect();
    for i in 0..3 {
        assert_status_ok(&mut caller, 2 * i + 1);
    }
    // Slowloris: half a frame, then nothing. Read before the next call is answered.
    let mut slow = fixture.connect();
    let whole = status_request(1, 0);
    slow.write_all(&whole[..whole.len() / 2]).expect("write");
    assert_status_ok(&mut caller, 7);
    // Past a follower's first wait after serving (a second): the follower on the lookout waits
    // for longer than the stuck request runs, so only the role's own deadline can wake it.
    std::thread::sleep(Duration::from_millis(1500));
    let parks = fixture.pool().parks();
    caller
        .write_all(&inspect_request(9, "stuck"))
        .expect("write");
    testkit::wait_for(
        "the stuck request to run with the role parked",
        Duration::from_secs(10),
        || fixture.pool().parks() > parks,
    );
    // The read timeout falls due while the stuck request runs on the thread that parked the
    // role: the lookout's timer wakes the follower, which takes the role and keeps it.
    assert_closed(&mut slow);
    assert_answered_later(
        &mut caller,
        9,
        "the stuck request was answered before the slow peer's read timeout",
    );
}

#[test]
fn a_code_release_a_bursts_end_put_off_runs_once_due_without_another_burst() {
    let fixture = Fixture::start(ours());
    let pool = || fixture.pool();
    // More calls at once than the warm threads take: surplus threads start.
    let mut calls: Vec<UnixStream> = (0..6).map(|_| fixture.connect()).collect();
    for call in &mut calls {
        call.write_all(&inspect_request(1, "slow")).expect("write");
    }
    for call in &mut calls {
        assert_eq!(read_response(call).0, 1);
    }
    let (threads, _) = pool().threads();
    assert!(threads > 2, "the burst started surplus threads: {threads}");
    // Until the burst's surplus has ended, knid's code was always released a moment ago, so the
    // release at the burst's end is put off; nothing else comes.
    let started = std::time::Instant::now();
    while pool().threads().0 > 2 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the surplus threads ended"
        );
        knid_core::memory::give_back_code("a test");
        std::thread::sleep(Duration::from_millis(200));
    }
    testkit::wait_for(
        "the thread in the I/O role to make the put-off release",
        Duration::from_secs(15),
        || pool().code_releases_resumed() > 0,
    );
}

#[test]
fn shutdown_closes_the_listener_and_connections_while_a_request_runs() {
    let mut fixture = Fixture::start(ours());
    let mut busy = fixture.connect();
    busy.write_all(&inspect_request(1, "slow")).expect("write");
    // Let the request start on the thread that read it.
    std::thread::sleep(SLOW / 4);
    fixture.server.take().expect("server").shutdown();
    assert!(
        UnixStream::connect(&fixture.path).is_err(),
        "the listener was still accepting after shutdown returned"
    );
    // The running request's answer is dropped with its connection.
    assert_closed(&mut busy);
}

/// Chores for the tests: each run reads the bell empty, notes its thread, holds its thread for
/// `hold` milliseconds, and asks the lent thread to leave once `leave` is set.
struct TestChores {
    bell: UnixStream,
    ran: Arc<std::sync::Mutex<Vec<std::thread::ThreadId>>>,
    hold_ms: Arc<std::sync::atomic::AtomicU64>,
    leave: Arc<std::sync::atomic::AtomicBool>,
}

impl Chores for TestChores {
    fn bell(&self) -> std::os::fd::BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(&self.bell)
    }

    fn run(&mut self) -> std::ops::ControlFlow<(), Option<std::time::Instant>> {
        use std::sync::atomic::Ordering;
        let mut sink = [0u8; 64];
        while matches!((&self.bell).read(&mut sink), Ok(n) if n > 0) {}
        self.ran
            .lock()
            .expect("ran")
            .push(std::thread::current().id());
        std::thread::sleep(Duration::from_millis(self.hold_ms.load(Ordering::SeqCst)));
        if self.leave.load(Ordering::SeqCst) {
            return std::ops::ControlFlow::Break(());
        }
        std::ops::ControlFlow::Continue(None)
    }
}

/// A server with [`TestChores`], served by a thread of the test's own (the lent one).
struct Lent {
    _dir: tempfile::TempDir,
    path: PathBuf,
    server: Arc<Server>,
    lent: Option<std::thread::JoinHandle<Leave>>,
    ring: UnixStream,
    ran: Arc<std::sync::Mutex<Vec<std::thread::ThreadId>>>,
    hold_ms: Arc<std::sync::atomic::AtomicU64>,
    leave: Arc<std::sync::atomic::AtomicBool>,
}

impl Lent {
    fn start() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("knid.sock");
        let listener = crate::socket::bind_listener(&path, 0o660, None).expect("bind");
        let (ring, bell) = UnixStream::pair().expect("bell");
        bell.set_nonblocking(true).expect("nonblocking bell");
        let chores = TestChores {
            bell,
            ran: Arc::default(),
            hold_ms: Arc::default(),
            leave: Arc::default(),
        };
        let (ran, hold_ms, leave) = (
            Arc::clone(&chores.ran),
            Arc::clone(&chores.hold_ms),
            Arc::clone(&chores.leave),
        );
        let methods = pb::create_runtime(Arc::new(FakeRuntime));
        let server = Arc::new(
            Server::with_chores(listener, methods, ours(), Box::new(chores)).expect("server"),
        );
        let lent = std::thread::Builder::new()
            .name("lent".into())
            .spawn({
                let server = Arc::clone(&server);
                move || server.serve_here()
            })
            .expect("spawn the lent thread");
        Self {
            _dir: dir,
            path,
            server,
            lent: Some(lent),
            ring,
            ran,
            hold_ms,
            leave,
        }
    }

    fn connect(&self) -> UnixStream {
        connect(&self.path)
    }

    fn runs(&self) -> usize {
        self.ran.lock().expect("ran").len()
    }

    fn ring(&self) {
        (&self.ring).write_all(&[1]).expect("ring the bell");
    }

    /// Threads in the pool (the lent one included) and whether the lent one waits as a follower.
    fn threads(&self) -> (usize, bool) {
        self.server.pool.as_ref().expect("running").threads()
    }

    fn wait_until(&self, what: &str, done: impl FnMut(&Self) -> bool) {
        self.wait_within(Duration::from_secs(10), what, done);
    }

    /// Polls `done` every 5 ms until it holds, failing after `limit`.
    fn wait_within(&self, limit: Duration, what: &str, mut done: impl FnMut(&Self) -> bool) {
        let started = std::time::Instant::now();
        while !done(self) {
            assert!(
                started.elapsed() < limit,
                "not within {limit:?}: {what} (threads, lent one idle: {:?})",
                self.threads()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        self.leave.store(true, std::sync::atomic::Ordering::SeqCst);
        self.ring();
        if let Some(lent) = self.lent.take() {
            let _ = lent.join();
        }
        self.server.stop_listening();
    }
}

#[test]
fn the_chores_run_at_once_and_when_their_bell_rings_and_a_long_one_holds_up_no_request() {
    let lent = Lent::start();
    // Due at once, so that the first run says when they are due next.
    lent.wait_until("the first run", |l| l.runs() == 1);
    lent.hold_ms.store(
        u64::try_from(STUCK.as_millis()).expect("ms"),
        std::sync::atomic::Ordering::SeqCst,
    );
    lent.ring();
    lent.wait_until("the run the bell asked for", |l| l.runs() == 2);
    // The chore holds its thread for 3 s; requests are read and answered meanwhile.
    let started = std::time::Instant::now();
    let mut stream = lent.connect();
    for i in 0..20 {
        assert_status_ok(&mut stream, 2 * i + 1);
    }
    assert!(
        started.elapsed() < STUCK / 3,
        "20 calls took {:?} beside a chore of {STUCK:?}",
        started.elapsed()
    );
    // A bell rung while they run runs them once more afterwards, and not at once again.
    lent.ring();
    lent.hold_ms.store(0, std::sync::atomic::Ordering::SeqCst);
    lent.wait_until("the run rung for during the long one", |l| l.runs() == 3);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(lent.runs(), 3, "the chores ran without their bell");
}

#[test]
fn an_idle_server_is_its_lent_thread_alone_once_chores_ran_and_no_call_came() {
    let lent = Lent::start();
    for round in 1..=3 {
        lent.wait_until("the chores to run", |l| l.runs() == round);
        // The thread that took the I/O role while the chores ran hands it back and ends.
        lent.wait_until("the lent thread alone", |l| l.threads() == (1, false));
        lent.ring();
    }
    let ran = lent.ran.lock().expect("ran").clone();
    let lent_id = lent.lent.as_ref().expect("lent").thread().id();
    assert!(
        ran.iter().all(|id| *id == lent_id),
        "chores at idle ran on a thread other than the lent one"
    );
}

#[test]
fn a_bursts_surplus_thread_in_the_io_role_hands_it_back_while_a_lone_caller_keeps_calling() {
    let lent = Lent::start();
    lent.wait_until("the first run of the chores", |l| l.runs() == 1);
    // A burst: more slow calls at once than the warm threads take, so surplus threads start.
    let mut burst: Vec<UnixStream> = (0..6).map(|_| lent.connect()).collect();
    for call in &mut burst {
        call.write_all(&inspect_request(1, "slow")).expect("write");
    }
    for call in &mut burst {
        assert_eq!(read_response(call).0, 1);
    }
    drop(burst);
    let (peak, _) = lent.threads();
    assert!(peak > 3, "the burst started surplus threads: {peak}");
    // Then a lone caller, one request at a time: each runs with the I/O role parked, and while it
    // runs a connection opens and closes, events the thread on the lookout takes the role for.
    // No request needs a second thread, so whichever burst thread holds the role hands it back
    // to the lent one and ends, and the threads come down to the lent one and the warm one.
    let mut caller = lent.connect();
    let mut stream_id = 1;
    lent.wait_within(
        Duration::from_secs(30),
        "the lent thread and the warm one alone while a lone caller calls",
        |l| {
            caller
                .write_all(&inspect_request(stream_id, "slow"))
                .expect("write");
            drop(l.connect());
            assert_eq!(read_response(&mut caller).0, stream_id);
            stream_id += 2;
            l.threads().0 <= 2
        },
    );
}

#[test]
fn serve_here_returns_when_the_chores_ask_and_the_server_serves_on() {
    let mut lent = Lent::start();
    let mut stream = lent.connect();
    assert_status_ok(&mut stream, 1);
    lent.leave.store(true, std::sync::atomic::Ordering::SeqCst);
    lent.ring();
    let left = lent.lent.take().expect("lent").join().expect("serve_here");
    assert_eq!(left, Leave::Asked);
    // The open connection and a new one are still served, on the server's own threads.
    assert_status_ok(&mut stream, 3);
    assert_status_ok(&mut lent.connect(), 1);
    let (threads, home_idle) = lent.threads();
    assert!(
        threads >= 1 && !home_idle,
        "{threads} threads after the lent one left"
    );
    // The chores run no more.
    let runs = lent.runs();
    lent.ring();
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(lent.runs(), runs, "the chores ran after they asked to stop");
}

/// A client connection to the server on `path`, with a read timeout so a lost answer fails the
/// test instead of hanging it.
fn connect(path: &std::path::Path) -> UnixStream {
    let stream = UnixStream::connect(path).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("read timeout");
    stream
}
