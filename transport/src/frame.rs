//! Incremental decoding of ttrpc frames from a byte stream: a 10-byte header (payload length
//! u32 BE, stream id u32 BE, message type u8, flags u8), then the payload. Bytes arrive in any
//! split; a frame over the size cap is reported by its header alone and its payload skipped as it
//! arrives, so one connection never holds more than the cap plus one read.

use ttrpc::proto::{MessageHeader, MESSAGE_HEADER_LENGTH};

/// Bytes of a frame header.
pub const HEADER_LEN: usize = MESSAGE_HEADER_LENGTH;

/// A buffered connection's reader keeps at most this much spare capacity once drained.
const KEEP_CAPACITY: usize = 64 << 10;

/// One decoded frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// A whole frame within the cap.
    Whole {
        /// Its header.
        header: MessageHeader,
        /// Its payload (`header.length` bytes).
        payload: Vec<u8>,
    },
    /// A frame whose length is over the cap; its payload is discarded.
    Oversized {
        /// Its header.
        header: MessageHeader,
    },
}

/// The bytes of a frame: `header`, then `payload` (whose length `header` must give).
pub fn encode(header: MessageHeader, payload: &[u8]) -> Vec<u8> {
    let mut frame: Vec<u8> = header.into();
    frame.extend_from_slice(payload);
    frame
}

/// Turns the bytes of one connection into frames.
#[derive(Debug)]
pub struct FrameReader {
    max_payload: usize,
    buf: Vec<u8>,
    /// Bytes of `buf` already handed out.
    start: usize,
    /// Payload bytes of an oversized frame still to discard as they arrive.
    skip: u64,
}

impl FrameReader {
    /// A reader that reports payloads longer than `max_payload` as [`Frame::Oversized`].
    pub fn new(max_payload: usize) -> Self {
        Self {
            max_payload,
            buf: Vec::new(),
            start: 0,
            skip: 0,
        }
    }

    /// Adds bytes read from the connection.
    pub fn push(&mut self, mut bytes: &[u8]) {
        if self.skip > 0 {
            let n = bytes
                .len()
                .min(usize::try_from(self.skip).unwrap_or(usize::MAX));
            self.skip -= n as u64;
            bytes = &bytes[n..];
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The next complete frame, if the bytes pushed so far hold one.
    pub fn next_frame(&mut self) -> Option<Frame> {
        let avail = &self.buf[self.start..];
        if avail.len() < MESSAGE_HEADER_LENGTH {
            self.compact();
            return None;
        }
        let header = MessageHeader::from(&avail[..MESSAGE_HEADER_LENGTH]);
        let len = header.length as usize;
        if len > self.max_payload {
            let buffered = avail.len() - MESSAGE_HEADER_LENGTH;
            let dropped = buffered.min(len);
            self.start += MESSAGE_HEADER_LENGTH + dropped;
            self.skip = (len - dropped) as u64;
            self.compact();
            return Some(Frame::Oversized { header });
        }
        if avail.len() - MESSAGE_HEADER_LENGTH < len {
            self.compact();
            return None;
        }
        let payload = avail[MESSAGE_HEADER_LENGTH..MESSAGE_HEADER_LENGTH + len].to_vec();
        self.start += MESSAGE_HEADER_LENGTH + len;
        Some(Frame::Whole { header, payload })
    }

    /// Bytes of an unfinished frame held (a header or payload still short of its length).
    pub fn pending(&self) -> usize {
        self.buf.len() - self.start
    }

    /// A frame has begun and is not complete (bytes of it held, or an oversized payload still
    /// being skipped).
    pub fn in_frame(&self) -> bool {
        self.pending() > 0 || self.skip > 0
    }

    /// Drops what was handed out; an idle connection gives back a large buffer.
    fn compact(&mut self) {
        if self.start == self.buf.len() {
            if self.buf.capacity() > KEEP_CAPACITY {
                self.buf = Vec::new();
            } else {
                self.buf.clear();
            }
        } else if self.start > 0 {
            self.buf.drain(..self.start);
        }
        self.start = 0;
    }
}

/// Every frame `bytes` holds when pushed in one go, for the fuzz target and tests.
pub fn decode_all(bytes: &[u8], max_payload: usize) -> (Vec<Frame>, usize) {
    let mut reader = FrameReader::new(max_payload);
    reader.push(bytes);
    let frames = std::iter::from_fn(|| reader.next_frame()).collect();
    (frames, reader.pending())
}

#[cfg(test)]
mod tests;
