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
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use protobuf::Message;
use ttrpc::proto::{
    Code, MessageHeader, Request, Response, MESSAGE_HEADER_LENGTH, MESSAGE_LENGTH_MAX,
    MESSAGE_TYPE_REQUEST, MESSAGE_TYPE_RESPONSE,
};

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
#[derive(Debug)]
pub struct OneshotClient {
    stream: UnixStream,
    /// The next client stream id: odd, incremented by 2 per call.
    next_stream_id: u32,
}

impl OneshotClient {
    /// Connects to the unix socket at `path`. Connecting a unix socket does not wait for the
    /// server to accept, so only I/O needs a timeout: `io_timeout` bounds every later read and
    /// write until a call sets its own.
    pub fn connect(path: &Path, io_timeout: Duration) -> Result<Self, OneshotError> {
        let stream = UnixStream::connect(path).map_err(|source| OneshotError::Connect {
            path: path.to_owned(),
            source,
        })?;
        let set = |r: io::Result<()>| {
            r.map_err(|source| OneshotError::Io {
                op: "set timeout",
                source,
            })
        };
        set(stream.set_read_timeout(nonzero(io_timeout)))?;
        set(stream.set_write_timeout(nonzero(io_timeout)))?;
        Ok(Self {
            stream,
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
        let header = MessageHeader {
            // Bounded by MESSAGE_LENGTH_MAX just above.
            length: body.len() as u32,
            stream_id,
            type_: MESSAGE_TYPE_REQUEST,
            flags: 0,
        };
        // One buffer, one write: a request is small, and the server reads header and body
        // from the same stream anyway.
        let mut frame = Vec::with_capacity(MESSAGE_HEADER_LENGTH + body.len());
        frame.extend_from_slice(&header.length.to_be_bytes());
        frame.extend_from_slice(&header.stream_id.to_be_bytes());
        frame.push(header.type_);
        frame.push(header.flags);
        frame.extend_from_slice(body);
        self.arm(deadline, method, timeout, true)?;
        self.stream
            .write_all(&frame)
            .map_err(|e| self.io_error("write request", e, method, timeout))
    }

    fn read_frame(
        &mut self,
        deadline: Option<Instant>,
        method: &str,
        timeout: Duration,
    ) -> Result<(MessageHeader, Vec<u8>), OneshotError> {
        let mut head = [0u8; MESSAGE_HEADER_LENGTH];
        self.read_exact(&mut head, deadline, method, timeout)?;
        let header = MessageHeader::from(head);
        let len = header.length as usize;
        if len > MESSAGE_LENGTH_MAX {
            // The connection is not reused after this, so the body is not drained.
            return Err(OneshotError::Oversized { len });
        }
        let mut payload = vec![0u8; len];
        self.read_exact(&mut payload, deadline, method, timeout)?;
        Ok((header, payload))
    }

    fn read_exact(
        &mut self,
        mut buf: &mut [u8],
        deadline: Option<Instant>,
        method: &str,
        timeout: Duration,
    ) -> Result<(), OneshotError> {
        while !buf.is_empty() {
            // Re-armed per read: a server trickling bytes must not stretch the call.
            self.arm(deadline, method, timeout, false)?;
            match self.stream.read(buf) {
                Ok(0) => {
                    return Err(OneshotError::Closed {
                        method: method.to_owned(),
                    })
                }
                Ok(n) => buf = &mut buf[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.io_error("read response", e, method, timeout)),
            }
        }
        Ok(())
    }

    /// Sets the socket timeout of the next read or write to what is left of the call.
    fn arm(
        &self,
        deadline: Option<Instant>,
        method: &str,
        timeout: Duration,
        write: bool,
    ) -> Result<(), OneshotError> {
        let Some(deadline) = deadline else {
            return Ok(());
        };
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(OneshotError::Timeout {
                method: method.to_owned(),
                timeout,
            });
        }
        let result = if write {
            self.stream.set_write_timeout(Some(left))
        } else {
            self.stream.set_read_timeout(Some(left))
        };
        result.map_err(|source| OneshotError::Io {
            op: "set timeout",
            source,
        })
    }

    fn io_error(
        &self,
        op: &'static str,
        e: io::Error,
        method: &str,
        timeout: Duration,
    ) -> OneshotError {
        match e.kind() {
            // What an expired SO_RCVTIMEO / SO_SNDTIMEO looks like.
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => OneshotError::Timeout {
                method: method.to_owned(),
                timeout,
            },
            io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset => OneshotError::Closed {
                method: method.to_owned(),
            },
            _ => OneshotError::Io { op, source: e },
        }
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
