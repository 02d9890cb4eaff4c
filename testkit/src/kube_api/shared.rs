//! What the accept loop, the connection threads and the [`KubeApi`](super::KubeApi) share: the
//! cluster, the open connections, the requests answered.

use std::collections::HashMap;
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use rustls::ServerConfig;

use super::cluster::Cluster;
use super::http::Head;

/// One request the server answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// `GET`, ...
    pub method: String,
    /// The path, as sent (percent-encoded).
    pub path: String,
    /// The query string, raw, without the `?`; empty when none.
    pub query: String,
    /// Whether it asked to watch a collection.
    pub watch: bool,
    /// The HTTP status sent (200 for a watch, also one that ended with a 410 ERROR event).
    pub status: u16,
    /// The `Content-Type` header; empty when none.
    pub content_type: String,
    /// The body, as text (empty when none).
    pub body: String,
}

/// What the accept loop, the connection threads and the [`KubeApi`](super::KubeApi) share.
pub(super) struct Shared {
    pub cluster: Mutex<Cluster>,
    /// Signalled (under the cluster lock) on every change, and to wake watches being closed.
    pub changed: Condvar,
    pub token: String,
    pub tls: Arc<ServerConfig>,
    pub connections: Mutex<Connections>,
    pub requests: Mutex<Vec<Request>>,
    /// PATCHes still to be answered with 409 Conflict before any is applied.
    pub forced_conflicts: Mutex<u32>,
}

impl Shared {
    /// Wakes every watch waiting for a change, so that it rereads its state.
    pub(super) fn wake_watches(&self) {
        // Taking the lock orders this after any watch's check of its `closed` flag.
        let _cluster = lock(&self.cluster);
        self.changed.notify_all();
    }

    /// Whether the PATCH being served is to be answered with 409 (and one fewer after it).
    pub(super) fn take_forced_conflict(&self) -> bool {
        let mut left = lock(&self.forced_conflicts);
        let take = *left > 0;
        *left = left.saturating_sub(1);
        take
    }

    pub(super) fn record(&self, head: &Head, watch: bool, status: u16) {
        lock(&self.requests).push(Request {
            method: head.method.clone(),
            path: head.path.clone(),
            query: head.query.clone(),
            watch,
            status,
            content_type: head.header("content-type").unwrap_or_default().to_string(),
            body: String::from_utf8_lossy(&head.body).into_owned(),
        });
    }
}

/// The open connections and their threads.
#[derive(Default)]
pub(super) struct Connections {
    pub next_id: u64,
    pub open: HashMap<u64, Arc<Connection>>,
    pub threads: Vec<JoinHandle<()>>,
}

/// One client connection, as the other threads see it.
pub(super) struct Connection {
    /// A second handle on the socket, to shut it down from another thread.
    pub socket: TcpStream,
    /// Streaming a watch now.
    pub watching: AtomicBool,
    pub closed: AtomicBool,
}

impl Connection {
    /// Ends the connection at once: TCP shutdown, no TLS close_notify, no last chunk.
    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let _ = self.socket.shutdown(Shutdown::Both);
    }

    /// Whether [`close`](Self::close) was called.
    pub(super) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Whether the client has closed its side (it went away mid-watch).
    pub(super) fn peer_gone(&self) -> bool {
        let events = PollFlags::from_bits_retain(libc::POLLRDHUP);
        let mut fds = [PollFd::new(self.socket.as_fd(), events)];
        // Only RDHUP was asked for, and the rest that poll reports (HUP, ERR) means gone too.
        // (nix's `revents()` cannot read RDHUP back: a bit it does not know.)
        poll(&mut fds, PollTimeout::ZERO).is_ok_and(|ready| ready > 0)
    }
}

/// Locks `mutex`, ignoring poisoning: a panicked test thread must not wedge the server.
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
