//! knid's ttrpc server. The ttrpc crate's own sync server starts about six threads per
//! connection; a node daemon must hold a thousand idle connections without a thread each and
//! must authorise every caller before reading a byte. This one runs a single I/O thread (epoll
//! over the listener and every connection) that reads and decodes frames ([`frame`]), and a small
//! pool of handler threads that grows on demand to a cap and shrinks back when idle. It serves
//! the method map the ttrpc code generator makes ([`crate::service::services`]), so the services
//! are the same ones ttrpc's server would run.
//!
//! Every connection's peer is checked with SO_PEERCRED against `allowed_uids`/`allowed_gids` at
//! accept: a refused one is closed unread and logged with its pid, uid and gid. Past
//! `max_connections`, new connections are closed at once. A request over `max_request_bytes` is
//! answered ResourceExhausted and its payload skipped; a payload that is not a ttrpc Request is
//! InvalidArgument, an unknown method Unimplemented; frames that are not requests are ignored;
//! the connection keeps working after each. A peer that half-closes still gets its answers. A
//! peer that reads nothing for [`WRITE_TIMEOUT`] is disconnected.

mod conn;
pub mod frame;
mod pool;

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use knid_core::config::ApiSettings;
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use ttrpc::proto::{Code, MESSAGE_TYPE_REQUEST};

use conn::Conn;
pub use conn::Peer;
use frame::{Frame, FrameReader};
pub(crate) use pool::deadline;
pub use pool::WRITE_TIMEOUT;
use pool::{Pool, Work};

/// The method map the ttrpc code generator makes (`pb::create_runtime` and the like) and
/// [`Server::start`] serves: wire path `/<service>/<Method>` → handler.
pub type Methods = HashMap<String, Box<dyn ttrpc::MethodHandler + Send + Sync>>;

/// Most handler threads; requests beyond them wait in the queue.
pub const MAX_HANDLER_THREADS: usize = 64;
/// Requests one connection may have unanswered; more are answered Unavailable.
pub const MAX_IN_FLIGHT_PER_CONNECTION: usize = 128;
/// Requests waiting for a handler thread, all connections together.
const QUEUE: usize = 4096;
/// Reads of one connection per readiness event, so one busy peer cannot starve the others.
const READS_PER_EVENT: usize = 4;
/// How long accepting pauses when the process is out of file descriptors.
const ACCEPT_PAUSE: Duration = Duration::from_millis(500);

const LISTENER: u64 = 0;
const WAKER: u64 = 1;
const FIRST_CONN: u64 = 2;

enum Control {
    StopListening,
    Shutdown,
    Close(u64),
}

/// Tells the I/O thread to close a connection (or to stop).
#[derive(Clone)]
pub(crate) struct Closer {
    tx: Sender<Control>,
    waker: Arc<UnixStream>,
}

impl Closer {
    fn send(&self, control: Control) {
        if self.tx.send(control).is_ok() {
            // A full waker already has a wake-up pending.
            let _ = (&*self.waker).write(&[1]);
        }
    }

    pub(crate) fn close(&self, id: u64) {
        self.send(Control::Close(id));
    }
}

/// A running server; see the module docs.
pub struct Server {
    closer: Closer,
    io: Option<JoinHandle<()>>,
}

impl Server {
    /// Serves `methods` on `listener` (already bound, e.g. by [`crate::socket::bind_listener`])
    /// under `settings`, on a new I/O thread.
    pub fn start(
        listener: UnixListener,
        methods: Methods,
        settings: ApiSettings,
    ) -> io::Result<Self> {
        listener.set_nonblocking(true)?;
        let (waker, waker_rx) = UnixStream::pair()?;
        waker.set_nonblocking(true)?;
        waker_rx.set_nonblocking(true)?;
        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).map_err(io::Error::from)?;
        epoll
            .add(&listener, EpollEvent::new(EpollFlags::EPOLLIN, LISTENER))
            .map_err(io::Error::from)?;
        epoll
            .add(&waker_rx, EpollEvent::new(EpollFlags::EPOLLIN, WAKER))
            .map_err(io::Error::from)?;
        let (tx, control) = crossbeam_channel::unbounded();
        let closer = Closer {
            tx,
            waker: Arc::new(waker),
        };
        let pool = Pool::new(
            methods,
            settings.request_timeout,
            closer.clone(),
            MAX_HANDLER_THREADS,
            QUEUE,
        );
        let mut io = Io {
            epoll,
            listener: Some(listener),
            accept_paused: None,
            waker_rx,
            control,
            conns: HashMap::new(),
            next_id: FIRST_CONN,
            pool,
            settings,
            refusals: LogLimit::default(),
        };
        let thread = std::thread::Builder::new()
            .name("knid-api-io".into())
            .spawn(move || io.run())?;
        Ok(Self {
            closer,
            io: Some(thread),
        })
    }

    /// Stops accepting; open connections keep being served.
    pub fn stop_listening(&self) {
        self.closer.send(Control::StopListening);
    }

    /// Closes every connection and waits for the I/O thread. Requests being handled finish on
    /// their handler threads; their answers are dropped.
    pub fn shutdown(mut self) {
        self.closer.send(Control::Shutdown);
        if let Some(io) = self.io.take() {
            if io.join().is_err() {
                log::error!("api: the I/O thread panicked");
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(io) = self.io.take() {
            self.closer.send(Control::Shutdown);
            let _ = io.join();
        }
    }
}

/// The I/O thread's state.
struct Io {
    epoll: Epoll,
    listener: Option<UnixListener>,
    /// Accepting stopped (out of file descriptors) until then.
    accept_paused: Option<Instant>,
    waker_rx: UnixStream,
    control: Receiver<Control>,
    conns: HashMap<u64, (Arc<Conn>, FrameReader)>,
    next_id: u64,
    pool: Pool,
    settings: ApiSettings,
    refusals: LogLimit,
}

impl Io {
    fn run(&mut self) {
        let mut events = vec![EpollEvent::empty(); 64];
        loop {
            self.resume_accepting();
            let timeout = match self.accept_paused {
                Some(_) => EpollTimeout::from(ACCEPT_PAUSE.as_millis() as u16),
                None => EpollTimeout::NONE,
            };
            let n = match self.epoll.wait(&mut events, timeout) {
                Ok(n) => n,
                Err(nix::Error::EINTR) => continue,
                Err(e) => {
                    log::error!("api: epoll_wait failed, the API stops serving: {e}");
                    return;
                }
            };
            for event in &events[..n] {
                match event.data() {
                    LISTENER => self.accept(),
                    WAKER => {
                        if !self.on_control() {
                            return;
                        }
                    }
                    id => self.on_readable(id),
                }
            }
        }
    }

    /// Handles queued controls; false when the server shuts down.
    fn on_control(&mut self) -> bool {
        let mut sink = [0u8; 64];
        while matches!((&self.waker_rx).read(&mut sink), Ok(n) if n > 0) {}
        while let Ok(control) = self.control.try_recv() {
            match control {
                Control::Close(id) => self.close(id),
                Control::StopListening => {
                    if let Some(listener) = self.listener.take() {
                        let _ = self.epoll.delete(&listener);
                        log::info!("api: stopped accepting connections");
                    }
                }
                Control::Shutdown => {
                    for (conn, _) in self.conns.values() {
                        let _ = conn.stream.shutdown(std::net::Shutdown::Both);
                    }
                    self.conns.clear();
                    return false;
                }
            }
        }
        true
    }

    fn accept(&mut self) {
        while let Some(listener) = &self.listener {
            match listener.accept() {
                Ok((stream, _)) => self.admit(stream),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // EMFILE and kin: the pending connection stays in the backlog, and a
                    // level-triggered listener would spin, so accepting pauses.
                    log::warn!(
                        "api: accept failed, pausing accepts for {ACCEPT_PAUSE:?}: {e} ({} connections open)",
                        self.conns.len()
                    );
                    let _ = self.epoll.delete(listener);
                    self.accept_paused = Some(Instant::now() + ACCEPT_PAUSE);
                    return;
                }
            }
        }
    }

    fn resume_accepting(&mut self) {
        if let (Some(until), Some(listener)) = (self.accept_paused, &self.listener) {
            if Instant::now() >= until {
                self.accept_paused = None;
                if let Err(e) = self
                    .epoll
                    .add(listener, EpollEvent::new(EpollFlags::EPOLLIN, LISTENER))
                {
                    log::error!("api: cannot resume accepting: {e}");
                }
            }
        }
    }

    /// Checks a new connection's peer and the connection cap, then starts reading it.
    fn admit(&mut self, stream: UnixStream) {
        let peer = match Peer::of(&stream) {
            Ok(peer) => peer,
            Err(e) => {
                log::warn!("api: closing a connection whose peer is unknown (SO_PEERCRED: {e})");
                return;
            }
        };
        if !self.settings.allows(peer.uid, peer.gid) {
            self.refusals.warn(format_args!(
                "api: refused connection from {peer}: neither the uid is in allowed_uids {:?} nor the gid in allowed_gids {:?}",
                self.settings.allowed_uids, self.settings.allowed_gids
            ));
            return;
        }
        if self.conns.len() >= self.settings.max_connections {
            self.refusals.warn(format_args!(
                "api: refused connection from {peer}: max_connections ({}) are open",
                self.settings.max_connections
            ));
            return;
        }
        let id = self.next_id;
        let added = stream.set_nonblocking(true).and_then(|()| {
            let interest = EpollFlags::EPOLLIN | EpollFlags::EPOLLRDHUP;
            self.epoll
                .add(&stream, EpollEvent::new(interest, id))
                .map_err(io::Error::from)
        });
        if let Err(e) = added {
            log::warn!("api: cannot serve a connection from {peer}: {e}");
            return;
        }
        self.next_id += 1;
        log::debug!("api: connection {id} from {peer}");
        let reader = FrameReader::new(self.settings.max_request_bytes);
        self.conns
            .insert(id, (Arc::new(Conn::new(id, stream, peer)), reader));
    }

    fn on_readable(&mut self, id: u64) {
        let Some((conn, reader)) = self.conns.get_mut(&id) else {
            return;
        };
        let conn = Arc::clone(conn);
        let mut buf = [0u8; 16 << 10];
        let mut open = true;
        for _ in 0..READS_PER_EVENT {
            match (&conn.stream).read(&mut buf) {
                Ok(0) => {
                    open = false;
                    break;
                }
                Ok(n) => {
                    reader.push(&buf[..n]);
                    while let Some(frame) = reader.next_frame() {
                        if !dispatch(&self.pool, &self.settings, &conn, frame) {
                            open = false;
                            break;
                        }
                    }
                    if !open || n < buf.len() {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    log::debug!("api: connection {id} from {}: read: {e}", conn.peer);
                    open = false;
                    break;
                }
            }
        }
        if open {
            return;
        }
        if reader.pending() > 0 {
            log::debug!(
                "api: connection {id} from {} closed inside a frame ({} bytes pending)",
                conn.peer,
                reader.pending()
            );
        }
        let _ = self.epoll.delete(conn.stream.as_fd());
        if conn.close_read() {
            self.close(id);
        }
    }

    fn close(&mut self, id: u64) {
        if let Some((conn, _)) = self.conns.remove(&id) {
            let _ = self.epoll.delete(conn.stream.as_fd());
            log::debug!("api: connection {id} from {} closed", conn.peer);
        }
    }
}

/// Hands one frame to the pool; false when the connection must close (the queue is full).
fn dispatch(pool: &Pool, settings: &ApiSettings, conn: &Arc<Conn>, frame: Frame) -> bool {
    let refuse = |stream_id, code, message| Work::Refuse {
        conn: Arc::clone(conn),
        stream_id,
        code,
        message,
    };
    let work = match frame {
        Frame::Whole { header, .. } | Frame::Oversized { header }
            if header.type_ != MESSAGE_TYPE_REQUEST =>
        {
            log::debug!(
                "api: ignoring a frame of type {} from {}",
                header.type_,
                conn.peer
            );
            return true;
        }
        Frame::Oversized { header } => refuse(
            header.stream_id,
            Code::RESOURCE_EXHAUSTED,
            format!(
                "request: {} bytes is over the limit of {} bytes (max_request_bytes)",
                header.length, settings.max_request_bytes
            ),
        ),
        Frame::Whole { header, .. } if conn.in_flight() >= MAX_IN_FLIGHT_PER_CONNECTION => refuse(
            header.stream_id,
            Code::UNAVAILABLE,
            format!(
                "{MAX_IN_FLIGHT_PER_CONNECTION} requests are already in flight on this connection"
            ),
        ),
        Frame::Whole { header, payload } => Work::Call {
            conn: Arc::clone(conn),
            header,
            payload,
            received: Instant::now(),
        },
    };
    match pool.submit(work) {
        Ok(()) => true,
        Err(_) => {
            log::warn!(
                "api: {QUEUE} requests are queued; closing the connection of {}",
                conn.peer
            );
            false
        }
    }
}

/// At most one warning a second of a kind that a peer can trigger at will; the rest are counted.
#[derive(Default)]
struct LogLimit {
    last: Option<Instant>,
    suppressed: u64,
}

impl LogLimit {
    fn warn(&mut self, message: std::fmt::Arguments<'_>) {
        let now = Instant::now();
        if self
            .last
            .is_some_and(|last| now.duration_since(last) < Duration::from_secs(1))
        {
            self.suppressed += 1;
            return;
        }
        if self.suppressed > 0 {
            log::warn!("{message} (and {} more refusals)", self.suppressed);
        } else {
            log::warn!("{message}");
        }
        self.last = Some(now);
        self.suppressed = 0;
    }
}

#[cfg(test)]
mod tests;
