//! The I/O role, held by one of the server's threads at a time ([`super::pool`]): accepts and
//! authorises connections, reads their frames and puts requests in the line, writes the answers
//! their sockets had no room for, pauses the connections over their limits, disconnects peers
//! past their deadlines, and puts the [`Chores`] in line when they are due.

use std::collections::{HashMap, HashSet};
use std::io::{self, Read};
use std::ops::ControlFlow;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use knid_core::config::ApiSettings;
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use ttrpc::proto::{Code, MESSAGE_TYPE_REQUEST};

use super::chores::{Chores, Watch};
use super::conn::{status_frame, Call, Conn, Peer};
use super::limits::{Timeouts, LIMITS, MAX_HANDLER_THREADS};
use super::pool::{Methods, Pool, Role, Turn};
use super::waker::{Control, Waker};
use crate::frame::{Frame, FrameReader};

/// Reads of one connection per readiness event, so one busy peer cannot starve the others.
const READS_PER_EVENT: usize = 4;
/// The most one read takes from a connection.
const READ_CHUNK: usize = 16 << 10;
/// How long accepting pauses when the process is out of file descriptors.
const ACCEPT_PAUSE: Duration = Duration::from_millis(500);
/// How often deadlines are checked while some connection has one running.
const TICK: Duration = Duration::from_millis(250);

const LISTENER: u64 = 0;
const WAKER: u64 = 1;
const CHORES: u64 = 2;
const FIRST_CONN: u64 = 3;

/// The I/O role over `listener` (and the bell of `chores`), put in the pool's hands: no thread
/// holds it until [`Pool::begin`] or [`Pool::serve_here`].
pub(super) fn new(
    listener: UnixListener,
    methods: Methods,
    settings: ApiSettings,
    timeouts: Timeouts,
    chores: Option<Box<dyn Chores>>,
) -> io::Result<(Waker, Pool)> {
    listener.set_nonblocking(true)?;
    let (wake, waker_rx) = UnixStream::pair()?;
    wake.set_nonblocking(true)?;
    waker_rx.set_nonblocking(true)?;
    let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).map_err(io::Error::from)?;
    epoll
        .add(&listener, EpollEvent::new(EpollFlags::EPOLLIN, LISTENER))
        .map_err(io::Error::from)?;
    epoll
        .add(&waker_rx, EpollEvent::new(EpollFlags::EPOLLIN, WAKER))
        .map_err(io::Error::from)?;
    let watch = match &chores {
        Some(chores) => {
            let bell = chores.bell().try_clone_to_owned()?;
            epoll
                .add(&bell, EpollEvent::new(bell_events(), CHORES))
                .map_err(io::Error::from)?;
            Some(Watch::new(bell))
        }
        None => None,
    };
    let (tx, control) = crossbeam_channel::unbounded();
    let waker = Waker {
        tx,
        waker: Arc::new(wake),
    };
    let pool = Pool::new(
        methods,
        settings.request_timeout,
        waker.clone(),
        MAX_HANDLER_THREADS + 1,
        chores,
    );
    let io = Io {
        epoll,
        listener: Some(listener),
        accept_paused: None,
        waker_rx,
        control,
        chores: watch,
        conns: HashMap::new(),
        timed: HashSet::new(),
        last_tick: Instant::now(),
        next_id: FIRST_CONN,
        pool: pool.clone(),
        settings,
        timeouts,
        refusals: LogLimit::default(),
        disconnects: LogLimit::default(),
        scratch: vec![0; READ_CHUNK].into_boxed_slice(),
    };
    pool.hold(Box::new(io));
    Ok((waker, pool))
}

/// What the chores' bell is watched for: one wake-up, then none until the chores ran
/// ([`Control::ChoresDone`] arms it again), so that a bell rung while they run does not spin.
fn bell_events() -> EpollFlags {
    EpollFlags::EPOLLIN | EpollFlags::EPOLLONESHOT
}

/// A connection as the I/O role holds it.
struct Entry {
    conn: Arc<Conn>,
    reader: FrameReader,
    /// What epoll watches for it (empty once deregistered).
    interest: EpollFlags,
    /// Still in the epoll set.
    registered: bool,
    /// Since when a frame has been unfinished.
    partial_since: Option<Instant>,
}

/// The I/O role's state, passed from thread to thread.
pub(super) struct Io {
    epoll: Epoll,
    listener: Option<UnixListener>,
    /// Accepting stopped (out of file descriptors) until then.
    accept_paused: Option<Instant>,
    waker_rx: UnixStream,
    control: Receiver<Control>,
    /// The chores, until they asked to run no more.
    chores: Option<Watch>,
    conns: HashMap<u64, Entry>,
    /// Connections with a deadline running: an unfinished frame or unread answers.
    timed: HashSet<u64>,
    last_tick: Instant,
    next_id: u64,
    pool: Pool,
    settings: ApiSettings,
    timeouts: Timeouts,
    refusals: LogLimit,
    disconnects: LogLimit,
    /// What every connection's reads land in before their frames are cut: one buffer for all
    /// (a read buffer on the stack was zeroed at every read, 16 KiB of memset per request).
    scratch: Box<[u8]>,
}

impl Role for Io {
    fn turn(&mut self, idle_after: Option<Duration>) -> Turn {
        Io::turn(self, idle_after)
    }

    fn wakes_in(&self) -> Option<Duration> {
        self.next_timer()
    }

    fn ready_fd(&self) -> BorrowedFd<'_> {
        self.epoll.0.as_fd()
    }
}

impl Io {
    /// One wait for events and their handling. With `idle_after`, the wait ends after at most
    /// that long without any ([`Turn::Idle`]). Chores that came due count as events.
    pub(super) fn turn(&mut self, idle_after: Option<Duration>) -> Turn {
        let mut events = [EpollEvent::empty(); 64];
        self.resume_accepting();
        let timeout = [self.next_timer(), idle_after].into_iter().flatten().min();
        let timeout = timeout.map_or(EpollTimeout::NONE, |t| {
            EpollTimeout::from(u16::try_from(t.as_millis()).unwrap_or(u16::MAX))
        });
        let n = match self.epoll.wait(&mut events, timeout) {
            Ok(n) => n,
            Err(nix::Error::EINTR) => return Turn::Busy,
            Err(e) => {
                log::error!("api: epoll_wait failed, the API stops serving: {e}");
                return Turn::Stopped;
            }
        };
        let mut rang = false;
        for event in &events[..n] {
            match event.data() {
                LISTENER => self.accept(),
                WAKER => {
                    if !self.on_control() {
                        return Turn::Stopped;
                    }
                }
                CHORES => rang = true,
                id => self.on_event(id, event.events()),
            }
        }
        if !self.timed.is_empty() && self.last_tick.elapsed() >= TICK {
            self.enforce_deadlines();
        }
        if self.chores.as_mut().is_some_and(|w| w.start(rang)) {
            self.pool.chores_due();
            return Turn::Busy;
        }
        if n == 0 {
            Turn::Idle
        } else {
            Turn::Busy
        }
    }

    /// How long until a deadline of the role's own wants a turn without events: accepting
    /// paused, a connection's deadline running (checked every [`TICK`]), the chores due.
    fn next_timer(&self) -> Option<Duration> {
        let timer = if self.accept_paused.is_some() {
            Some(ACCEPT_PAUSE)
        } else if !self.timed.is_empty() {
            Some(TICK)
        } else {
            None
        };
        let chores_due = self.chores.as_ref().and_then(Watch::wait);
        [timer, chores_due].into_iter().flatten().min()
    }

    /// Handles queued controls; false when the server shuts down.
    fn on_control(&mut self) -> bool {
        let mut sink = [0u8; 64];
        while matches!((&self.waker_rx).read(&mut sink), Ok(n) if n > 0) {}
        while let Ok(control) = self.control.try_recv() {
            match control {
                Control::Look(id) => {
                    if let Some(entry) = self.conns.get(&id) {
                        entry.conn.looked();
                        self.settle(id);
                    }
                }
                Control::StopListening => {
                    if let Some(listener) = self.listener.take() {
                        let _ = self.epoll.delete(&listener);
                        log::info!("api: stopped accepting connections");
                    }
                }
                Control::ChoresDone(ControlFlow::Continue(next)) => {
                    if let Some(watch) = &mut self.chores {
                        watch.running = false;
                        watch.next = next;
                        // Armed again: a bell rung while they ran wakes the next wait at once.
                        let mut event = EpollEvent::new(bell_events(), CHORES);
                        if let Err(e) = self.epoll.modify(&watch.bell, &mut event) {
                            log::error!("api: cannot watch the chores' bell again: {e}");
                        }
                    }
                }
                Control::ChoresDone(ControlFlow::Break(())) => {
                    if let Some(watch) = self.chores.take() {
                        let _ = self.epoll.delete(&watch.bell);
                    }
                }
                Control::HomeIdle | Control::CodeRelease => {}
                Control::Shutdown => {
                    for entry in self.conns.values() {
                        entry.conn.peer_gone();
                        let _ = entry.conn.stream.shutdown(std::net::Shutdown::Both);
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
        let interest = reading();
        let added = stream.set_nonblocking(true).and_then(|()| {
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
        let entry = Entry {
            conn: Arc::new(Conn::new(id, stream, peer)),
            reader: FrameReader::new(self.settings.max_request_bytes),
            interest,
            registered: true,
            partial_since: None,
        };
        self.conns.insert(id, entry);
    }

    /// Readiness of connection `id`.
    fn on_event(&mut self, id: u64, flags: EpollFlags) {
        let Some(entry) = self.conns.get_mut(&id) else {
            return;
        };
        if flags.contains(EpollFlags::EPOLLOUT) {
            if let Err(e) = entry.conn.flush() {
                log::debug!("api: connection {id} from {}: write: {e}", entry.conn.peer);
            }
        }
        let readable = EpollFlags::EPOLLIN
            | EpollFlags::EPOLLRDHUP
            | EpollFlags::EPOLLHUP
            | EpollFlags::EPOLLERR;
        if flags.intersects(readable) && entry.interest.contains(EpollFlags::EPOLLIN) {
            read(entry, &self.pool, &self.settings, &mut self.scratch);
        }
        if flags.intersects(EpollFlags::EPOLLHUP | EpollFlags::EPOLLERR) {
            // Gone both ways (hang-ups cannot be unwatched): what is unread stays unread, answers
            // still to come are dropped, and the connection closes when its requests are done.
            entry.conn.peer_gone();
            if entry.registered {
                let _ = self.epoll.delete(entry.conn.stream.as_fd());
                entry.registered = false;
            }
        }
        self.settle(id);
    }

    /// Brings connection `id` in line with its state: hands out the frames it may, pauses or
    /// resumes its reading, watches for room when answers wait, tracks its deadlines, and closes
    /// it when it is done.
    fn settle(&mut self, id: u64) {
        let Some(entry) = self.conns.get_mut(&id) else {
            return;
        };
        let conn = Arc::clone(&entry.conn);
        if !conn.gone() && drain(entry, &self.pool, &self.settings) {
            entry.partial_since = None;
        }
        let paused = conn.pause_if_over(&LIMITS);
        let now = Instant::now();
        if paused || !entry.reader.in_frame() || conn.read_closed() {
            entry.partial_since = None;
        } else {
            entry.partial_since.get_or_insert(now);
        }
        let (unread, _) = conn.unread(now);
        if conn.read_closed() && conn.drained() {
            if entry.reader.in_frame() {
                log::debug!(
                    "api: connection {id} from {} closed inside a frame ({} bytes pending)",
                    conn.peer,
                    entry.reader.pending()
                );
            }
            self.close(id);
            return;
        }
        let mut interest = EpollFlags::empty();
        if !paused && !conn.read_closed() {
            interest |= reading();
        }
        if unread > 0 {
            interest |= EpollFlags::EPOLLOUT;
        }
        if entry.registered && interest != entry.interest {
            let mut event = EpollEvent::new(interest, id);
            if let Err(e) = self.epoll.modify(conn.stream.as_fd(), &mut event) {
                log::warn!("api: connection {id} from {}: epoll: {e}", conn.peer);
            }
            entry.interest = interest;
        }
        if entry.partial_since.is_some() || unread > 0 {
            self.timed.insert(id);
        } else {
            self.timed.remove(&id);
        }
    }

    /// Disconnects the peers past a deadline: answers unread for the write timeout, a frame
    /// unfinished for the read timeout.
    fn enforce_deadlines(&mut self) {
        let now = Instant::now();
        self.last_tick = now;
        let mut late = Vec::new();
        for id in &self.timed {
            let Some(entry) = self.conns.get(id) else {
                continue;
            };
            let (unread, stalled) = entry.conn.unread(now);
            if stalled.is_some_and(|s| s >= self.timeouts.write) {
                late.push((
                    *id,
                    format!(
                        "it read none of its answers for {:?} ({unread} bytes waiting)",
                        self.timeouts.write
                    ),
                ));
            } else if entry
                .partial_since
                .is_some_and(|since| now.duration_since(since) >= self.timeouts.read)
            {
                late.push((
                    *id,
                    format!(
                        "it left a frame unfinished for {:?} ({} bytes of it)",
                        self.timeouts.read,
                        entry.reader.pending()
                    ),
                ));
            }
        }
        for (id, why) in late {
            if let Some(entry) = self.conns.get(&id) {
                self.disconnects.warn(format_args!(
                    "api: disconnecting connection {id} from {}: {why}",
                    entry.conn.peer
                ));
                entry.conn.peer_gone();
                let _ = entry.conn.stream.shutdown(std::net::Shutdown::Both);
            }
            if self.conns.get(&id).is_some_and(|e| e.conn.drained()) {
                self.close(id);
            } else if let Some(entry) = self.conns.get_mut(&id) {
                // Its requests still run; it closes when the last one is answered.
                if entry.registered {
                    let _ = self.epoll.delete(entry.conn.stream.as_fd());
                    entry.registered = false;
                }
                entry.partial_since = None;
                self.timed.remove(&id);
            }
        }
    }

    fn close(&mut self, id: u64) {
        self.timed.remove(&id);
        if let Some(entry) = self.conns.remove(&id) {
            if entry.registered {
                let _ = self.epoll.delete(entry.conn.stream.as_fd());
            }
            log::debug!("api: connection {id} from {} closed", entry.conn.peer);
        }
        // A burst of connections (a thousand idle ones) grew the tables: once most are gone,
        // they shrink back instead of keeping the burst's size for good.
        if self.conns.capacity() > 64 && self.conns.len() < self.conns.capacity() / 4 {
            self.conns.shrink_to(self.conns.len() * 2);
        }
        if self.timed.capacity() > 64 && self.timed.len() < self.timed.capacity() / 4 {
            self.timed.shrink_to(self.timed.len() * 2);
        }
    }
}

/// What a connection being read is watched for.
fn reading() -> EpollFlags {
    EpollFlags::EPOLLIN | EpollFlags::EPOLLRDHUP
}

/// Reads what the peer sent into `buf`, a bounded number of times, handing out frames as they
/// complete and stopping when the connection is over its limits.
fn read(entry: &mut Entry, pool: &Pool, settings: &ApiSettings, buf: &mut [u8]) {
    for _ in 0..READS_PER_EVENT {
        if entry.conn.over(&LIMITS) {
            return;
        }
        match (&entry.conn.stream).read(buf) {
            Ok(0) => {
                entry.conn.close_read();
                return;
            }
            Ok(n) => {
                entry.reader.push(&buf[..n]);
                if drain(entry, pool, settings) {
                    entry.partial_since = None;
                }
                if n < buf.len() {
                    return;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                log::debug!(
                    "api: connection {} from {}: read: {e}",
                    entry.conn.id,
                    entry.conn.peer
                );
                entry.conn.peer_gone();
                return;
            }
        }
    }
}

/// Hands out the complete frames read so far while the connection is under its limits; true when
/// at least one was.
fn drain(entry: &mut Entry, pool: &Pool, settings: &ApiSettings) -> bool {
    let mut any = false;
    while !entry.conn.over(&LIMITS) {
        let Some(frame) = entry.reader.next_frame() else {
            break;
        };
        any = true;
        dispatch(pool, settings, &entry.conn, frame);
    }
    any
}

/// Hands one frame to the pool, or answers it at once when it is refused.
fn dispatch(pool: &Pool, settings: &ApiSettings, conn: &Arc<Conn>, frame: Frame) {
    match frame {
        Frame::Whole { header, .. } | Frame::Oversized { header }
            if header.type_ != MESSAGE_TYPE_REQUEST =>
        {
            log::debug!(
                "api: ignoring a frame of type {} from {}",
                header.type_,
                conn.peer
            );
        }
        Frame::Oversized { header } => {
            let refusal = status_frame(
                header.stream_id,
                Code::RESOURCE_EXHAUSTED,
                format!(
                    "request: {} bytes is over the limit of {} bytes (max_request_bytes)",
                    header.length, settings.max_request_bytes
                ),
            );
            conn.push(&refusal);
        }
        Frame::Whole { header, payload } => pool.submit(
            conn,
            Call {
                header,
                payload,
                received: Instant::now(),
            },
        ),
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
            log::warn!("{message} (and {} more)", self.suppressed);
        } else {
            log::warn!("{message}");
        }
        self.last = Some(now);
        self.suppressed = 0;
    }
}
