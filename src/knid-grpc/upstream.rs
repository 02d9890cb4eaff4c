//! knid's side of one gRPC connection: a ttrpc connection to knid's socket, opened at the first
//! call and opened again at the next call after knid went away, so knid restarting needs no
//! restart here. Calls are multiplexed on it by stream id, as ttrpc clients do; when knid closes
//! the connection every call waiting on it fails at once (UNAVAILABLE), never after a timeout.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use protobuf::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;
use tokio::sync::oneshot;
use ttrpc::proto::{
    MessageHeader, Request, Response, MESSAGE_HEADER_LENGTH, MESSAGE_LENGTH_MAX,
    MESSAGE_TYPE_REQUEST, MESSAGE_TYPE_RESPONSE,
};

/// How long connecting to knid's socket may take; a unix socket connects at once or not at all,
/// unless knid's accept queue is full.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Why a call got no answer from knid.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// knid's socket refused or is missing: knid is not running.
    #[error("knid is not serving on {}: {source}", socket.display())]
    Connect {
        socket: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The connection to knid broke before the answer came (knid stopped or closed it).
    #[error("the connection to knid closed before it answered")]
    Closed,
    /// No answer within the call's deadline (and a grace for knid's own answer to arrive).
    #[error("knid did not answer within {0:?}")]
    NoAnswer(Duration),
    /// The request is larger than a ttrpc frame may be.
    #[error("request of {0} bytes is over ttrpc's {MESSAGE_LENGTH_MAX}-byte frame limit")]
    TooLarge(usize),
    /// The ttrpc envelope around the request would not encode.
    #[error("encode the ttrpc request: {0}")]
    Encode(#[source] protobuf::Error),
    /// knid answered with bytes that are not a ttrpc Response.
    #[error("knid's answer is not a ttrpc Response: {0}")]
    BadAnswer(#[source] protobuf::Error),
}

/// Calls waiting for their answers, by stream id; `None` once the connection is gone.
type Waiting = Option<HashMap<u32, oneshot::Sender<Response>>>;

/// One open ttrpc connection.
struct Connection {
    writer: tokio::sync::Mutex<OwnedWriteHalf>,
    waiting: Arc<Mutex<Waiting>>,
    next_stream: Mutex<u32>,
}

impl Connection {
    fn is_open(&self) -> bool {
        lock(&self.waiting).is_some()
    }
}

/// The ttrpc connection one gRPC connection forwards its calls on.
pub struct Upstream {
    socket: PathBuf,
    current: tokio::sync::Mutex<Option<Arc<Connection>>>,
}

impl Upstream {
    /// Nothing is connected until the first call.
    pub fn new(socket: &Path) -> Self {
        Self {
            socket: socket.to_owned(),
            current: tokio::sync::Mutex::new(None),
        }
    }

    /// Sends `req` to knid and waits for its answer for at most `wait`.
    pub async fn call(&self, req: &Request, wait: Duration) -> Result<Response, UpstreamError> {
        let frame_len = req.compute_size();
        let len = usize::try_from(frame_len).unwrap_or(usize::MAX);
        if len > MESSAGE_LENGTH_MAX {
            return Err(UpstreamError::TooLarge(len));
        }
        let conn = self.connection().await?;
        let (tx, rx) = oneshot::channel();
        let stream_id = {
            let mut next = lock(&conn.next_stream);
            let id = *next;
            // Client stream ids are odd, as ttrpc's own clients number them.
            *next = next.wrapping_add(2);
            id
        };
        match lock(&conn.waiting).as_mut() {
            Some(waiting) => waiting.insert(stream_id, tx),
            None => return Err(UpstreamError::Closed),
        };
        let mut frame: Vec<u8> = MessageHeader {
            length: u32::try_from(len).unwrap_or(u32::MAX),
            stream_id,
            type_: MESSAGE_TYPE_REQUEST,
            flags: 0,
        }
        .into();
        frame.reserve(len);
        // Encoding the envelope copies the caller's payload bytes in; they are never decoded.
        if let Err(e) = req.write_to_vec(&mut frame) {
            forget(&conn, stream_id);
            return Err(UpstreamError::Encode(e));
        }
        let written = conn.writer.lock().await.write_all(&frame).await;
        if written.is_err() {
            close(&conn.waiting);
            return Err(UpstreamError::Closed);
        }
        match tokio::time::timeout(wait, rx).await {
            Ok(Ok(resp)) => Ok(resp),
            Ok(Err(_)) => Err(UpstreamError::Closed),
            Err(_) => {
                forget(&conn, stream_id);
                Err(UpstreamError::NoAnswer(wait))
            }
        }
    }

    /// The open connection, or a new one when there is none or knid closed it.
    async fn connection(&self) -> Result<Arc<Connection>, UpstreamError> {
        let mut current = self.current.lock().await;
        if let Some(conn) = current.as_ref().filter(|c| c.is_open()) {
            return Ok(Arc::clone(conn));
        }
        let connect_error = |source| UpstreamError::Connect {
            socket: self.socket.clone(),
            source,
        };
        let stream = tokio::time::timeout(CONNECT_TIMEOUT, UnixStream::connect(&self.socket))
            .await
            .map_err(|_| connect_error(io::ErrorKind::TimedOut.into()))?
            .map_err(connect_error)?;
        let (reader, writer) = stream.into_split();
        let waiting = Arc::new(Mutex::new(Some(HashMap::new())));
        tokio::spawn(read_answers(reader, Arc::clone(&waiting)));
        let conn = Arc::new(Connection {
            writer: tokio::sync::Mutex::new(writer),
            waiting,
            next_stream: Mutex::new(1),
        });
        *current = Some(Arc::clone(&conn));
        Ok(conn)
    }
}

/// Hands each answer frame to the call waiting for it, until knid closes the connection; then
/// every call still waiting is woken with nothing.
async fn read_answers(mut reader: OwnedReadHalf, waiting: Arc<Mutex<Waiting>>) {
    let mut header = [0u8; MESSAGE_HEADER_LENGTH];
    loop {
        if reader.read_exact(&mut header).await.is_err() {
            break;
        }
        let header = MessageHeader::from(&header[..]);
        let len = header.length as usize;
        if len > MESSAGE_LENGTH_MAX {
            log::warn!("knid sent a frame of {len} bytes, over ttrpc's limit; reconnecting");
            break;
        }
        let mut payload = vec![0u8; len];
        if reader.read_exact(&mut payload).await.is_err() {
            break;
        }
        if header.type_ != MESSAGE_TYPE_RESPONSE {
            continue;
        }
        let Some(tx) = lock(&waiting)
            .as_mut()
            .and_then(|w| w.remove(&header.stream_id))
        else {
            continue;
        };
        match Response::parse_from_bytes(&payload) {
            Ok(resp) => {
                let _ = tx.send(resp);
            }
            Err(e) => {
                log::warn!("{}", UpstreamError::BadAnswer(e));
                break;
            }
        }
    }
    close(&waiting);
}

/// Marks the connection gone; the calls still waiting get [`UpstreamError::Closed`].
fn close(waiting: &Mutex<Waiting>) {
    lock(waiting).take();
}

fn forget(conn: &Connection, stream_id: u32) {
    if let Some(waiting) = lock(&conn.waiting).as_mut() {
        waiting.remove(&stream_id);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
