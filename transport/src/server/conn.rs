//! One accepted connection: its peer, its request count, and the locked, time-bounded write of
//! response frames. The I/O thread owns the reading side; handler threads write.

use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
use protobuf::Message;
use ttrpc::proto::{Code, MessageHeader, Response};

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

/// A connection shared by the I/O thread and the handlers answering its requests.
#[derive(Debug)]
pub(super) struct Conn {
    pub(super) id: u64,
    pub(super) peer: Peer,
    pub(super) stream: UnixStream,
    write_lock: Mutex<()>,
    /// Requests read and not answered yet.
    in_flight: AtomicUsize,
    /// The peer closed its side (or reading failed): close once `in_flight` drains.
    read_closed: AtomicBool,
    /// Writing failed or timed out: nothing more is written.
    broken: AtomicBool,
    /// Handed to method handlers (ttrpc's per-connection context, empty here).
    pub(super) context: Arc<ttrpc::ConnectionContext>,
}

impl Conn {
    pub(super) fn new(id: u64, stream: UnixStream, peer: Peer) -> Self {
        Self {
            id,
            peer,
            stream,
            write_lock: Mutex::new(()),
            in_flight: AtomicUsize::new(0),
            read_closed: AtomicBool::new(false),
            broken: AtomicBool::new(false),
            context: Arc::new(ttrpc::ConnectionContext::default()),
        }
    }

    pub(super) fn fd(&self) -> RawFd {
        self.stream.as_raw_fd()
    }

    /// Counts a request read.
    pub(super) fn begin(&self) {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
    }

    /// Requests read and not answered yet.
    pub(super) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// Counts a request answered; true when the connection should now be closed (its peer has
    /// closed and nothing is left to answer).
    pub(super) fn end(&self) -> bool {
        self.in_flight.fetch_sub(1, Ordering::SeqCst) == 1
            && self.read_closed.load(Ordering::SeqCst)
    }

    /// Marks the reading side closed; true when nothing is in flight, so it closes now.
    pub(super) fn close_read(&self) -> bool {
        self.read_closed.store(true, Ordering::SeqCst);
        self.in_flight.load(Ordering::SeqCst) == 0
    }

    /// Writes one response frame, waiting at most `timeout` for a peer that does not read. On
    /// failure the connection is shut down, so the I/O thread closes it.
    pub(super) fn write_frame(&self, header: MessageHeader, payload: &[u8], timeout: Duration) {
        let mut frame: Vec<u8> = header.into();
        frame.extend_from_slice(payload);
        let _guard = self.write_lock.lock().unwrap_or_else(|p| p.into_inner());
        if self.broken.load(Ordering::SeqCst) {
            return;
        }
        if let Err(e) = write_all(&self.stream, &frame, Instant::now() + timeout) {
            log::warn!(
                "api: dropping connection of {}: writing a response failed: {e}",
                self.peer
            );
            self.broken.store(true, Ordering::SeqCst);
            let _ = self.stream.shutdown(std::net::Shutdown::Both);
        }
    }

    /// Writes a response carrying only a status.
    pub(super) fn write_status(
        &self,
        stream_id: u32,
        code: Code,
        message: String,
        timeout: Duration,
    ) {
        let (header, payload) = status_frame(stream_id, code, message);
        self.write_frame(header, &payload, timeout);
    }
}

/// A response frame with `code` and `message` and no payload.
pub(super) fn status_frame(
    stream_id: u32,
    code: Code,
    message: String,
) -> (MessageHeader, Vec<u8>) {
    let mut response = Response::new();
    response.set_status(ttrpc::get_status(code, message));
    // A Response of a status alone always encodes.
    let payload = response.write_to_bytes().unwrap_or_default();
    let header = MessageHeader::new_response(stream_id, payload.len() as u32);
    (header, payload)
}

/// `write_all` on a non-blocking socket, polling for room until `deadline`.
fn write_all(mut stream: &UnixStream, mut bytes: &[u8], deadline: Instant) -> io::Result<()> {
    while !bytes.is_empty() {
        match stream.write(bytes) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the peer read nothing for the write timeout",
                    ));
                }
                let ms = u16::try_from(left.as_millis().max(1)).unwrap_or(u16::MAX);
                let mut fds = [PollFd::new(stream.as_fd(), PollFlags::POLLOUT)];
                match poll(&mut fds, PollTimeout::from(ms)) {
                    Ok(_) | Err(nix::Error::EINTR) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
