//! A synchronous, thread-free ttrpc client for one unix-socket connection, for short-lived
//! callers such as the `knid-cni` shim. [`crate::RuntimeClient`] wraps ttrpc's client, which
//! starts a reader and a writer thread per connection; a process that makes one or two calls and
//! exits pays for those threads on every exec. This client writes a request frame and reads
//! frames on the caller's thread until the matching response arrives.
//!
//! Wire format (ttrpc): a 10-byte header — payload length (u32 BE), stream id (u32 BE; odd for
//! client-initiated streams), message type (u8), flags (u8) — then a protobuf payload: a
//! `ttrpc.Request {service, method, payload, timeout_nano}` one way, a `ttrpc.Response {status,
//! payload}` back.

use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use protobuf::Message;
use ttrpc::proto::{
    Code, MessageHeader, Request, Response, MESSAGE_LENGTH_MAX, MESSAGE_TYPE_RESPONSE,
};

use crate::frame::{encode, Frame, FrameReader};
use crate::pb;

/// The ttrpc service name of the native API.
pub const RUNTIME_SERVICE: &str = "knid.v1.Runtime";

/// Errors of [`OneshotClient`].
#[derive(Debug, thiserror::Error)]
pub enum OneshotError {
    /// The socket could not be connected (missing, refused, not a socket).
    #[error("connect to {}", path.display())]
    Connect {
        /// Socket path.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// No answer within the call's timeout.
    #[error("no answer to {method} within {timeout:?}")]
    Timeout {
        /// The method called.
        method: String,
        /// The timeout.
        timeout: Duration,
    },
    /// The server closed the connection before answering.
    #[error("connection closed before the answer to {method}")]
    Closed {
        /// The method called.
        method: String,
    },
    /// Reading or writing the socket failed.
    #[error("{op} on the ttrpc connection")]
    Io {
        /// What was being done.
        op: &'static str,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A frame larger than ttrpc's limit, sent or received.
    #[error("ttrpc frame of {len} bytes exceeds the {MESSAGE_LENGTH_MAX}-byte limit")]
    Oversized {
        /// Its length.
        len: usize,
    },
    /// A protobuf message could not be encoded or decoded.
    #[error("{what}")]
    Codec {
        /// Which message.
        what: &'static str,
        /// Why.
        #[source]
        source: protobuf::Error,
    },
    /// The server answered with a non-OK status.
    #[error("{}: {message}", crate::errors::code_name(*code))]
    Rpc {
        /// Status code.
        code: Code,
        /// Status message (for knid: the error's cause chain).
        message: String,
    },
}

impl OneshotError {
    /// The status code when the server answered with one.
    pub fn code(&self) -> Option<Code> {
        match self {
            Self::Rpc { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// Whether the server could not be reached or did not answer (as opposed to answering
    /// with an error): the caller may try again later.
    pub fn is_unreachable(&self) -> bool {
        matches!(
            self,
            Self::Connect { .. } | Self::Timeout { .. } | Self::Closed { .. } | Self::Io { .. }
        )
    }
}

/// One connection to a ttrpc server; calls run on the caller's thread, one at a time.
///
/// The socket is non-blocking and every wait is a `poll` bounded by what is left of the call:
/// a call is one write, one poll and, when the answer comes in one piece (as knid writes it),
/// one read, with no timeout to set on the socket before each.
#[derive(Debug)]
pub struct OneshotClient {
    stream: UnixStream,
    /// What bounds each wait of a call without a timeout of its own.
    io_timeout: Option<Duration>,
    /// The answers' bytes as they arrive, cut into frames (the server's own reader).
    frames: FrameReader,
    /// Where each read lands before it goes to `frames`; allocated once.
    scratch: Vec<u8>,
    /// The next client stream id: odd, incremented by 2 per call.
    next_stream_id: u32,
}

/// How much one read takes at most: a whole answer of knid's in one read.
const READ_CHUNK: usize = 16 * 1024;

impl OneshotClient {
    /// Connects to the unix socket at `path`. Connecting a unix socket does not wait for the
    /// server to accept, so only I/O needs a timeout: `io_timeout` bounds every later wait of
    /// a call that sets no timeout of its own (zero: none).
    pub fn connect(path: &Path, io_timeout: Duration) -> Result<Self, OneshotError> {
        let stream = UnixStream::connect(path).map_err(|source| OneshotError::Connect {
            path: path.to_owned(),
            source,
        })?;
        stream
            .set_nonblocking(true)
            .map_err(|source| OneshotError::Io {
                op: "make the connection non-blocking",
                source,
            })?;
        Ok(Self {
            stream,
            io_timeout: nonzero(io_timeout),
            frames: FrameReader::new(MESSAGE_LENGTH_MAX),
            scratch: vec![0; READ_CHUNK],
            next_stream_id: 1,
        })
    }

    /// Calls `/<service>/<method>` with `req` and decodes the answer. `timeout` bounds the
    /// whole call on this side and is sent as the server's deadline (`timeout_nano`); zero
    /// means no limit.
    pub fn call<Req: Message, Resp: Message>(
        &mut self,
        service: &str,
        method: &str,
        req: &Req,
        timeout: Duration,
    ) -> Result<Resp, OneshotError> {
        let deadline = nonzero(timeout).map(|t| Instant::now() + t);
        let stream_id = self.next_stream_id;
        self.next_stream_id = self.next_stream_id.wrapping_add(2);

        let mut envelope = Request::new();
        envelope.service = service.to_owned();
        envelope.method = method.to_owned();
        envelope.payload = req.write_to_bytes().map_err(|source| OneshotError::Codec {
            what: "encode request",
            source,
        })?;
        envelope.timeout_nano = i64::try_from(timeout.as_nanos()).unwrap_or(i64::MAX);
        let body = envelope
            .write_to_bytes()
            .map_err(|source| OneshotError::Codec {
                what: "encode ttrpc request",
                source,
            })?;
        self.write_frame(stream_id, &body, deadline, method, timeout)?;

        loop {
            let (header, payload) = self.read_frame(deadline, method, timeout)?;
            // Anything else on the connection (another stream, a data frame) is not ours.
            if header.type_ != MESSAGE_TYPE_RESPONSE || header.stream_id != stream_id {
                continue;
            }
            return answer(&payload);
        }
    }

    /// `Attach`.
    pub fn attach(
        &mut self,
        req: &pb::AttachRequest,
        timeout: Duration,
    ) -> Result<pb::Sandbox, OneshotError> {
        self.call(RUNTIME_SERVICE, "Attach", req, timeout)
    }

    /// `Detach`.
    pub fn detach(
        &mut self,
        req: &pb::DetachRequest,
        timeout: Duration,
    ) -> Result<pb::DetachResponse, OneshotError> {
        self.call(RUNTIME_SERVICE, "Detach", req, timeout)
    }

    /// `Check`.
    pub fn check(
        &mut self,
        req: &pb::CheckRequest,
        timeout: Duration,
    ) -> Result<pb::CheckResponse, OneshotError> {
        self.call(RUNTIME_SERVICE, "Check", req, timeout)
    }

    /// `Inspect`.
    pub fn inspect(
        &mut self,
        req: &pb::InspectRequest,
        timeout: Duration,
    ) -> Result<pb::Sandbox, OneshotError> {
        self.call(RUNTIME_SERVICE, "Inspect", req, timeout)
    }

    /// `Status`.
    pub fn status(&mut self, timeout: Duration) -> Result<pb::StatusResponse, OneshotError> {
        self.call(
            RUNTIME_SERVICE,
            "Status",
            &pb::StatusRequest::new(),
            timeout,
        )
    }

    /// `GarbageCollect`.
    pub fn garbage_collect(
        &mut self,
        req: &pb::GarbageCollectRequest,
        timeout: Duration,
    ) -> Result<pb::GarbageCollectResponse, OneshotError> {
        self.call(RUNTIME_SERVICE, "GarbageCollect", req, timeout)
    }

    fn write_frame(
        &mut self,
        stream_id: u32,
        body: &[u8],
        deadline: Option<Instant>,
        method: &str,
        timeout: Duration,
    ) -> Result<(), OneshotError> {
        if body.len() > MESSAGE_LENGTH_MAX {
            return Err(OneshotError::Oversized { len: body.len() });
        }
        // One buffer, one write: a request is small, and the server reads header and body
        // from the same stream anyway. Its length is bounded by MESSAGE_LENGTH_MAX just above.
        let frame = encode(
            MessageHeader::new_request(stream_id, body.len() as u32),
            body,
        );
        let mut sent = 0;
        while sent < frame.len() {
            match self.stream.write(&frame[sent..]) {
                Ok(0) => {
                    return Err(OneshotError::Closed {
                        method: method.to_owned(),
                    })
                }
                Ok(n) => sent += n,
                // The server's queue is full: wait for room, as long as the call may.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.wait(PollFlags::POLLOUT, deadline, method, timeout)?;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_error("write request", e, method)),
            }
        }
        Ok(())
    }

    /// The next whole frame: from what an earlier read left, else read as it arrives.
    fn read_frame(
        &mut self,
        deadline: Option<Instant>,
        method: &str,
        timeout: Duration,
    ) -> Result<(MessageHeader, Vec<u8>), OneshotError> {
        loop {
            match self.frames.next_frame() {
                Some(Frame::Whole { header, payload }) => return Ok((header, payload)),
                // The connection is not reused after this, so the body is not drained.
                Some(Frame::Oversized { header }) => {
                    return Err(OneshotError::Oversized {
                        len: header.length as usize,
                    })
                }
                None => {}
            }
            self.wait(PollFlags::POLLIN, deadline, method, timeout)?;
            match self.stream.read(&mut self.scratch) {
                Ok(0) => {
                    return Err(OneshotError::Closed {
                        method: method.to_owned(),
                    })
                }
                Ok(n) => self.frames.push(&self.scratch[..n]),
                // Woken for no data: wait again.
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => return Err(io_error("read response", e, method)),
            }
        }
    }

    /// Waits until the socket is ready for `events`, for what is left of the call (each wait
    /// bounded anew, so a server trickling bytes cannot stretch the call), or for the
    /// connection's I/O timeout when the call has none.
    fn wait(
        &self,
        events: PollFlags,
        deadline: Option<Instant>,
        method: &str,
        timeout: Duration,
    ) -> Result<(), OneshotError> {
        let expired = || OneshotError::Timeout {
            method: method.to_owned(),
            timeout,
        };
        loop {
            let limit = match deadline {
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(expired());
                    }
                    Some(left)
                }
                None => self.io_timeout,
            };
            let mut fds = [PollFd::new(self.stream.as_fd(), events)];
            // Rounded up to whole milliseconds, so a wait that times out has used all its time.
            let millis = limit.map(|l| l.as_nanos().div_ceil(1_000_000));
            let poll_timeout = match millis {
                Some(ms) => PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX),
                None => PollTimeout::NONE,
            };
            match poll(&mut fds, poll_timeout) {
                // Rounded up: the time is over.
                Ok(0) => return Err(expired()),
                // Ready, or hung up or failed: the read or write that follows says which.
                Ok(_) => return Ok(()),
                Err(Errno::EINTR) => {}
                Err(e) => {
                    return Err(OneshotError::Io {
                        op: "wait for the ttrpc connection",
                        source: e.into(),
                    })
                }
            }
        }
    }
}

/// What a failed read or write means for the call.
fn io_error(op: &'static str, e: io::Error, method: &str) -> OneshotError {
    match e.kind() {
        io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset => OneshotError::Closed {
            method: method.to_owned(),
        },
        _ => OneshotError::Io { op, source: e },
    }
}

/// The answer in a response frame's body (a `ttrpc.Response`): its payload decoded as `Resp`
/// when the status is OK, else the status as [`OneshotError::Rpc`].
pub(crate) fn answer<Resp: Message>(body: &[u8]) -> Result<Resp, OneshotError> {
    let response = Response::parse_from_bytes(body).map_err(|source| OneshotError::Codec {
        what: "decode ttrpc response",
        source,
    })?;
    let status = response.status.get_or_default();
    let code = status.code.enum_value_or(Code::UNKNOWN);
    if code != Code::OK {
        return Err(OneshotError::Rpc {
            code,
            message: status.message.clone(),
        });
    }
    Resp::parse_from_bytes(&response.payload).map_err(|source| OneshotError::Codec {
        what: "decode response payload",
        source,
    })
}

/// `None` for zero: std refuses a zero socket timeout, and zero means "no limit" here.
fn nonzero(timeout: Duration) -> Option<Duration> {
    (!timeout.is_zero()).then_some(timeout)
}

#[cfg(test)]
mod tests;
