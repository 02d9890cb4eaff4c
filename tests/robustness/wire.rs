//! Hand-built ttrpc frames on raw unix-socket connections, for tests/robustness.rs: a
//! 10-byte header — payload length (u32 BE), stream id (u32 BE), message type (u8: 1 request,
//! 2 response), flags (u8) — then the payload: a protobuf `ttrpc.Request {service, method,
//! payload, timeout_nano, metadata}` one way, a `ttrpc.Response {status, payload}` back.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use knid_transport::pb;
use protobuf::Message;
use testkit::{TestNode, RPC};
use ttrpc::proto::{Code, Request, Response};

/// The native service.
pub const RUNTIME: &str = "knid.v1.Runtime";
/// knid's default `max_request_bytes`: the largest frame payload it takes.
pub const MAX_REQUEST_BYTES: usize = 1 << 20;
/// Frame types.
pub const REQUEST: u8 = 1;
pub const RESPONSE: u8 = 2;
/// How long a raw connection waits for a byte before the test calls knid silent.
pub const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// A frame: the header as given (its length need not match the payload) and the payload.
pub fn frame(length: u32, stream_id: u32, kind: u8, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(10 + payload.len());
    out.extend_from_slice(&length.to_be_bytes());
    out.extend_from_slice(&stream_id.to_be_bytes());
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(payload);
    out
}

/// A well-formed request frame carrying `payload`.
pub fn request_frame(stream_id: u32, payload: &[u8]) -> Vec<u8> {
    let length = u32::try_from(payload.len()).expect("payload fits u32");
    frame(length, stream_id, REQUEST, 0, payload)
}

/// An encoded `ttrpc.Request` for `/<service>/<method>` carrying `payload`.
pub fn envelope(service: &str, method: &str, payload: Vec<u8>) -> Vec<u8> {
    let mut req = Request::new();
    req.service = service.to_owned();
    req.method = method.to_owned();
    req.payload = payload;
    req.timeout_nano = i64::try_from(RPC.as_nanos()).expect("timeout fits i64");
    req.write_to_bytes().expect("encode ttrpc request")
}

/// An encoded `Status` request.
pub fn status_envelope() -> Vec<u8> {
    envelope(RUNTIME, "Status", encode(&pb::StatusRequest::new()))
}

/// `message` encoded.
pub fn encode(message: &impl Message) -> Vec<u8> {
    message.write_to_bytes().expect("encode")
}

/// A `Status` request whose inner payload carries an unknown bytes field, so the whole
/// encoded `ttrpc.Request` is exactly `size` bytes (still a valid Status request).
pub fn status_envelope_of_size(size: usize) -> Vec<u8> {
    (size.saturating_sub(64)..size)
        .map(|pad| {
            let mut inner = pb::StatusRequest::new();
            // Field 15 is unknown to StatusRequest: kept and ignored.
            inner
                .mut_unknown_fields()
                .add_length_delimited(15, vec![b'p'; pad]);
            envelope(RUNTIME, "Status", encode(&inner))
        })
        .find(|body| body.len() == size)
        .unwrap_or_else(|| panic!("cannot build a Status request of exactly {size} bytes"))
}

/// A frame read back.
#[derive(Debug)]
pub struct Frame {
    /// Its stream.
    pub stream_id: u32,
    /// Its message type.
    pub kind: u8,
    /// Its payload.
    pub payload: Vec<u8>,
}

/// The status code and message of a response frame.
pub fn status_of(frame: &Frame) -> (Code, String) {
    assert_eq!(frame.kind, RESPONSE, "frame type of {frame:?}");
    let response = Response::parse_from_bytes(&frame.payload).expect("decode ttrpc response");
    let status = response.status.get_or_default();
    (
        status.code.enum_value_or(Code::UNKNOWN),
        status.message.clone(),
    )
}

/// One raw connection to knid.
pub struct Wire {
    /// The socket, for writes and reads the helpers do not cover.
    pub stream: UnixStream,
}

impl Wire {
    pub fn connect(node: &TestNode) -> Wire {
        let stream = UnixStream::connect(node.socket()).expect("connect to knid's socket");
        stream
            .set_read_timeout(Some(IO_TIMEOUT))
            .expect("read timeout");
        stream
            .set_write_timeout(Some(IO_TIMEOUT))
            .expect("write timeout");
        Wire { stream }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write to knid");
    }

    /// The next frame; `None` when knid closed the connection (EOF or reset) before one.
    pub fn read_frame(&mut self) -> Option<Frame> {
        self.next_frame().unwrap_or_else(|e| {
            if timed_out(&e) {
                panic!("knid sent nothing for {IO_TIMEOUT:?}")
            }
            panic!("read a frame from knid: {e}")
        })
    }

    /// The next frame, `Ok(None)` when knid closed the connection before one, or the error
    /// of the first read (a timeout).
    pub fn next_frame(&mut self) -> io::Result<Option<Frame>> {
        let mut head = [0u8; 10];
        match self.stream.read_exact(&mut head) {
            Ok(()) => {}
            Err(e) if closed(&e) => return Ok(None),
            Err(e) => return Err(e),
        }
        let length = u32::from_be_bytes(head[..4].try_into().expect("4 bytes"));
        assert!(
            length as usize <= MAX_REQUEST_BYTES,
            "knid sent a frame of {length} bytes"
        );
        let mut payload = vec![0; length as usize];
        self.stream
            .read_exact(&mut payload)
            .expect("read a frame payload from knid");
        Ok(Some(Frame {
            stream_id: u32::from_be_bytes(head[4..8].try_into().expect("4 bytes")),
            kind: head[8],
            payload,
        }))
    }

    /// The next frame, which must be the response on `stream_id`: its code and message.
    pub fn response(&mut self, stream_id: u32) -> (Code, String) {
        let frame = self
            .read_frame()
            .unwrap_or_else(|| panic!("knid closed the connection before answering {stream_id}"));
        assert_eq!(
            frame.stream_id, stream_id,
            "a frame for another stream first"
        );
        status_of(&frame)
    }

    /// Reads until every stream of `ids` was answered, and returns the answers; a frame on any
    /// other stream fails.
    pub fn responses(&mut self, ids: &[u32]) -> HashMap<u32, (Code, String)> {
        let mut got = HashMap::new();
        while got.len() < ids.len() {
            let frame = self.read_frame().unwrap_or_else(|| {
                panic!("knid closed the connection with streams {ids:?} unanswered ({got:?})")
            });
            assert!(
                ids.contains(&frame.stream_id) && !got.contains_key(&frame.stream_id),
                "a frame on stream {} which expects none (expected {ids:?}): {frame:?}",
                frame.stream_id
            );
            got.insert(frame.stream_id, status_of(&frame));
        }
        got
    }

    /// Sends `Status` on `stream_id` and asserts it is the next frame back, answered OK.
    pub fn status_ok(&mut self, stream_id: u32) {
        self.send(&request_frame(stream_id, &status_envelope()));
        let (code, message) = self.response(stream_id);
        assert_eq!(code, Code::OK, "Status on a used connection: {message}");
    }

    /// Whether knid closes the connection (EOF or reset) within `timeout`; what it sends
    /// before is discarded.
    pub fn closed_within(&mut self, timeout: Duration) -> bool {
        let until = Instant::now() + timeout;
        let mut buf = [0u8; 4096];
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            self.stream
                .set_read_timeout(Some(left))
                .expect("read timeout");
            match self.stream.read(&mut buf) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(e) if closed(&e) => return true,
                Err(e) if timed_out(&e) => return false,
                Err(e) => panic!("read from knid: {e}"),
            }
        }
    }
}

/// Errors meaning the peer closed the connection.
pub fn closed(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
    )
}

pub fn timed_out(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}
