//! A connection's answers not yet written. Handler threads append to it and the I/O role
//! drains it; neither ever waits for the peer: an answer goes straight to the socket when
//! nothing is queued before it and the socket has room, and the rest waits here until epoll says
//! the socket is writable. How long no byte went out while some waited is what closes a peer that
//! reads nothing.

use std::io::{self, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// A drained outbox keeps at most this much spare capacity.
const KEEP_CAPACITY: usize = 64 << 10;

/// The answers of one connection waiting for room in its socket.
#[derive(Debug, Default)]
pub(super) struct Outbox {
    buf: Vec<u8>,
    /// Bytes of `buf` already written.
    sent: usize,
    /// When a byte last went out while some waited (or when the first began to wait).
    progress: Option<Instant>,
    /// Writing failed: everything is dropped from now on.
    broken: bool,
}

impl Outbox {
    /// Writes `bytes` after what is already waiting, as much of it now as the socket takes.
    /// True when bytes began to wait with this call (the I/O role must watch for room).
    pub(super) fn push(&mut self, stream: &UnixStream, bytes: &[u8]) -> io::Result<bool> {
        if self.broken {
            return Ok(false);
        }
        if self.waiting() > 0 {
            self.buf.extend_from_slice(bytes);
            return Ok(false);
        }
        let written = self.write(stream, bytes)?;
        if written == bytes.len() {
            return Ok(false);
        }
        self.buf.clear();
        self.sent = 0;
        self.buf.extend_from_slice(&bytes[written..]);
        self.progress = Some(Instant::now());
        Ok(true)
    }

    /// Writes what waits, as much as the socket takes; the bytes still waiting.
    pub(super) fn flush(&mut self, stream: &UnixStream) -> io::Result<usize> {
        if self.broken || self.waiting() == 0 {
            return Ok(0);
        }
        let buf = std::mem::take(&mut self.buf);
        let written = self.write(stream, &buf[self.sent..]);
        self.buf = buf;
        let written = written?;
        if written > 0 {
            self.sent += written;
            self.progress = Some(Instant::now());
        }
        if self.waiting() == 0 {
            self.progress = None;
            self.sent = 0;
            if self.buf.capacity() > KEEP_CAPACITY {
                self.buf = Vec::new();
            } else {
                self.buf.clear();
            }
        } else if self.sent > self.buf.len() / 2 {
            self.buf.drain(..self.sent);
            self.sent = 0;
        }
        Ok(self.waiting())
    }

    /// Bytes written by handlers and not yet by the socket.
    pub(super) fn waiting(&self) -> usize {
        self.buf.len() - self.sent
    }

    /// How long bytes have waited without any going out; `None` when nothing waits.
    pub(super) fn stalled_for(&self, now: Instant) -> Option<Duration> {
        self.progress
            .filter(|_| self.waiting() > 0)
            .map(|since| now.saturating_duration_since(since))
    }

    /// Drops what waits and everything pushed from now on (the peer is gone or failed).
    pub(super) fn break_off(&mut self) {
        self.broken = true;
        self.buf = Vec::new();
        self.sent = 0;
        self.progress = None;
    }

    /// Non-blocking writes until the socket is full; bytes written. A write error breaks the
    /// outbox and is returned.
    fn write(&mut self, mut stream: &UnixStream, bytes: &[u8]) -> io::Result<usize> {
        let mut written = 0;
        while written < bytes.len() {
            match stream.write(&bytes[written..]) {
                Ok(0) => {
                    self.break_off();
                    return Err(io::ErrorKind::WriteZero.into());
                }
                Ok(n) => written += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    self.break_off();
                    return Err(e);
                }
            }
        }
        Ok(written)
    }
}

#[cfg(test)]
mod tests;
