//! The live socket under abuse: raw unix-socket connections carrying hand-built ttrpc frames —
//! random frames and bytes, truncated frames, oversized lengths, unknown services and methods,
//! payloads that are not requests, frames of other types, half-closed connections, a thousand
//! idle connections, more connections than `max_connections`. Throughout every phase and after
//! it, correct requests on fresh connections (Status; Attach, Inspect, Detach of a real pod)
//! must be answered, and knid must stay alive without a panic in its log.
//!
//! The frames are built by hand (tests/robustness/wire.rs).
//!
//! The server's contract these tests hold knid to: a frame over `max_request_bytes` (1 MiB by
//! default) is answered RESOURCE_EXHAUSTED on its stream, naming the size and the limit, its
//! payload discarded, and the connection stays usable; a payload that is not a ttrpc Request is
//! answered INVALID_ARGUMENT and the connection stays usable; an unknown service or method is
//! answered UNIMPLEMENTED; frames of another type than request are ignored; a truncated frame
//! or garbage ends the connection, never knid; a half-closed connection still gets the
//! responses in flight, then knid closes it; connections beyond `max_connections` (1024 by
//! default) are accepted and closed at once; idle connections cost neither threads nor much
//! memory.

// `mod x;` in a crate root looks for tests/x.rs, which cargo would build as a test of its own;
// inside `mod robustness`, it looks in tests/robustness/.
mod robustness {
    pub mod wire;
}

use std::collections::BTreeMap;
use std::io::Write;
use std::net::Shutdown;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use knid_transport::pb;
use protobuf::Message;
use robustness::wire::{
    closed, encode, envelope, frame, request_frame, status_envelope, status_envelope_of_size,
    status_of, timed_out, Wire, MAX_REQUEST_BYTES, REQUEST, RESPONSE, RUNTIME,
};
use testkit::load::{env_number, Xorshift};
use testkit::{measure, TestNode, RPC};
use ttrpc::proto::{Code, Request};

/// knid's default `max_connections`.
const MAX_CONNECTIONS: usize = 1024;
/// How long knid may take to close a connection it should close.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections held open by the idle-connections test.
const IDLE_CONNECTIONS: usize = 1000;
/// Bounds of the idle-connections test: extra threads and memory with them open, extra
/// threads left once they are closed.
const IDLE_THREAD_BOUND: u64 = 8;
const IDLE_RSS_BOUND_KIB: u64 = 16 * 1024;
const CLOSED_THREAD_BOUND: u64 = 2;
/// Serialises the tests that hold a thousand connections: they measure knid's threads, and
/// two of them at once would hold ~2,000 file descriptors.
static MANY_CONNECTIONS: Mutex<()> = Mutex::new(());

/// The sandbox the probes attach and detach, in a netns of its own.
struct Probe {
    id: String,
    netns: PathBuf,
}

impl Probe {
    fn new(node: &TestNode) -> Probe {
        Probe {
            id: "probe".to_owned(),
            netns: node.netns("probe"),
        }
    }

    /// Correct requests on a fresh connection: Status; Attach of the probe pod, Inspect
    /// showing it attached as the Attach said, Detach, Inspect NotFound.
    fn round(&self, node: &TestNode) {
        let client = node.client();
        let status = client.status(RPC).expect("Status on a fresh connection");
        assert!(status.ready, "knid not ready: {:?}", status.conditions);
        let attached = client
            .attach(&testkit::attach_req(&self.id, &self.netns, "eth0"), RPC)
            .expect("Attach of the probe pod");
        assert_eq!(attached.state, "attached", "{attached:?}");
        let inspect = testkit::inspect_req(&self.id);
        let seen = client
            .inspect(&inspect, RPC)
            .expect("Inspect of the probe pod");
        assert_eq!(seen.interfaces, attached.interfaces, "Inspect after Attach");
        client
            .detach(&testkit::detach_req(&self.id), RPC)
            .expect("Detach of the probe pod");
        let gone = client
            .inspect(&inspect, RPC)
            .expect_err("Inspect after Detach");
        assert_eq!(gone.code(), Some(Code::NOT_FOUND), "{gone}");
    }

    /// Runs `phase` while probe rounds run back to back on another thread, then one more
    /// round; prints how many rounds overlapped the phase.
    fn during<R>(&self, node: &TestNode, name: &str, phase: impl FnOnce() -> R) -> R {
        let stop = AtomicBool::new(false);
        let (out, rounds) = std::thread::scope(|s| {
            let prober = s.spawn(|| {
                let mut rounds = 0u64;
                loop {
                    self.round(node);
                    rounds += 1;
                    if stop.load(Ordering::SeqCst) {
                        return rounds;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            });
            // Stops the prober even when `phase` panics, so the scope can end.
            struct StopOnDrop<'a>(&'a AtomicBool);
            impl Drop for StopOnDrop<'_> {
                fn drop(&mut self) {
                    self.0.store(true, Ordering::SeqCst);
                }
            }
            let out = {
                let _stop = StopOnDrop(&stop);
                phase()
            };
            let rounds = prober
                .join()
                .unwrap_or_else(|p| panic!("probe during {name}: {}", testkit::panic_message(&*p)));
            (out, rounds)
        });
        self.round(node);
        println!("{name}: {rounds} probe round(s) answered during the phase, one after");
        out
    }
}

/// knid still runs and has not logged a panic.
fn assert_alive(node: &mut TestNode) {
    assert!(node.is_running(), "knid died");
    let log = node.log_text();
    assert!(
        !log.contains("panicked"),
        "knid logged a panic:\n{}",
        log.lines()
            .filter(|l| l.contains("panicked"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// A field of knid's /proc/<pid>/status (`Threads`, or `VmRSS` in KiB).
fn knid_status(node: &TestNode, field: &str) -> u64 {
    let pid = u32::try_from(node.pid().as_raw()).expect("pid is positive");
    measure::proc_status(pid, field).unwrap_or_else(|| panic!("{field} of knid {pid}"))
}

/// knid's user + system CPU time, in clock ticks (1/100 s on Linux).
fn knid_cpu_ticks(node: &TestNode) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", node.pid())).expect("knid's stat");
    // Fields after the command name (which may hold spaces): utime and stime are the 12th
    // and 13th.
    let after_comm = &stat[stat.rfind(')').expect("(comm)") + 1..];
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    let tick = |i: usize| fields[i].parse::<u64>().expect("a tick count");
    tick(11) + tick(12)
}

/// knid's thread count once it stopped changing for half a second (at most [`testkit::SETTLE`]).
fn settled_threads(node: &TestNode) -> u64 {
    let started = Instant::now();
    let mut last = knid_status(node, "Threads");
    let mut stable_since = Instant::now();
    while stable_since.elapsed() < Duration::from_millis(500) && started.elapsed() < testkit::SETTLE
    {
        std::thread::sleep(Duration::from_millis(50));
        let now = knid_status(node, "Threads");
        if now != last {
            (last, stable_since) = (now, Instant::now());
        }
    }
    last
}

/// The seed of the random phases: `KNID_ROBUSTNESS_SEED`, else a fixed one.
fn seed() -> u64 {
    env_number("KNID_ROBUSTNESS_SEED", 0x726f_6275_7374_6e73)
}

/// What a random request payload is, and the answer the contract gives it.
fn expected_for(payload: &[u8]) -> Code {
    match Request::parse_from_bytes(payload) {
        Err(_) => Code::INVALID_ARGUMENT,
        Ok(req) if req.service == RUNTIME && req.method == "Status" => {
            match pb::StatusRequest::parse_from_bytes(&req.payload) {
                Ok(_) => Code::OK,
                Err(_) => Code::INVALID_ARGUMENT,
            }
        }
        Ok(_) => Code::UNIMPLEMENTED,
    }
}

/// A random printable name of 0-24 characters.
fn random_name(rng: &mut Xorshift) -> String {
    let len = rng.index(25);
    (0..len)
        .map(|_| char::from(b' ' + u8::try_from(rng.below(95)).expect("below 95")))
        .collect()
}

/// A random request payload and what it is: random bytes, a request for a random path, a
/// Status with a random inner payload, or a correct Status.
fn random_request(rng: &mut Xorshift) -> (&'static str, Vec<u8>) {
    match rng.below(4) {
        0 => ("request frames: random bytes", rng.some_bytes(512)),
        1 => {
            let (service, method) = (random_name(rng), random_name(rng));
            let payload = envelope(&service, &method, rng.some_bytes(64));
            ("request frames: random service/method", payload)
        }
        2 => {
            let payload = envelope(RUNTIME, "Status", rng.some_bytes(64));
            ("request frames: Status, random inner payload", payload)
        }
        _ => ("request frames: Status", status_envelope()),
    }
}

/// A frame type: request more often than not, else response, data (3), 0 or anything else.
fn random_kind(rng: &mut Xorshift) -> u8 {
    match rng.below(10) {
        0..=5 => REQUEST,
        6 => RESPONSE,
        7 => 3,
        8 => 0,
        _ => u8::try_from(4 + rng.below(252)).expect("below 256"),
    }
}

#[test]
fn random_frames_and_random_bytes_leave_knid_serving() {
    if !testkit::privileged() {
        return;
    }
    const CONNECTIONS: usize = 300;
    let seed = seed();
    let mut node = TestNode::start("");
    let probe = Probe::new(&node);
    let mut rng = Xorshift::new(seed);
    let mut sent: BTreeMap<&str, u64> = BTreeMap::new();
    let mut answers: BTreeMap<String, u64> = BTreeMap::new();
    probe.during(&node, "random frames and bytes", || {
        for _ in 0..CONNECTIONS {
            let mut wire = Wire::connect(&node);
            match rng.below(10) {
                // Well-formed frames with random content, then Status: each request frame is
                // answered as the contract says, nothing else is, and the connection serves on.
                0..=3 => {
                    *sent
                        .entry("connections: random well-formed frames")
                        .or_default() += 1;
                    let mut stream_id = 1 + 2 * u32::try_from(rng.below(1000)).expect("small");
                    let mut expected = Vec::new();
                    for _ in 0..=rng.below(8) {
                        stream_id += 2 * (1 + u32::try_from(rng.below(4)).expect("small"));
                        let (what, payload) = random_request(&mut rng);
                        let kind = random_kind(&mut rng);
                        // The contract gives flags no meaning on requests; elsewhere, noise.
                        let flags = if kind == REQUEST { 0 } else { rng.bytes(1)[0] };
                        let length = u32::try_from(payload.len()).expect("small");
                        wire.send(&frame(length, stream_id, kind, flags, &payload));
                        if kind == REQUEST {
                            *sent.entry(what).or_default() += 1;
                            expected.push((stream_id, expected_for(&payload)));
                        } else {
                            *sent.entry("frames of another type").or_default() += 1;
                        }
                    }
                    let final_id = stream_id + 2;
                    wire.send(&request_frame(final_id, &status_envelope()));
                    let mut ids: Vec<u32> = expected.iter().map(|(id, _)| *id).collect();
                    ids.push(final_id);
                    let got = wire.responses(&ids);
                    for (id, want) in expected.iter().chain([&(final_id, Code::OK)]) {
                        let (code, message) = &got[id];
                        *answers.entry(format!("{code:?}")).or_default() += 1;
                        assert_eq!(code, want, "stream {id} (seed {seed:#x}): {message}");
                    }
                    // A late answer to an ignored frame would come before this one.
                    wire.status_ok(final_id + 2);
                }
                // Random bytes, then close.
                4..=6 => {
                    *sent
                        .entry("connections: random bytes then close")
                        .or_default() += 1;
                    let len = 1 + rng.index(4096);
                    let bytes = rng.bytes(len);
                    *sent.entry("garbage bytes").or_default() += bytes.len() as u64;
                    // knid may close first, on garbage: not an error of the test.
                    let _ = wire.stream.write_all(&bytes);
                }
                // A random header, any length, some random payload, then close.
                _ => {
                    *sent
                        .entry("connections: random header then close")
                        .or_default() += 1;
                    let head = rng.bytes(10);
                    let body = rng.some_bytes(1024);
                    *sent.entry("garbage bytes").or_default() += 10 + body.len() as u64;
                    let _ = wire.stream.write_all(&head);
                    let _ = wire.stream.write_all(&body);
                }
            }
        }
    });
    println!(
        "random phase (seed {seed:#x}, KNID_ROBUSTNESS_SEED) sent: {sent:?}; answers: {answers:?}"
    );
    assert_alive(&mut node);
}

#[test]
fn truncated_frames_then_close_leave_knid_serving_and_run_nothing() {
    if !testkit::privileged() {
        return;
    }
    const EACH: usize = 50;
    let mut node = TestNode::start("");
    let probe = Probe::new(&node);
    // Half of this Attach reaches knid: the pod must never be attached.
    let victim = node.netns("victim");
    let attach = envelope(
        RUNTIME,
        "Attach",
        encode(&testkit::attach_req("victim", &victim, "eth0")),
    );
    let half_attach = {
        let mut f = request_frame(1, &attach);
        f.truncate(10 + attach.len() / 2);
        f
    };
    let mut sent: BTreeMap<&str, usize> = BTreeMap::new();
    probe.during(&node, "truncated frames", || {
        // Held open through the phase: a stalled client must not stall anyone else.
        let mut held = Vec::new();
        for i in 0..EACH {
            let whole = request_frame(1, &status_envelope());
            let header_only = frame(100 + i as u32, 1, REQUEST, 0, &[]);
            for (what, bytes) in [
                ("partial header", &whole[..1 + i % 9]),
                ("header only", header_only.as_slice()),
                ("half an Attach", half_attach.as_slice()),
            ] {
                let mut wire = Wire::connect(&node);
                wire.send(bytes);
                *sent.entry(what).or_default() += 1;
                if i % 5 == 0 {
                    held.push(wire);
                }
            }
            // A whole request then a truncated one: the whole one is answered.
            let mut wire = Wire::connect(&node);
            let mut bytes = request_frame(1, &status_envelope());
            bytes.extend_from_slice(&half_attach[..half_attach.len() - 1]);
            wire.send(&bytes);
            let (code, message) = wire.response(1);
            assert_eq!(code, Code::OK, "Status before a truncated frame: {message}");
            *sent.entry("Status then a truncated Attach").or_default() += 1;
        }
        *sent
            .entry("of them held open through the phase")
            .or_default() += held.len();
    });
    println!("truncated frames sent (each on its own connection, then closed): {sent:?}");
    node.assert_not_found("victim");
    assert_eq!(
        testkit::link_names(&victim),
        ["lo"],
        "half an Attach created links"
    );
    assert_alive(&mut node);
}

/// Sends `payload` on `stream_id` of a fresh connection and asserts the contract for a frame
/// over the limit: RESOURCE_EXHAUSTED on that stream, naming the size and the limit, then the
/// same connection still answers Status.
fn assert_refused_as_too_large(node: &TestNode, payload: &[u8]) {
    let mut wire = Wire::connect(node);
    wire.send(&request_frame(1, payload));
    let (code, message) = wire.response(1);
    println!("{}-byte frame answered {code:?}: {message}", payload.len());
    assert_eq!(
        code,
        Code::RESOURCE_EXHAUSTED,
        "{}-byte frame: {message}",
        payload.len()
    );
    for number in [payload.len(), MAX_REQUEST_BYTES] {
        assert!(
            message.contains(&number.to_string()),
            "the message does not name {number} (size {}, limit {MAX_REQUEST_BYTES}): {message}",
            payload.len()
        );
    }
    wire.status_ok(3);
}

#[test]
fn a_request_of_max_request_bytes_is_served_and_one_byte_more_gets_resource_exhausted() {
    if !testkit::privileged() {
        return;
    }
    let mut node = TestNode::start("");
    let probe = Probe::new(&node);
    probe.during(&node, "requests at and over the limit", || {
        let mut wire = Wire::connect(&node);
        wire.send(&request_frame(
            1,
            &status_envelope_of_size(MAX_REQUEST_BYTES),
        ));
        let (code, message) = wire.response(1);
        assert_eq!(
            code,
            Code::OK,
            "a {MAX_REQUEST_BYTES}-byte Status: {message}"
        );
        // A valid Status otherwise.
        assert_refused_as_too_large(&node, &status_envelope_of_size(MAX_REQUEST_BYTES + 1));
    });
    println!("sent a Status of {MAX_REQUEST_BYTES} bytes and one of a byte more");
    assert_alive(&mut node);
}

#[test]
fn a_five_mib_frame_gets_resource_exhausted_and_the_connection_stays_usable() {
    if !testkit::privileged() {
        return;
    }
    let mut node = TestNode::start("");
    let probe = Probe::new(&node);
    probe.during(&node, "a 5 MiB frame", || {
        assert_refused_as_too_large(&node, &vec![0u8; 5 << 20]);
    });
    println!("sent a 5 MiB frame of zeros");
    assert_alive(&mut node);
}

#[test]
fn an_absurd_frame_length_is_discarded_not_buffered() {
    if !testkit::privileged() {
        return;
    }
    const STREAMED: usize = 16 << 20;
    const ABSURD_HEADERS: u64 = 10;
    const CHUNK: usize = 64 << 10;
    /// A server buffering the payload would grow by what was streamed.
    const RSS_BOUND_KIB: u64 = 8 * 1024;
    let mut node = TestNode::start("");
    let probe = Probe::new(&node);
    probe.round(&node);
    let rss_before = knid_status(&node, "VmRSS");
    let (written, answer, rss_during) = probe.during(&node, "a 0xFFFF_FFFF frame", || {
        let mut wire = Wire::connect(&node);
        wire.send(&frame(u32::MAX, 1, REQUEST, 0, &[]));
        let chunk = vec![0x5a; CHUNK];
        let mut written = 0;
        while written < STREAMED {
            match wire.stream.write_all(&chunk) {
                Ok(()) => written += CHUNK,
                // knid may close the connection on a length it will never take.
                Err(e) if closed(&e) => break,
                Err(e) => panic!("stream the oversized payload: {e}"),
            }
        }
        let rss_during = knid_status(&node, "VmRSS");
        wire.stream
            .set_read_timeout(Some(Duration::from_millis(500)))
            .expect("read timeout");
        let answer = match wire.next_frame() {
            Ok(Some(answer)) => {
                assert_eq!(
                    answer.stream_id, 1,
                    "an answer on another stream: {answer:?}"
                );
                Some(status_of(&answer))
            }
            Ok(None) => None,
            Err(e) if timed_out(&e) => None,
            Err(e) => panic!("read after the oversized payload: {e}"),
        };
        (written, answer, rss_during)
    });
    println!(
        "0xFFFF_FFFF header, then {written} payload bytes streamed; answer: {answer:?}; \
         knid VmRSS {rss_before} KiB before, {rss_during} KiB after streaming"
    );
    if let Some((code, message)) = answer {
        assert_eq!(code, Code::RESOURCE_EXHAUSTED, "{message}");
    }
    assert!(
        rss_during <= rss_before + RSS_BOUND_KIB,
        "knid grew from {rss_before} to {rss_during} KiB while {written} bytes of a refused \
         frame streamed in"
    );

    // A bare 0xFFFF_FFFF header then close: what knid's CPU pays for it is reported (a server
    // that keeps "discarding" after EOF reads 4 GiB of nothing, page by page).
    let cpu_before = knid_cpu_ticks(&node);
    probe.during(&node, "0xFFFF_FFFF headers then close", || {
        for _ in 0..ABSURD_HEADERS {
            Wire::connect(&node).send(&frame(u32::MAX, 1, REQUEST, 0, &[]));
        }
    });
    let mut cpu_after = knid_cpu_ticks(&node);
    loop {
        std::thread::sleep(Duration::from_millis(500));
        let now = knid_cpu_ticks(&node);
        if now == cpu_after {
            break;
        }
        cpu_after = now;
    }
    println!(
        "{ABSURD_HEADERS} bare 0xFFFF_FFFF headers then close: knid used {} ms of CPU (the \
         probe rounds included)",
        (cpu_after - cpu_before) * 10
    );
    assert_alive(&mut node);
}

#[test]
fn unknown_services_and_methods_get_unimplemented() {
    if !testkit::privileged() {
        return;
    }
    let mut node = TestNode::start("");
    let probe = Probe::new(&node);
    let unknown = [
        (RUNTIME, "NoSuchMethod"),
        (RUNTIME, "status"),
        (RUNTIME, ""),
        ("knid.v1.NoSuchService", "Status"),
        // knid calls extensions; it does not serve their service.
        ("knid.v1.Extension", "OnAttach"),
        ("kni.KNI", "NoSuchMethod"),
        // ttrpc-codegen's own spelling of the KNI service: knid serves it as kni.KNI only.
        ("kni.Kni", "QueryNodeNetworks"),
        ("", ""),
    ];
    probe.during(&node, "unknown services and methods", || {
        let mut wire = Wire::connect(&node);
        for (i, (service, method)) in unknown.iter().enumerate() {
            let stream_id = 1 + 2 * u32::try_from(i).expect("small");
            let payload = envelope(service, method, encode(&pb::StatusRequest::new()));
            wire.send(&request_frame(stream_id, &payload));
            let (code, message) = wire.response(stream_id);
            println!("/{service}/{method}: {code:?} {message}");
            assert_eq!(code, Code::UNIMPLEMENTED, "/{service}/{method}: {message}");
        }
        wire.status_ok(101);
    });
    println!(
        "sent {} requests for unknown services or methods",
        unknown.len()
    );
    assert_alive(&mut node);
}

#[test]
fn a_payload_that_is_not_a_request_gets_invalid_argument_and_the_connection_stays_usable() {
    if !testkit::privileged() {
        return;
    }
    let mut node = TestNode::start("");
    let probe = Probe::new(&node);
    let payloads: [(&str, &[u8]); 4] = [
        ("wire type 7", &[0x0f]),
        ("truncated varint", &[0x0a, 0x80]),
        ("length past the end", &[0x0a, 0x05, b'a']),
        ("field number 0", &[0x00, 0x01]),
    ];
    probe.during(&node, "payloads that are not requests", || {
        let mut wire = Wire::connect(&node);
        for (i, (what, payload)) in payloads.iter().enumerate() {
            assert!(
                Request::parse_from_bytes(payload).is_err(),
                "{what} decodes"
            );
            let stream_id = 1 + 4 * u32::try_from(i).expect("small");
            wire.send(&request_frame(stream_id, payload));
            let (code, message) = wire.response(stream_id);
            println!("{what}: {code:?} {message}");
            assert_eq!(code, Code::INVALID_ARGUMENT, "{what}: {message}");
            wire.status_ok(stream_id + 2);
        }
    });
    println!(
        "sent {} payloads that are not ttrpc requests",
        payloads.len()
    );
    assert_alive(&mut node);
}

#[test]
fn a_request_whose_payload_is_not_the_methods_message_gets_invalid_argument() {
    if !testkit::privileged() {
        return;
    }
    let mut node = TestNode::start("");
    let probe = Probe::new(&node);
    let methods = ["Inspect", "Attach", "Status"];
    probe.during(&node, "undecodable method payloads", || {
        let mut wire = Wire::connect(&node);
        for (i, method) in methods.iter().enumerate() {
            let stream_id = 1 + 4 * u32::try_from(i).expect("small");
            wire.send(&request_frame(
                stream_id,
                &envelope(RUNTIME, method, vec![0x0f]),
            ));
            let (code, message) = wire.response(stream_id);
            println!("{method} with an undecodable payload: {code:?} {message}");
            assert_eq!(code, Code::INVALID_ARGUMENT, "{method}: {message}");
            wire.status_ok(stream_id + 2);
        }
    });
    println!("sent {} requests with undecodable payloads", methods.len());
    assert_alive(&mut node);
}

#[test]
fn frames_of_other_types_are_ignored_and_the_connection_stays_usable() {
    if !testkit::privileged() {
        return;
    }
    let mut node = TestNode::start("");
    let probe = Probe::new(&node);
    let kinds = [0u8, RESPONSE, 3, 4, 0x7f, 0xff];
    probe.during(&node, "frames of other types", || {
        let mut wire = Wire::connect(&node);
        for (i, kind) in kinds.iter().enumerate() {
            // A valid Status request inside: answering it would show it was not ignored.
            let payload = status_envelope();
            let stream_id = 1 + 4 * u32::try_from(i).expect("small");
            let length = u32::try_from(payload.len()).expect("small");
            wire.send(&frame(length, stream_id, *kind, 0, &payload));
            // Its answer must be the next frame: none came for the ignored one.
            wire.status_ok(stream_id + 2);
        }
        wire.send(&frame(0, 99, RESPONSE, 0, &[]));
        wire.status_ok(101);
    });
    println!(
        "sent {} frames of types {kinds:?} and one empty response frame",
        kinds.len()
    );
    assert_alive(&mut node);
}

#[test]
fn a_half_closed_connection_still_gets_its_responses_then_knid_closes_it() {
    if !testkit::privileged() {
        return;
    }
    const ROUNDS: usize = 20;
    let mut node = TestNode::start("");
    let probe = Probe::new(&node);
    let pod = node.netns("half");
    let attach = envelope(
        RUNTIME,
        "Attach",
        encode(&testkit::attach_req("half", &pod, "eth0")),
    );
    let detach = envelope(RUNTIME, "Detach", encode(&testkit::detach_req("half")));
    probe.during(&node, "half-closed connections", || {
        for round in 0..ROUNDS {
            // Attach (real kernel work, in flight when the write side closes) and Status,
            // pipelined; then Detach on the next half-closed connection.
            for requests in [
                vec![(1, &attach), (3, &status_envelope())],
                vec![(1, &detach)],
            ] {
                let mut wire = Wire::connect(&node);
                let bytes: Vec<u8> = requests
                    .iter()
                    .flat_map(|(id, payload)| request_frame(*id, payload))
                    .collect();
                wire.send(&bytes);
                wire.stream
                    .shutdown(Shutdown::Write)
                    .expect("shutdown(Write)");
                let ids: Vec<u32> = requests.iter().map(|(id, _)| *id).collect();
                for (id, (code, message)) in wire.responses(&ids) {
                    assert_eq!(code, Code::OK, "round {round}, stream {id}: {message}");
                }
                assert!(
                    wire.closed_within(CLOSE_TIMEOUT),
                    "round {round}: knid kept a half-closed connection open {CLOSE_TIMEOUT:?} \
                     after answering it"
                );
            }
        }
    });
    println!("{ROUNDS} rounds of Attach+Status, then Detach, each on a half-closed connection");
    node.assert_not_found("half");
    // The reaper deletes the detached veth after the reply.
    testkit::wait_only_lo(&pod);
    assert_alive(&mut node);
}

#[test]
fn a_thousand_idle_connections_cost_bounded_threads_and_memory() {
    if !testkit::privileged() {
        return;
    }
    let _serial = MANY_CONNECTIONS.lock().unwrap_or_else(|p| p.into_inner());
    testkit::abuse::raise_nofile(IDLE_CONNECTIONS);
    let mut node = TestNode::start("");
    let probe = Probe::new(&node);
    probe.round(&node);
    let threads_before = settled_threads(&node);
    let rss_before = knid_status(&node, "VmRSS");

    let (threads_with, rss_with) = probe.during(&node, "1,000 idle connections", || {
        let mut idle = Vec::with_capacity(IDLE_CONNECTIONS);
        // Half never say a word; half make one call first, then fall silent.
        for i in 0..IDLE_CONNECTIONS {
            let mut wire = Wire::connect(&node);
            if i >= IDLE_CONNECTIONS / 2 {
                wire.status_ok(1);
            }
            idle.push(wire);
        }
        // knid accepts in order: once a newer connection is answered, every idle one is in.
        Wire::connect(&node).status_ok(1);
        std::thread::sleep(Duration::from_secs(1));
        let mut peak = (0, 0);
        for _ in 0..5 {
            peak.0 = peak.0.max(knid_status(&node, "Threads"));
            peak.1 = peak.1.max(knid_status(&node, "VmRSS"));
            std::thread::sleep(Duration::from_millis(200));
        }
        drop(idle);
        peak
    });
    let deadline = Instant::now() + testkit::SETTLE;
    let mut threads_after = knid_status(&node, "Threads");
    while threads_after > threads_before + CLOSED_THREAD_BOUND && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        threads_after = knid_status(&node, "Threads");
    }
    let rss_after = knid_status(&node, "VmRSS");
    println!(
        "knid threads: {threads_before} before, {threads_with} with {IDLE_CONNECTIONS} idle \
         connections, {threads_after} after closing them; VmRSS: {rss_before} KiB before, \
         {rss_with} KiB with them, {rss_after} KiB after"
    );
    assert!(
        threads_with <= threads_before + IDLE_THREAD_BOUND,
        "{threads_with} threads with {IDLE_CONNECTIONS} idle connections, {threads_before} before"
    );
    assert!(
        rss_with <= rss_before + IDLE_RSS_BOUND_KIB,
        "VmRSS grew from {rss_before} to {rss_with} KiB with {IDLE_CONNECTIONS} idle connections"
    );
    assert!(
        threads_after <= threads_before + CLOSED_THREAD_BOUND,
        "{threads_after} threads {:?} after closing the idle connections, {threads_before} before",
        testkit::SETTLE
    );
    assert_alive(&mut node);
}

#[test]
fn connections_beyond_max_connections_are_closed_at_once() {
    if !testkit::privileged() {
        return;
    }
    const EXTRA: usize = 4;
    let _serial = MANY_CONNECTIONS.lock().unwrap_or_else(|p| p.into_inner());
    testkit::abuse::raise_nofile(MAX_CONNECTIONS + EXTRA);
    let mut node = TestNode::start("");
    // No prober here: it would take a slot. Each connection asks for Status and is kept open:
    // the first ones are served, and once max_connections are open every further one is closed
    // unanswered. The harness's own clients may still hold a slot or two, so the count of
    // served connections may fall short of the limit by a few, never pass it.
    let mut open: Vec<Wire> = Vec::new();
    let mut refused = 0;
    for i in 0..MAX_CONNECTIONS + EXTRA {
        let mut wire = Wire::connect(&node);
        let _ = wire.stream.write_all(&request_frame(1, &status_envelope()));
        match wire.read_frame() {
            Some(frame) => {
                assert_eq!(
                    refused,
                    0,
                    "connection {} served after one was refused",
                    i + 1
                );
                assert_eq!(status_of(&frame).0, Code::OK);
                open.push(wire);
            }
            None => refused += 1,
        }
    }
    assert!(
        open.len() <= MAX_CONNECTIONS && open.len() + 4 >= MAX_CONNECTIONS,
        "{} connections served with max_connections {MAX_CONNECTIONS}",
        open.len()
    );
    assert!(refused >= EXTRA, "only {refused} connections refused");
    // A slot freed is a slot taken again.
    drop(open.pop());
    testkit::wait_for("a fresh connection answered", CLOSE_TIMEOUT, || {
        let mut wire = Wire::connect(&node);
        // Refused connections are closed: the write may fail, the read sees the close.
        let _ = wire.stream.write_all(&request_frame(1, &status_envelope()));
        matches!(wire.read_frame(), Some(f) if status_of(&f).0 == Code::OK)
    });
    drop(open);
    println!(
        "{} connections held (max_connections {MAX_CONNECTIONS}), {refused} beyond them closed \
         at once, one freed and taken again",
        MAX_CONNECTIONS + EXTRA - refused
    );
    Probe::new(&node).round(&node);
    assert_alive(&mut node);
}
