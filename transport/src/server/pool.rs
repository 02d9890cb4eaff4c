//! The handler threads: decode a request, run its method, write the response. They grow on
//! demand up to a cap and shrink back when idle, so an idle daemon holds few threads however many
//! connections are open.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TrySendError};
use protobuf::Message;
use ttrpc::proto::{Code, MessageHeader, Request};

use super::conn::Conn;
use super::{Closer, Methods};

/// Handler threads kept when idle.
const WARM_THREADS: usize = 2;
/// How long a surplus handler thread waits for work before it exits.
const IDLE_EXIT: Duration = Duration::from_secs(5);
/// How long a response may wait for a peer that does not read.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// What a handler thread does.
pub(super) enum Work {
    /// Answer a request frame.
    Call {
        conn: Arc<Conn>,
        header: MessageHeader,
        payload: Vec<u8>,
        received: Instant,
    },
    /// Answer a stream with a status (refusals decided by the I/O thread).
    Refuse {
        conn: Arc<Conn>,
        stream_id: u32,
        code: Code,
        message: String,
    },
}

impl Work {
    fn conn(&self) -> &Arc<Conn> {
        match self {
            Work::Call { conn, .. } | Work::Refuse { conn, .. } => conn,
        }
    }
}

struct Shared {
    methods: Methods,
    request_timeout: Duration,
    closer: Closer,
    threads: AtomicUsize,
    idle: AtomicUsize,
    max_threads: usize,
}

/// The handler threads and their queue.
pub(super) struct Pool {
    tx: Sender<Work>,
    rx: Receiver<Work>,
    shared: Arc<Shared>,
}

impl Pool {
    pub(super) fn new(
        methods: Methods,
        request_timeout: Duration,
        closer: Closer,
        max_threads: usize,
        queue: usize,
    ) -> Self {
        let (tx, rx) = crossbeam_channel::bounded(queue);
        Self {
            tx,
            rx,
            shared: Arc::new(Shared {
                methods,
                request_timeout,
                closer,
                threads: AtomicUsize::new(0),
                idle: AtomicUsize::new(0),
                max_threads,
            }),
        }
    }

    /// Queues `work` (counted in its connection's in-flight requests), starting a thread when
    /// none is idle and the cap allows. Gives the work back when the queue is full.
    pub(super) fn submit(&self, work: Work) -> Result<(), Work> {
        work.conn().begin();
        if self.shared.idle.load(Ordering::SeqCst) == 0 {
            self.spawn();
        }
        self.tx.try_send(work).map_err(|e| {
            let work = match e {
                TrySendError::Full(w) | TrySendError::Disconnected(w) => w,
            };
            work.conn().end();
            work
        })
    }

    fn spawn(&self) {
        let shared = Arc::clone(&self.shared);
        let n = shared.threads.fetch_add(1, Ordering::SeqCst);
        if n >= shared.max_threads {
            shared.threads.fetch_sub(1, Ordering::SeqCst);
            return;
        }
        shared.idle.fetch_add(1, Ordering::SeqCst);
        let rx = self.rx.clone();
        let spawned = std::thread::Builder::new()
            .name("knid-api".into())
            .spawn(move || run(&shared, &rx));
        if let Err(e) = spawned {
            log::warn!("api: cannot start a handler thread: {e}");
            self.shared.threads.fetch_sub(1, Ordering::SeqCst);
            self.shared.idle.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// One handler thread: the caller counted it in `threads` and `idle`.
fn run(shared: &Shared, rx: &Receiver<Work>) {
    loop {
        match rx.recv_timeout(IDLE_EXIT) {
            Ok(work) => {
                shared.idle.fetch_sub(1, Ordering::SeqCst);
                let conn = Arc::clone(work.conn());
                answer(shared, work);
                if conn.end() {
                    shared.closer.close(conn.id);
                }
                shared.idle.fetch_add(1, Ordering::SeqCst);
            }
            Err(RecvTimeoutError::Timeout) => {
                let n = shared.threads.load(Ordering::SeqCst);
                if n > WARM_THREADS
                    && shared
                        .threads
                        .compare_exchange(n, n - 1, Ordering::SeqCst, Ordering::SeqCst)
                        .is_ok()
                {
                    break;
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

fn answer(shared: &Shared, work: Work) {
    match work {
        Work::Refuse {
            conn,
            stream_id,
            code,
            message,
        } => conn.write_status(stream_id, code, message, WRITE_TIMEOUT),
        Work::Call {
            conn,
            header,
            payload,
            received,
        } => match call(shared, &conn, header, &payload, received) {
            Ok((header, payload)) => conn.write_frame(header, &payload, WRITE_TIMEOUT),
            Err((code, message)) => {
                conn.write_status(header.stream_id, code, message, WRITE_TIMEOUT)
            }
        },
    }
}

type Answer = Result<(MessageHeader, Vec<u8>), (Code, String)>;

/// Decodes and runs one request; the response frame, or the status to answer instead.
fn call(
    shared: &Shared,
    conn: &Conn,
    header: MessageHeader,
    payload: &[u8],
    received: Instant,
) -> Answer {
    let req = Request::parse_from_bytes(payload).map_err(|e| {
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
        Ok(Ok(())) => res_rx.try_recv().map_err(|_| {
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
