//! The serving machinery: the state the threads share, the accept loop on the caller's
//! listener, and one thread per TLS connection reading requests until the client closes, the
//! server stops, or a watch is dropped.

use std::io::{BufReader, ErrorKind, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::eventfd::{EfdFlags, EventFd};
use rustls::{ServerConnection, StreamOwned};

use super::http::{self, ReadError};
use super::objects;
use super::routes::{self, Reply};
use super::shared::{lock, Connection, Shared};
use super::watch::{self, WatchEnd};

/// The most connections open at once; the server closes any beyond, right after accepting it.
pub const MAX_CONNECTIONS: usize = 2048;

/// How long a connection may sit idle between requests before the server closes it.
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// The accept loop serving one listener.
pub(super) struct Acceptor {
    thread: JoinHandle<()>,
    wake: Arc<EventFd>,
}

impl Acceptor {
    /// Starts accepting on `listener`.
    pub(super) fn spawn(shared: Arc<Shared>, listener: TcpListener) -> std::io::Result<Acceptor> {
        listener.set_nonblocking(true)?;
        let wake = Arc::new(EventFd::from_flags(EfdFlags::EFD_CLOEXEC)?);
        let thread_wake = Arc::clone(&wake);
        let thread = thread::Builder::new()
            .name("kube-api-accept".into())
            .spawn(move || accept_loop(&shared, &listener, &thread_wake))?;
        Ok(Acceptor { thread, wake })
    }

    /// Closes the listener and every connection, and joins every thread.
    pub(super) fn stop(self, shared: &Shared) {
        let _ = self.wake.write(1);
        let _ = self.thread.join();
        let threads = {
            let mut connections = lock(&shared.connections);
            for conn in connections.open.values() {
                conn.close();
            }
            std::mem::take(&mut connections.threads)
        };
        shared.wake_watches();
        for thread in threads {
            let _ = thread.join();
        }
    }
}

fn accept_loop(shared: &Arc<Shared>, listener: &TcpListener, wake: &EventFd) {
    loop {
        let mut fds = [
            PollFd::new(listener.as_fd(), PollFlags::POLLIN),
            PollFd::new(wake.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => {}
            Err(Errno::EINTR) => continue,
            Err(_) => {
                thread::sleep(Duration::from_millis(10));
                continue;
            }
        }
        if fds[1].revents().is_some_and(|revents| !revents.is_empty()) {
            return; // Dropping the listener: new connections are refused from now on.
        }
        match listener.accept() {
            Ok((tcp, _)) => admit(shared, tcp),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
            // Out of descriptors, say: back off rather than spin.
            Err(_) => thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// Hands `tcp` to a thread of its own, or closes it when [`MAX_CONNECTIONS`] are open.
fn admit(shared: &Arc<Shared>, tcp: TcpStream) {
    let mut connections = lock(&shared.connections);
    connections.threads.retain(|thread| !thread.is_finished());
    if connections.open.len() >= MAX_CONNECTIONS {
        return;
    }
    let setup = tcp
        .set_nonblocking(false)
        .and_then(|()| tcp.set_nodelay(true))
        .and_then(|()| tcp.set_read_timeout(Some(IDLE_TIMEOUT)))
        .and_then(|()| tcp.try_clone());
    let Ok(socket) = setup else { return };
    let conn = Arc::new(Connection {
        socket,
        watching: AtomicBool::new(false),
        closed: AtomicBool::new(false),
    });
    let id = connections.next_id;
    connections.next_id += 1;
    connections.open.insert(id, Arc::clone(&conn));
    let thread_shared = Arc::clone(shared);
    let spawned = thread::Builder::new()
        .name("kube-api-conn".into())
        .spawn(move || {
            serve_connection(&thread_shared, tcp, &conn);
            conn.close();
            lock(&thread_shared.connections).open.remove(&id);
        });
    match spawned {
        Ok(thread) => connections.threads.push(thread),
        Err(_) => {
            connections.open.remove(&id);
        }
    }
}

/// Serves requests on one connection until it closes.
fn serve_connection(shared: &Shared, tcp: TcpStream, conn: &Connection) {
    let Ok(tls) = ServerConnection::new(Arc::clone(&shared.tls)) else {
        return;
    };
    let mut stream = BufReader::new(StreamOwned::new(tls, tcp));
    loop {
        if conn.is_closed() {
            return;
        }
        let head = match http::read_request(&mut stream) {
            Ok(head) => head,
            Err(ReadError::Closed) => break,
            Err(ReadError::Io) => return,
            Err(ReadError::Bad(status, message)) => {
                let body = objects::status(status, "BadRequest", message, None);
                let _ = http::write_response(stream.get_mut(), status, &body, true);
                break;
            }
        };
        let close = head.wants_close();
        match routes::route(shared, &head) {
            Reply::Whole { status, body } => {
                shared.record(&head, routes::asks_for_watch(&head), status);
                if http::write_response(stream.get_mut(), status, &body, close).is_err() {
                    return;
                }
            }
            Reply::Watch(plan) => {
                shared.record(&head, true, 200);
                match watch::serve(shared, conn, stream.get_mut(), &plan, close) {
                    Ok(WatchEnd::Clean) => {}
                    Ok(WatchEnd::Abrupt) | Err(_) => return,
                }
            }
        }
        if close {
            break;
        }
    }
    // A clean end: the TLS close_notify, so the client sees no truncation.
    let tls = stream.get_mut();
    tls.conn.send_close_notify();
    let _ = tls.flush();
}
