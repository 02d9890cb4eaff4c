//! Hostile clients of a live knid and a well-behaved one timed beside them, for tests/abuse.rs
//! and benches/abuse.rs. The hostile ones each abuse their own connection the ways a local user
//! could:
//! - **pipeliner**: writes Metrics requests as fast as knid reads them and never reads an answer;
//! - **slowloris**: sends half a frame header, then a byte now and then, never finishing it;
//! - **garbage**: writes random bytes;
//! - **idle**: holds many connections open that never say a word.
//!
//! Each reconnects when knid drops it, and counts how often knid did. The well-behaved client
//! ([`probe`]) makes Status calls on one connection of its own and records every latency and
//! every error; knid closing its connection shows up as an error.

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use knid_transport::client::RuntimeClient;
use knid_transport::pb;
use protobuf::Message;
use ttrpc::proto::{MessageHeader, Request, MESSAGE_TYPE_REQUEST};

use crate::load::Xorshift;
use crate::measure::{ms, percentile};

/// How long one write of a hostile client may block before it looks at its stop flag.
const WRITE_SLICE: Duration = Duration::from_millis(100);

/// The running hostile clients; [`Abusers::stop`] ends them.
pub struct Abusers {
    stop: Arc<AtomicBool>,
    threads: Vec<(&'static str, JoinHandle<Abused>)>,
    idle: Vec<UnixStream>,
}

/// What one hostile client saw.
#[derive(Debug, Clone, Copy, Default)]
pub struct Abused {
    /// Connections it opened.
    pub connections: u64,
    /// Of those, how many knid closed.
    pub dropped: u64,
    /// Bytes it got written.
    pub bytes: u64,
}

impl Abusers {
    /// Starts the pipeliner, the slowloris and the garbage writer on `socket`, and opens `idle`
    /// idle connections.
    pub fn start(socket: &Path, idle: usize) -> Abusers {
        let stop = Arc::new(AtomicBool::new(false));
        type Abuse = fn(&mut UnixStream, &AtomicBool, &mut Xorshift) -> u64;
        let abuses: [(&'static str, Abuse); 3] = [
            ("pipeliner", pipeline),
            ("slowloris", slowloris),
            ("garbage", garbage),
        ];
        let threads = abuses
            .into_iter()
            .enumerate()
            .map(|(i, (name, abuse))| {
                let socket = socket.to_owned();
                let stop = Arc::clone(&stop);
                let thread = std::thread::Builder::new()
                    .name(format!("abuse-{name}"))
                    .spawn(move || abuse_loop(&socket, &stop, 0x5eed + i as u64, abuse))
                    .expect("spawn an abuser");
                (name, thread)
            })
            .collect();
        raise_nofile(idle);
        let idle = (0..idle)
            .map(|_| UnixStream::connect(socket).expect("open an idle connection"))
            .collect();
        Abusers {
            stop,
            threads,
            idle,
        }
    }

    /// Stops the hostile clients and closes the idle connections; what each saw, by name.
    pub fn stop(self) -> Vec<(&'static str, Abused)> {
        self.stop.store(true, Ordering::SeqCst);
        drop(self.idle);
        self.threads
            .into_iter()
            .map(|(name, thread)| (name, thread.join().expect("an abuser panicked")))
            .collect()
    }
}

/// Runs `abuse` on fresh connections until `stop`, reconnecting whenever knid drops one.
fn abuse_loop(
    socket: &PathBuf,
    stop: &AtomicBool,
    seed: u64,
    abuse: fn(&mut UnixStream, &AtomicBool, &mut Xorshift) -> u64,
) -> Abused {
    let mut rng = Xorshift::new(seed);
    let mut seen = Abused::default();
    while !stop.load(Ordering::SeqCst) {
        let Ok(mut stream) = UnixStream::connect(socket) else {
            std::thread::sleep(WRITE_SLICE);
            continue;
        };
        stream
            .set_write_timeout(Some(WRITE_SLICE))
            .expect("write timeout");
        seen.connections += 1;
        seen.bytes += abuse(&mut stream, stop, &mut rng);
        if !stop.load(Ordering::SeqCst) {
            seen.dropped += 1;
        }
    }
    seen
}

/// Writes `bytes`, retrying on the write timeout; false once the connection is gone.
fn write_through(stream: &mut UnixStream, bytes: &[u8], stop: &AtomicBool) -> bool {
    let mut left = bytes;
    while !left.is_empty() {
        if stop.load(Ordering::SeqCst) {
            return false;
        }
        match stream.write(left) {
            Ok(0) => return false,
            Ok(n) => left = &left[n..],
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) => {}
            Err(_) => return false,
        }
    }
    true
}

/// A request frame for `/knid.v1.Runtime/<method>` with `payload`.
pub fn request_frame(stream_id: u32, method: &str, payload: Vec<u8>) -> Vec<u8> {
    let mut req = Request::new();
    req.service = "knid.v1.Runtime".into();
    req.method = method.into();
    req.payload = payload;
    let body = req.write_to_bytes().expect("encode a Request");
    let header = MessageHeader {
        length: body.len() as u32,
        stream_id,
        type_: MESSAGE_TYPE_REQUEST,
        flags: 0,
    };
    knid_transport::frame::encode(header, &body)
}

/// Metrics requests, 64 to a write, never reading an answer.
fn pipeline(stream: &mut UnixStream, stop: &AtomicBool, _: &mut Xorshift) -> u64 {
    let metrics = pb::MetricsRequest::new()
        .write_to_bytes()
        .expect("encode MetricsRequest");
    let mut sent = 0;
    let mut id = 1u32;
    loop {
        let batch: Vec<u8> = (0..64)
            .flat_map(|_| {
                id = id.wrapping_add(2);
                request_frame(id, "Metrics", metrics.clone())
            })
            .collect();
        if !write_through(stream, &batch, stop) {
            return sent;
        }
        sent += batch.len() as u64;
    }
}

/// Half a header, then a byte of it every half second, never completing the frame.
fn slowloris(stream: &mut UnixStream, stop: &AtomicBool, _: &mut Xorshift) -> u64 {
    let mut sent = 0;
    let frame = request_frame(1, "Status", Vec::new());
    let mut bytes = frame[..frame.len() - 1].iter();
    if !write_through(stream, &frame[..5], stop) {
        return sent;
    }
    sent += 5;
    bytes.nth(4);
    for byte in bytes {
        std::thread::sleep(Duration::from_millis(500));
        if !write_through(stream, &[*byte], stop) {
            return sent;
        }
        sent += 1;
    }
    // The whole frame but its last byte: wait to be dropped.
    while !stop.load(Ordering::SeqCst) && !dropped(stream) {
        std::thread::sleep(WRITE_SLICE);
    }
    sent
}

/// Whether knid has closed `stream` (a read sees end-of-file or an error).
fn dropped(stream: &UnixStream) -> bool {
    let mut buf = [0u8; 64];
    stream.set_nonblocking(true).expect("non-blocking");
    let read = std::io::Read::read(&mut &*stream, &mut buf);
    stream.set_nonblocking(false).expect("blocking");
    match read {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    }
}

/// Random bytes, 4 KiB every 10 ms.
fn garbage(stream: &mut UnixStream, stop: &AtomicBool, rng: &mut Xorshift) -> u64 {
    let mut sent = 0;
    loop {
        let chunk = rng.bytes(4096);
        if !write_through(stream, &chunk, stop) {
            return sent;
        }
        sent += chunk.len() as u64;
        std::thread::sleep(Duration::from_millis(10));
        if dropped(stream) {
            return sent;
        }
    }
}

/// What the well-behaved client saw over one phase.
#[derive(Debug, Default)]
pub struct Probed {
    /// Latency of every call answered OK.
    pub latencies: Vec<Duration>,
    /// Every call that failed, with its error.
    pub errors: Vec<String>,
}

/// Status calls on `client`'s one connection, back to back, for `duration`.
pub fn probe(client: &RuntimeClient, duration: Duration) -> Probed {
    let mut seen = Probed::default();
    let until = Instant::now() + duration;
    while Instant::now() < until {
        let start = Instant::now();
        match client.status(Duration::from_secs(60)) {
            Ok(_) => seen.latencies.push(start.elapsed()),
            Err(e) => seen.errors.push(e.to_string()),
        }
    }
    seen
}

/// The well-behaved client's view of one run: before, during and after the abuse.
#[derive(Debug)]
pub struct Run {
    /// Probed before the hostile clients start.
    pub before: Probed,
    /// Probed while they run.
    pub during: Probed,
    /// Probed after they stop.
    pub after: Probed,
    /// What each hostile client saw.
    pub abused: Vec<(&'static str, Abused)>,
}

impl Run {
    /// Prints each phase's p50, p99 and max, and what the hostile clients saw.
    pub fn print(&self) {
        for (phase, probed) in [
            ("before", &self.before),
            ("during", &self.during),
            ("after", &self.after),
        ] {
            let mut sorted = probed.latencies.clone();
            sorted.sort_unstable();
            let (p50, p99, max) = match sorted.last() {
                Some(max) => (
                    ms(percentile(&sorted, 50.0)),
                    ms(percentile(&sorted, 99.0)),
                    ms(*max),
                ),
                None => (f64::NAN, f64::NAN, f64::NAN),
            };
            println!(
                "abuse: well-behaved Status {phase:>6}: {} calls, p50 {p50:.3} ms, p99 {p99:.3} ms, \
                 max {max:.3} ms, {} errors",
                probed.latencies.len(),
                probed.errors.len()
            );
        }
        for (name, seen) in &self.abused {
            println!(
                "abuse: {name}: {} connections, {} dropped by knid, {} bytes written",
                seen.connections, seen.dropped, seen.bytes
            );
        }
    }

    /// The p99 during the abuse over the p99 before it.
    pub fn p99_ratio(&self) -> f64 {
        let p99 = |probed: &Probed| {
            let mut sorted = probed.latencies.clone();
            sorted.sort_unstable();
            ms(percentile(&sorted, 99.0))
        };
        p99(&self.during) / p99(&self.before)
    }
}

/// Probes `socket` with one connection for `phase` before, during (with [`Abusers`] and `idle`
/// idle connections) and after the abuse.
pub fn run(socket: &Path, idle: usize, phase: Duration) -> Run {
    let client = RuntimeClient::connect(socket).expect("connect the well-behaved client");
    let before = probe(&client, phase);
    let abusers = Abusers::start(socket, idle);
    let during = probe(&client, phase);
    let abused = abusers.stop();
    let after = probe(&client, phase);
    Run {
        before,
        during,
        after,
        abused,
    }
}

/// Raises this process's open-files soft limit to its hard limit (a knid spawned after inherits
/// it), which must leave room for `connections` connections and the process's other files.
pub fn raise_nofile(connections: usize) {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).expect("getrlimit(RLIMIT_NOFILE)");
    setrlimit(Resource::RLIMIT_NOFILE, hard, hard).expect("setrlimit(RLIMIT_NOFILE)");
    let needed = connections as u64 + 256;
    assert!(
        hard >= needed,
        "RLIMIT_NOFILE hard limit {hard} < {needed}: cannot hold {connections} connections"
    );
}
