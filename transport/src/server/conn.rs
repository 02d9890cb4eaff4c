//! One accepted connection as the I/O role and the handler threads share it: its peer, the
//! requests it has waiting for a handler, the answers waiting for its socket, and the counts that
//! pause its reading. The I/O role owns reading; handlers only append answers.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
use protobuf::Message;
use ttrpc::proto::{Code, MessageHeader, Response};

use super::outbox::Outbox;
use knid_core::locks::LockExt;

/// Who is at the other end (SO_PEERCRED, as of connect).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    /// Process id.
    pub pid: i32,
    /// User id.
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
}

impl Peer {
    /// The credentials the kernel recorded when `stream`'s peer connected.
    pub fn of(stream: &UnixStream) -> io::Result<Self> {
        let creds = getsockopt(stream, PeerCredentials).map_err(io::Error::from)?;
        Ok(Self {
            pid: creds.pid(),
            uid: creds.uid(),
            gid: creds.gid(),
        })
    }
}

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "pid {} uid {} gid {}", self.pid, self.uid, self.gid)
    }
}

/// A request read from a connection, waiting for a handler thread.
#[derive(Debug)]
pub(super) struct Call {
    pub(super) header: MessageHeader,
    pub(super) payload: Vec<u8>,
    pub(super) received: Instant,
}

/// Requests of one connection waiting for a handler.
#[derive(Debug, Default)]
struct Waiting {
    calls: VecDeque<Call>,
    /// The connection is in the pool's line (or a handler is taking its next call).
    scheduled: bool,
}

/// What a connection may hold before the I/O role stops reading it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    /// Requests read and not yet answered.
    pub(super) in_flight: usize,
    /// Their payload bytes (one request is always allowed, whatever its size).
    pub(super) in_flight_bytes: usize,
    /// Answer bytes waiting for the peer to read.
    pub(super) unread_answers: usize,
}

/// A connection shared by the I/O role and the handlers answering its requests.
#[derive(Debug)]
pub(super) struct Conn {
    pub(super) id: u64,
    pub(super) peer: Peer,
    pub(super) stream: UnixStream,
    waiting: Mutex<Waiting>,
    outbox: Mutex<Outbox>,
    /// Requests read and not answered yet, and their payload bytes.
    in_flight: AtomicUsize,
    in_flight_bytes: AtomicUsize,
    /// The I/O role stopped reading it (over its [`Limits`]).
    paused: AtomicBool,
    /// The peer closed its side (or is gone): close once nothing is in flight or waiting.
    read_closed: AtomicBool,
    /// The peer is gone or was disconnected: nothing more is read or written.
    gone: AtomicBool,
    /// A look by the I/O role is already asked for.
    look_asked: AtomicBool,
    /// Handed to method handlers (ttrpc's per-connection context, empty here).
    pub(super) context: Arc<ttrpc::ConnectionContext>,
}

impl Conn {
    pub(super) fn new(id: u64, stream: UnixStream, peer: Peer) -> Self {
        Self {
            id,
            peer,
            stream,
            waiting: Mutex::default(),
            outbox: Mutex::default(),
            in_flight: AtomicUsize::new(0),
            in_flight_bytes: AtomicUsize::new(0),
            paused: AtomicBool::new(false),
            read_closed: AtomicBool::new(false),
            gone: AtomicBool::new(false),
            look_asked: AtomicBool::new(false),
            context: Arc::new(ttrpc::ConnectionContext::default()),
        }
    }

    pub(super) fn fd(&self) -> RawFd {
        self.stream.as_raw_fd()
    }

    /// Queues a request read; true when the connection must join the pool's line.
    pub(super) fn enqueue(&self, call: Call) -> bool {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        self.in_flight_bytes
            .fetch_add(call.payload.len(), Ordering::SeqCst);
        let mut waiting = self.waiting.acquire();
        waiting.calls.push_back(call);
        !std::mem::replace(&mut waiting.scheduled, true)
    }

    /// The next request for a handler, and whether more wait behind it (the connection then
    /// stays scheduled and goes back to the end of the line).
    pub(super) fn dequeue(&self) -> Option<(Call, bool)> {
        let mut waiting = self.waiting.acquire();
        let call = waiting.calls.pop_front();
        let more = !waiting.calls.is_empty();
        waiting.scheduled = more;
        call.map(|call| (call, more))
    }

    /// Writes an answer frame without waiting for the peer and counts its request done; true
    /// when the I/O role must look at the connection (the answer waits for room, reading is
    /// paused, the peer closed its side, or writing failed) and no look was asked for yet.
    pub(super) fn answer(&self, frame: &[u8], request_bytes: usize) -> bool {
        let must_watch = self.push(frame);
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.in_flight_bytes
            .fetch_sub(request_bytes, Ordering::SeqCst);
        let look = must_watch
            || self.paused.load(Ordering::SeqCst)
            || self.read_closed.load(Ordering::SeqCst);
        look && !self.look_asked.swap(true, Ordering::SeqCst)
    }

    /// Appends an answer the I/O role decided on its own (a refusal); true when it waits for
    /// room.
    pub(super) fn push(&self, frame: &[u8]) -> bool {
        let pushed = self.outbox.acquire().push(&self.stream, frame);
        pushed.unwrap_or_else(|e| {
            log::debug!("api: connection {} from {}: write: {e}", self.id, self.peer);
            // Nothing more can be answered; the I/O role sees the hang-up and closes.
            let _ = self.stream.shutdown(std::net::Shutdown::Both);
            true
        })
    }

    /// Writes waiting answers as the socket takes them; the bytes still waiting.
    pub(super) fn flush(&self) -> io::Result<usize> {
        self.outbox.acquire().flush(&self.stream)
    }

    /// Answer bytes waiting for the peer, and for how long none went out.
    pub(super) fn unread(&self, now: Instant) -> (usize, Option<Duration>) {
        let outbox = self.outbox.acquire();
        (outbox.waiting(), outbox.stalled_for(now))
    }

    /// The peer is gone: answers still to come are dropped.
    pub(super) fn peer_gone(&self) {
        self.gone.store(true, Ordering::SeqCst);
        self.read_closed.store(true, Ordering::SeqCst);
        self.outbox.acquire().break_off();
    }

    /// The I/O role takes the look it was asked for.
    pub(super) fn looked(&self) {
        self.look_asked.store(false, Ordering::SeqCst);
    }

    /// Over `limits`: reading must pause until handlers or the peer catch up.
    pub(super) fn over(&self, limits: &Limits) -> bool {
        let in_flight = self.in_flight.load(Ordering::SeqCst);
        in_flight >= limits.in_flight
            || (in_flight > 0
                && self.in_flight_bytes.load(Ordering::SeqCst) >= limits.in_flight_bytes)
            || self.outbox.acquire().waiting() >= limits.unread_answers
    }

    /// Whether reading must pause, published so that a handler finishing a request after this
    /// either is seen here or sees the pause (and asks for a look).
    pub(super) fn pause_if_over(&self, limits: &Limits) -> bool {
        if !self.over(limits) {
            self.paused.store(false, Ordering::SeqCst);
            return false;
        }
        self.paused.store(true, Ordering::SeqCst);
        if self.over(limits) {
            return true;
        }
        self.paused.store(false, Ordering::SeqCst);
        false
    }

    /// The peer is gone or was disconnected.
    pub(super) fn gone(&self) -> bool {
        self.gone.load(Ordering::SeqCst)
    }

    pub(super) fn close_read(&self) {
        self.read_closed.store(true, Ordering::SeqCst);
    }

    pub(super) fn read_closed(&self) -> bool {
        self.read_closed.load(Ordering::SeqCst)
    }

    /// Nothing is left to answer or to write.
    pub(super) fn drained(&self) -> bool {
        self.in_flight.load(Ordering::SeqCst) == 0 && self.outbox.acquire().waiting() == 0
    }
}

/// A response frame (header and payload) with `code` and `message` and no payload.
pub(super) fn status_frame(stream_id: u32, code: Code, message: String) -> Vec<u8> {
    let mut response = Response::new();
    response.set_status(ttrpc::get_status(code, message));
    // A Response of a status alone always encodes.
    let payload = response.write_to_bytes().unwrap_or_default();
    response_frame(stream_id, &payload)
}

/// A response frame carrying `payload`.
pub(super) fn response_frame(stream_id: u32, payload: &[u8]) -> Vec<u8> {
    crate::frame::encode(
        MessageHeader::new_response(stream_id, payload.len() as u32),
        payload,
    )
}
