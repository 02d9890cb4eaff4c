//! The handler threads: decode a request, run its method, hand the answer to its connection.
//! They grow on demand up to a cap and shrink back when idle, so an idle daemon holds few threads
//! however many connections are open.
//!
//! The line they serve holds connections, not requests: a connection with requests waiting is in
//! it once, a handler takes one request of the connection at its head and puts the connection
//! back at the end when more wait. So a connection with a hundred requests queued delays another
//! connection's request by at most one request per handler thread, never by its whole backlog.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use knid_core::locks::LockExt;
use protobuf::Message;
use ttrpc::proto::{Code, Request};

use super::conn::{response_frame, status_frame, Call, Conn};
use super::{Methods, Waker};

/// Handler threads kept while calls come: one serves a lone caller without starting a thread;
/// more start when calls overlap, and end again after [`IDLE_EXIT`].
const WARM_THREADS: usize = 1;
/// How long a surplus handler thread waits for work before it exits.
const IDLE_EXIT: Duration = Duration::from_secs(5);
/// How long the warm threads wait for work before they exit too: a caller that comes back
/// within it (a kubelet's status poll, a sandbox's next call) finds a thread; an idle daemon
/// holds none.
const WARM_IDLE_EXIT: Duration = Duration::from_secs(30);

struct Shared {
    methods: Methods,
    request_timeout: Duration,
    waker: Waker,
    threads: AtomicUsize,
    idle: AtomicUsize,
    max_threads: usize,
    /// The line, for handlers putting a connection back; emptied when the pool is dropped so
    /// that the threads see the line close.
    line: Mutex<Option<Sender<Arc<Conn>>>>,
    rx: Receiver<Arc<Conn>>,
    /// Held by [`schedule`] from its look at `idle` to its send, and by a thread deciding to
    /// exit: a connection is never sent to a line whose last thread is leaving.
    gate: Mutex<()>,
}

/// The handler threads and their line of connections.
pub(super) struct Pool {
    tx: Sender<Arc<Conn>>,
    shared: Arc<Shared>,
}

impl Pool {
    pub(super) fn new(
        methods: Methods,
        request_timeout: Duration,
        waker: Waker,
        max_threads: usize,
    ) -> Self {
        // At most one entry per connection: bounded by the connection cap.
        let (tx, rx) = crossbeam_channel::unbounded();
        Self {
            tx: tx.clone(),
            shared: Arc::new(Shared {
                methods,
                request_timeout,
                waker,
                threads: AtomicUsize::new(0),
                idle: AtomicUsize::new(0),
                max_threads,
                line: Mutex::new(Some(tx)),
                rx,
                gate: Mutex::new(()),
            }),
        }
    }

    /// Queues a request of `conn` (counted in its in-flight requests).
    pub(super) fn submit(&self, conn: &Arc<Conn>, call: Call) {
        if conn.enqueue(call) {
            schedule(&self.shared, &self.tx, Arc::clone(conn));
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shared.line.acquire().take();
    }
}

/// Puts `conn` in the line, starting a thread when none is idle and the cap allows.
fn schedule(shared: &Arc<Shared>, tx: &Sender<Arc<Conn>>, conn: Arc<Conn>) {
    let _gate = shared.gate.acquire();
    if shared.idle.load(Ordering::SeqCst) == 0 {
        spawn(shared);
    }
    // The line closes only when the server shuts down; the request is then dropped.
    let _ = tx.send(conn);
}

fn spawn(shared: &Arc<Shared>) {
    let n = shared.threads.fetch_add(1, Ordering::SeqCst);
    if n >= shared.max_threads {
        shared.threads.fetch_sub(1, Ordering::SeqCst);
        return;
    }
    shared.idle.fetch_add(1, Ordering::SeqCst);
    let thread_shared = Arc::clone(shared);
    let spawned = std::thread::Builder::new()
        .name("knid-api".into())
        .spawn(move || run(&thread_shared));
    if let Err(e) = spawned {
        log::warn!("api: cannot start a handler thread: {e}");
        shared.threads.fetch_sub(1, Ordering::SeqCst);
        shared.idle.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One handler thread: the caller counted it in `threads` and `idle`.
fn run(shared: &Arc<Shared>) {
    let mut last_call = Instant::now();
    loop {
        match shared.rx.recv_timeout(IDLE_EXIT) {
            Ok(conn) => {
                last_call = Instant::now();
                shared.idle.fetch_sub(1, Ordering::SeqCst);
                if let Some((call, more)) = conn.dequeue() {
                    if more {
                        if let Some(tx) = shared.line.acquire().clone() {
                            schedule(shared, &tx, Arc::clone(&conn));
                        }
                    }
                    let bytes = call.payload.len();
                    let frame = answer(shared, &conn, call);
                    if conn.answer(&frame, bytes) {
                        shared.waker.look(conn.id);
                    }
                }
                shared.idle.fetch_add(1, Ordering::SeqCst);
            }
            Err(RecvTimeoutError::Timeout) => {
                let n = shared.threads.load(Ordering::SeqCst);
                if n <= WARM_THREADS && last_call.elapsed() < WARM_IDLE_EXIT {
                    continue;
                }
                // Under the gate the line is empty and stays so until this thread no longer
                // counts as idle: a connection scheduled next starts a thread if none is left.
                let _gate = shared.gate.acquire();
                if shared.rx.is_empty()
                    && shared
                        .threads
                        .compare_exchange(n, n - 1, Ordering::SeqCst, Ordering::SeqCst)
                        .is_ok()
                {
                    shared.idle.fetch_sub(1, Ordering::SeqCst);
                    drop(_gate);
                    knid_core::memory::thread_ends_idle();
                    return;
                }
            }
            Err(RecvTimeoutError::Disconnected) => {
                shared.threads.fetch_sub(1, Ordering::SeqCst);
                break;
            }
        }
    }
    shared.idle.fetch_sub(1, Ordering::SeqCst);
}

/// The response frame for one request.
fn answer(shared: &Shared, conn: &Conn, call: Call) -> Vec<u8> {
    let stream_id = call.header.stream_id;
    match self::call(shared, conn, call) {
        Ok(payload) => response_frame(stream_id, &payload),
        Err((code, message)) => status_frame(stream_id, code, message),
    }
}

/// A response's payload, or the status to answer instead.
type Answer = Result<Vec<u8>, (Code, String)>;

/// Decodes and runs one request.
fn call(shared: &Shared, conn: &Conn, call: Call) -> Answer {
    let Call {
        header,
        payload,
        received,
    } = call;
    let req = Request::parse_from_bytes(&payload).map_err(|e| {
        (
            Code::INVALID_ARGUMENT,
            format!("request: not a ttrpc Request message: {e}"),
        )
    })?;
    let path = format!("/{}/{}", req.service, req.method);
    let method = shared
        .methods
        .get(&path)
        .ok_or_else(|| (Code::UNIMPLEMENTED, format!("{path}: no such method")))?;
    let timeout = timeout(req.timeout_nano, shared.request_timeout)
        .checked_sub(received.elapsed())
        .filter(|left| !left.is_zero())
        .ok_or_else(|| {
            (
                Code::DEADLINE_EXCEEDED,
                format!("{path}: the deadline passed while the request was queued"),
            )
        })?;
    let (res_tx, res_rx) = std::sync::mpsc::channel();
    let ctx = ttrpc::TtrpcContext {
        fd: conn.fd(),
        cancel_rx: crossbeam_channel::never(),
        mh: header,
        res_tx,
        metadata: ttrpc::context::from_pb(&req.metadata),
        timeout_nano: i64::try_from(timeout.as_nanos()).unwrap_or(i64::MAX),
        conn_ctx: Arc::clone(&conn.context),
    };
    match catch_unwind(AssertUnwindSafe(|| method.handler(ctx, req))) {
        Ok(Ok(())) => res_rx.try_recv().map(|(_, payload)| payload).map_err(|_| {
            (
                Code::INTERNAL,
                format!("{path}: the handler gave no response"),
            )
        }),
        // The generated handler fails when the payload does not decode as the method's request
        // (or the response would not encode).
        Ok(Err(e)) => Err((
            Code::INVALID_ARGUMENT,
            format!("{path}: {}", ttrpc_error(&e)),
        )),
        Err(_) => {
            log::error!("api: {path} panicked (request of {})", conn.peer);
            Err((Code::INTERNAL, format!("{path}: the handler panicked")))
        }
    }
}

/// The deadline a request runs under: its own, capped by `request_timeout`, which also applies
/// to a request that carries none.
pub(super) fn timeout(timeout_nano: i64, request_timeout: Duration) -> Duration {
    u64::try_from(timeout_nano)
        .ok()
        .filter(|n| *n > 0)
        .map_or(request_timeout, |n| {
            Duration::from_nanos(n).min(request_timeout)
        })
}

/// The caller's deadline, for the services: the handler gets [`timeout`] as the request's
/// `timeout_nano` but nothing enforces it, so the core gets it as an instant. Zero (or a
/// nonsensical negative) means none.
pub(crate) fn deadline(timeout_nano: i64, received: Instant) -> Option<Instant> {
    u64::try_from(timeout_nano)
        .ok()
        .filter(|nanos| *nanos > 0)
        .and_then(|nanos| received.checked_add(Duration::from_nanos(nanos)))
}

fn ttrpc_error(e: &ttrpc::Error) -> String {
    match e {
        ttrpc::Error::Others(text) => text.clone(),
        ttrpc::Error::RpcStatus(status) => status.message.clone(),
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests;
