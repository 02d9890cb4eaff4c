//! knid's ttrpc server. The ttrpc crate's own sync server starts about six threads per
//! connection; a node daemon must hold a thousand idle connections without a thread each and
//! must authorise every caller before reading a byte. This one has a single I/O role (epoll over
//! the listener and every connection, [`io`]: it reads and decodes frames, [`crate::frame`]) that its
//! threads hold in turn, leader and followers ([`pool`]): the thread that reads a request runs
//! it itself, so no request waits for a second thread to wake. It first hands the role to an
//! idle thread, or, when the request is the only work waiting, parks it where an idle thread
//! watches it in the kernel ([`lookout`]) and wakes only if something comes for the role. The threads grow on demand to a cap and shrink back when idle. It serves the
//! method map the ttrpc code generator makes ([`crate::service::services`]), so the services are
//! the same ones ttrpc's server would run.
//!
//! A program can lend it the thread that would otherwise only wait for its own rare work
//! ([`Server::with_chores`], [`Server::serve_here`]): that work ([`Chores`], knid's periodic jobs
//! and signals) is watched in the same epoll wait and run by the threads like a request, and
//! the lent thread holds the I/O role whenever the server is idle, so an idle program has that
//! one thread.
//!
//! Every connection's peer is checked with SO_PEERCRED against `allowed_uids`/`allowed_gids` at
//! accept: a refused one is closed unread and logged with its pid, uid and gid. Past
//! `max_connections`, new connections are closed at once. A request over `max_request_bytes` is
//! answered ResourceExhausted and its payload skipped; a payload that is not a ttrpc Request is
//! InvalidArgument, an unknown method Unimplemented; frames that are not requests are ignored;
//! the connection keeps working after each. A peer that half-closes still gets its answers.
//!
//! No connection can slow another down:
//! - handlers never write to a socket that has no room: answers go out at once when they can and
//!   otherwise wait in the connection's own outbox ([`outbox`]) for the I/O role;
//! - a connection over its own limits ([`LIMITS`](limits::LIMITS): requests in flight, their
//!   bytes, answers its peer has not read) is simply not read until it is under them again, so
//!   its backlog stays in its own socket; nothing it does fills a queue other connections share;
//! - threads take connections in turn, one request each, and one thread always keeps the I/O
//!   role, or watches it parked, however many requests run ([`pool`]);
//! - a peer that reads none of its answers for [`WRITE_TIMEOUT`], or leaves a frame unfinished for
//!   [`READ_TIMEOUT`], is disconnected and logged with its credentials.

mod chores;
mod conn;
mod io;
mod limits;
mod lookout;
mod outbox;
mod pool;
mod waker;

use std::os::unix::net::UnixListener;

use knid_core::config::ApiSettings;

pub use chores::Chores;
pub use conn::Peer;
use limits::Timeouts;
pub use limits::{MAX_HANDLER_THREADS, MAX_IN_FLIGHT_PER_CONNECTION, READ_TIMEOUT, WRITE_TIMEOUT};
pub(crate) use pool::deadline;
pub use pool::{Leave, Methods};
use waker::{Control, Waker};

/// A running server; see the module docs.
pub struct Server {
    waker: Waker,
    /// Until shut down.
    pool: Option<pool::Pool>,
}

impl Server {
    /// Serves `methods` on `listener` (already bound, e.g. by [`crate::socket::bind_listener`])
    /// under `settings`, on a new thread.
    pub fn start(
        listener: UnixListener,
        methods: Methods,
        settings: ApiSettings,
    ) -> std::io::Result<Self> {
        Self::start_with(listener, methods, settings, Timeouts::default())
    }

    fn start_with(
        listener: UnixListener,
        methods: Methods,
        settings: ApiSettings,
        timeouts: Timeouts,
    ) -> std::io::Result<Self> {
        let server = Self::new(listener, methods, settings, timeouts, None)?;
        if let Some(pool) = &server.pool {
            pool.begin()?;
        }
        Ok(server)
    }

    /// Serves `methods` on `listener` under `settings`, and runs `chores` beside the requests,
    /// from the moment a thread calls [`Server::serve_here`]: it is the thread in the I/O role
    /// whenever the server is idle. Until then connections wait in the listener's backlog.
    pub fn with_chores(
        listener: UnixListener,
        methods: Methods,
        settings: ApiSettings,
        chores: Box<dyn Chores>,
    ) -> std::io::Result<Self> {
        Self::new(
            listener,
            methods,
            settings,
            Timeouts::default(),
            Some(chores),
        )
    }

    fn new(
        listener: UnixListener,
        methods: Methods,
        settings: ApiSettings,
        timeouts: Timeouts,
        chores: Option<Box<dyn Chores>>,
    ) -> std::io::Result<Self> {
        let (waker, pool) = io::new(listener, methods, settings, timeouts, chores)?;
        Ok(Self {
            waker,
            pool: Some(pool),
        })
    }

    /// Lends the calling thread to the server until the chores ask it back ([`Chores::run`]
    /// breaks) or the server stops: it serves requests and runs the chores with the threads the
    /// server starts, and never ends for want of work. On return the I/O role is on a thread of
    /// the server's own, which serves on until [`Server::shutdown`]. Call once.
    pub fn serve_here(&self) -> Leave {
        self.pool
            .as_ref()
            .map_or(Leave::Stopped, pool::Pool::serve_here)
    }

    /// Stops accepting; open connections keep being served.
    pub fn stop_listening(&self) {
        self.waker.send(Control::StopListening);
    }

    /// Closes the listener and every connection and returns once they are closed. Requests
    /// being handled finish on their threads; their answers are dropped.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if let Some(pool) = self.pool.take() {
            self.waker.send(Control::Shutdown);
            pool.wait_stopped();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests;
