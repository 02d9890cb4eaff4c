//! The NETLINK_ROUTE socket and its request / ack / get / dump plumbing.
//!
//! Messages are built by pure functions in `link`, `address` and `route` and encoded by
//! `encode`, so their bytes can be tested without a kernel; this module only moves them.

use std::cell::Cell;
use std::fmt;
use std::io;
use std::marker::PhantomData;
use std::os::fd::AsRawFd;

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_DUMP, NLM_F_DUMP_INTR,
    NLM_F_REQUEST,
};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket};

use crate::error::{Error, Result};
use crate::reply_end::{self, End};

/// The receive buffer a socket starts with: 8 KiB holds any single reply knid asks for. Every
/// shard and every operation's pod socket has one, and 32 KiB each was most of a shard's
/// memory. A datagram that does not fit grows it (see `recv_datagram`) and the request is sent
/// again.
const RECV_BUF_LEN: usize = 8 * 1024;
/// The receive buffer of a socket that dumps a table. The kernel sizes a dump's datagrams to
/// the largest buffer the socket received with, up to 32 KiB: with a smaller one a dump of
/// thousands of links takes more round trips, and a link change on the node during any of
/// them interrupts the dump (NLM_F_DUMP_INTR), so that under heavy churn it failed
/// [`MAX_DUMP_ATTEMPTS`] times in a row. Kept once grown: the sockets that dump, dump again.
const DUMP_BUF_LEN: usize = 32 * 1024;
/// Requests are small; anything bigger is a bug, not something to send.
const MAX_REQUEST_LEN: usize = 64 * 1024;
/// NLM_F_DUMP_INTR retries before giving up on a table that keeps changing.
const MAX_DUMP_ATTEMPTS: usize = 8;
const NLMSG_HDRLEN: usize = 16;
/// The first message type that carries data; those below are noop, error, done and overrun
/// (linux/netlink.h).
const NLMSG_MIN_TYPE: u16 = 0x10;
/// NLMSG_ERROR (linux/netlink.h): an ack when its error code is 0.
const NLMSG_ERROR: u16 = 0x2;

/// A NETLINK_ROUTE socket bound to the network namespace it was opened in.
///
/// All calls through it act in that namespace, from any thread. It is `Send` but not `Sync`:
/// sequence numbers and replies of one request must not interleave with another's, so each
/// thread owns its own.
pub struct Rtnl {
    socket: Socket,
    seq: u32,
    send_buf: Vec<u8>,
    recv_buf: Vec<u8>,
    _not_sync: PhantomData<Cell<()>>,
}

impl fmt::Debug for Rtnl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rtnl")
            .field("fd", &self.socket.as_raw_fd())
            .field("seq", &self.seq)
            .finish_non_exhaustive()
    }
}

/// How a reply stream ended.
#[derive(Debug, Default)]
struct Outcome {
    /// NLM_F_DUMP_INTR was set: the table changed during the dump.
    interrupted: bool,
    /// A datagram did not fit the receive buffer (now grown); the reply is incomplete.
    truncated: bool,
}

impl Rtnl {
    /// Opens a socket in the calling thread's current network namespace.
    pub fn open() -> Result<Self> {
        // Strict checking makes the kernel filter dumps by our header fields and attributes.
        let socket = crate::nlsocket::open(NETLINK_ROUTE, "netlink socket", true)?;
        Ok(Self {
            socket,
            seq: 0,
            send_buf: Vec::with_capacity(1024),
            recv_buf: vec![0; RECV_BUF_LEN],
            _not_sync: PhantomData,
        })
    }

    /// Sends a mutation with NLM_F_ACK and waits for the kernel's ack.
    pub(crate) fn ack(
        &mut self,
        msg: RouteNetlinkMessage,
        flags: u16,
        op: &'static str,
        target: &dyn fmt::Display,
    ) -> Result<()> {
        if is_get(&msg) {
            return Err(Error::protocol(op, "a get request cannot be acked"));
        }
        let seq = self.send(msg, flags | NLM_F_ACK, op)?;
        let outcome = self.collect(seq, op, target, |_| {
            Err(Error::protocol(op, "data message in reply to a mutation"))
        })?;
        if outcome.truncated {
            return Err(Error::protocol(op, "truncated ack"));
        }
        log::debug!("netlink: {op} {target}: done");
        Ok(())
    }

    /// Sends every mutation of `requests` (message, flags, name for errors) in one datagram,
    /// each with NLM_F_ACK, and collects the kernel's acks: one outcome per request, in order.
    /// The kernel applies them in order and goes on after a failed one. An I/O or protocol
    /// error (not a nack) is the outer error.
    pub(crate) fn ack_all(
        &mut self,
        requests: Vec<(RouteNetlinkMessage, u16, &'static str)>,
    ) -> Result<Vec<Result<()>>> {
        let mut buf = std::mem::take(&mut self.send_buf);
        buf.clear();
        let mut one = Vec::new();
        let mut sent = Vec::with_capacity(requests.len());
        for (msg, flags, op) in requests {
            if is_get(&msg) {
                self.send_buf = buf;
                return Err(Error::protocol(op, "a get request cannot be acked"));
            }
            self.seq = self.seq.wrapping_add(1).max(1);
            if let Err(detail) = encode(msg, flags | NLM_F_ACK, self.seq, &mut one) {
                self.send_buf = buf;
                return Err(Error::protocol(op, detail));
            }
            // Messages in one datagram are 4-byte aligned (NLMSG_ALIGN); ours already are.
            buf.extend_from_slice(&one);
            sent.push((self.seq, op));
        }
        if buf.len() > MAX_REQUEST_LEN {
            self.send_buf = buf;
            return Err(Error::protocol("batch", "batched requests are too large"));
        }
        let result = self.socket.send(&buf, 0);
        let len = buf.len();
        self.send_buf = buf;
        let written = result.map_err(|e| Error::io("batch: send netlink requests", e))?;
        if written != len {
            return Err(Error::protocol(
                "batch",
                format!("short send: {written} bytes"),
            ));
        }
        let mut outcomes = Vec::with_capacity(sent.len());
        for (k, (seq, op)) in sent.into_iter().enumerate() {
            let target = format_args!("step {k} of a batch");
            let outcome = self.collect(seq, op, &target, |_| {
                Err(Error::protocol(op, "data message in reply to a mutation"))
            });
            match outcome {
                Ok(o) if o.truncated => return Err(Error::protocol(op, "truncated ack")),
                Ok(_) => {
                    log::debug!("netlink: {op} ({target}): done");
                    outcomes.push(Ok(()));
                }
                Err(e @ Error::Netlink { .. }) => {
                    log::debug!("netlink: {op} ({target}): {e}");
                    outcomes.push(Err(e));
                }
                Err(e) => return Err(e),
            }
        }
        Ok(outcomes)
    }

    /// Sends a non-dump get and returns the single message the kernel answers with.
    pub(crate) fn get(
        &mut self,
        msg: RouteNetlinkMessage,
        op: &'static str,
        target: &dyn fmt::Display,
    ) -> Result<RouteNetlinkMessage> {
        self.get_raw(msg, op, target, |bytes| data_message(bytes, op))
    }

    /// [`Rtnl::get`] handing the reply's bytes (its netlink header included) to `read`,
    /// unparsed: for a caller that needs a field of the reply, not all of its attributes.
    pub(crate) fn get_raw<T>(
        &mut self,
        msg: RouteNetlinkMessage,
        op: &'static str,
        target: &dyn fmt::Display,
        mut read: impl FnMut(&[u8]) -> Result<T>,
    ) -> Result<T> {
        if !is_get(&msg) {
            return Err(Error::protocol(op, "not a get request"));
        }
        let mut seq = self.send(msg, 0, op)?;
        // One retry: a truncated reply has grown the buffer to fit.
        for attempt in 0..2 {
            if attempt > 0 {
                seq = self.send_again(op)?;
            }
            let mut reply = None;
            let outcome = self.collect_raw(seq, op, target, |bytes| {
                reply = Some(read(bytes)?);
                Ok(false)
            })?;
            if outcome.truncated {
                continue;
            }
            return reply.ok_or_else(|| Error::protocol(op, "ack instead of data"));
        }
        Err(Error::protocol(op, "reply truncated twice"))
    }

    /// Dumps a table. Restarts when the kernel flags the dump as interrupted by a concurrent
    /// change (NLM_F_DUMP_INTR), so the result is a consistent snapshot.
    pub(crate) fn dump(
        &mut self,
        msg: RouteNetlinkMessage,
        op: &'static str,
        target: &dyn fmt::Display,
    ) -> Result<Vec<RouteNetlinkMessage>> {
        self.dump_map(msg, op, target, Some)
    }

    /// [`Rtnl::dump`], keeping only what `keep` makes of each message as it arrives: a dump of
    /// thousands of links then never holds thousands of parsed messages at once.
    pub(crate) fn dump_map<T>(
        &mut self,
        msg: RouteNetlinkMessage,
        op: &'static str,
        target: &dyn fmt::Display,
        mut keep: impl FnMut(RouteNetlinkMessage) -> Option<T>,
    ) -> Result<Vec<T>> {
        self.dump_raw(msg, op, target, |bytes| Ok(keep(data_message(bytes, op)?)))
    }

    /// [`Rtnl::dump_map`] handing `keep` each data message's bytes (its netlink header
    /// included), unparsed: for a caller that reads one attribute of thousands of messages,
    /// where parsing them all would cost more than the kernel's dump.
    pub(crate) fn dump_raw<T>(
        &mut self,
        msg: RouteNetlinkMessage,
        op: &'static str,
        target: &dyn fmt::Display,
        mut keep: impl FnMut(&[u8]) -> Result<Option<T>>,
    ) -> Result<Vec<T>> {
        // NLM_F_DUMP aliases REPLACE|EXCL: only a get request may carry it.
        if !is_get(&msg) {
            return Err(Error::protocol(op, "only get requests can be dumped"));
        }
        if self.recv_buf.len() < DUMP_BUF_LEN {
            self.recv_buf.resize(DUMP_BUF_LEN, 0);
        }
        for attempt in 1..=MAX_DUMP_ATTEMPTS {
            let seq = self.send(msg.clone(), NLM_F_DUMP, op)?;
            let mut out = Vec::new();
            let outcome = self.collect_raw(seq, op, target, |bytes| {
                out.extend(keep(bytes)?);
                Ok(true)
            })?;
            if !outcome.interrupted && !outcome.truncated {
                return Ok(out);
            }
            log::debug!("{op}: dump attempt {attempt} incomplete ({outcome:?}), restarting");
        }
        Err(Error::protocol(
            op,
            format!("dump interrupted {MAX_DUMP_ATTEMPTS} times in a row"),
        ))
    }

    fn send(&mut self, msg: RouteNetlinkMessage, flags: u16, op: &'static str) -> Result<u32> {
        self.seq = self.seq.wrapping_add(1).max(1);
        let seq = self.seq;
        encode(msg, flags, seq, &mut self.send_buf)
            .map_err(|detail| Error::protocol(op, detail))?;
        self.send_encoded(op)?;
        Ok(seq)
    }

    /// Sends the last request [`Rtnl::send`] encoded again, under a new sequence number.
    fn send_again(&mut self, op: &'static str) -> Result<u32> {
        self.seq = self.seq.wrapping_add(1).max(1);
        // nlmsg_seq: the third field of struct nlmsghdr (linux/netlink.h).
        self.send_buf[8..12].copy_from_slice(&self.seq.to_ne_bytes());
        self.send_encoded(op)?;
        Ok(self.seq)
    }

    fn send_encoded(&mut self, op: &'static str) -> Result<()> {
        let sent = self
            .socket
            .send(&self.send_buf, 0)
            .map_err(|e| Error::io(format!("{op}: send netlink request"), e))?;
        if sent != self.send_buf.len() {
            return Err(Error::protocol(op, format!("short send: {sent} bytes")));
        }
        Ok(())
    }

    /// Reads replies to request `seq` until its terminator (ack, error or done), handing data
    /// messages to `on_data`, which returns whether more are expected. Leaves nothing of this
    /// request queued on the socket, even when it fails half-way.
    fn collect(
        &mut self,
        seq: u32,
        op: &'static str,
        target: &dyn fmt::Display,
        mut on_data: impl FnMut(RouteNetlinkMessage) -> Result<bool>,
    ) -> Result<Outcome> {
        self.collect_raw(seq, op, target, |bytes| on_data(data_message(bytes, op)?))
    }

    /// [`Rtnl::collect`] handing each data message's bytes (its netlink header included) to
    /// `on_data`, unparsed: for a caller that reads one attribute of many messages.
    fn collect_raw(
        &mut self,
        seq: u32,
        op: &'static str,
        target: &dyn fmt::Display,
        on_data: impl FnMut(&[u8]) -> Result<bool>,
    ) -> Result<Outcome> {
        let mut finished = false;
        let result = self.collect_inner(seq, op, target, on_data, &mut finished);
        if !finished {
            // Leftovers (the rest of a dump) would otherwise answer the next request.
            self.drain();
        }
        result
    }

    fn collect_inner(
        &mut self,
        seq: u32,
        op: &'static str,
        target: &dyn fmt::Display,
        mut on_data: impl FnMut(&[u8]) -> Result<bool>,
        finished: &mut bool,
    ) -> Result<Outcome> {
        let mut outcome = Outcome::default();
        loop {
            let Some(len) = self.recv_datagram(op)? else {
                outcome.truncated = true;
                return Ok(outcome);
            };
            let mut offset = 0;
            while offset < len {
                let rest = &self.recv_buf[offset..len];
                let msg_len = message_len(rest).ok_or_else(|| {
                    Error::protocol(op, format!("bad message length at offset {offset}"))
                })?;
                let bytes = &rest[..msg_len];
                offset += msg_len.next_multiple_of(4);
                let header = RawHeader::of(bytes);
                if header.seq != seq {
                    return Err(Error::protocol(
                        op,
                        format!("sequence {} in reply to {seq}", header.seq),
                    ));
                }
                outcome.interrupted |= header.flags & NLM_F_DUMP_INTR != 0;
                // Data goes to the caller as it is; the rest is read by `reply_end::read`.
                if header.kind >= NLMSG_MIN_TYPE {
                    if !on_data(bytes)? {
                        *finished = true;
                        return Ok(outcome);
                    }
                    continue;
                }
                if is_plain_ack(&header, bytes) {
                    *finished = true;
                    return Ok(outcome);
                }
                let msg = NetlinkMessage::<RouteNetlinkMessage>::deserialize(bytes)
                    .map_err(|e| Error::protocol(op, e.to_string()))?;
                let nack =
                    |errno: i32, extack| Error::netlink(op, target.to_string(), errno, extack);
                match reply_end::read(&msg) {
                    End::Done => {
                        *finished = true;
                        return Ok(outcome);
                    }
                    End::Refused { errno, extack } => {
                        *finished = true;
                        return Err(nack(errno, extack));
                    }
                    End::Noop => {}
                    End::Overrun => return Err(Error::protocol(op, "overrun")),
                    End::Unknown => return Err(Error::protocol(op, "unknown payload kind")),
                }
            }
        }
    }

    /// Receives one datagram. `None` means it was bigger than the buffer and got cut: the buffer
    /// has been grown so a retry fits.
    fn recv_datagram(&mut self, op: &'static str) -> Result<Option<usize>> {
        loop {
            let mut buf = &mut self.recv_buf[..];
            match self.socket.recv(&mut buf, libc::MSG_TRUNC) {
                Ok(n) if n > self.recv_buf.len() => {
                    log::debug!("{op}: {n}-byte reply exceeded the receive buffer, growing it");
                    self.recv_buf.resize(n.next_multiple_of(4096), 0);
                    return Ok(None);
                }
                Ok(n) => return Ok(Some(n)),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io(format!("{op}: receive netlink reply"), e)),
            }
        }
    }

    /// Discards whatever is queued. Reading a dump's last queued datagram makes the kernel queue
    /// the next one at once, so "queue empty" means the abandoned dump has run to its end.
    fn drain(&mut self) {
        for _ in 0..100_000 {
            let mut buf = &mut self.recv_buf[..];
            match self
                .socket
                .recv(&mut buf, libc::MSG_DONTWAIT | libc::MSG_TRUNC)
            {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    }
}

/// Whether the kernel treats `msg` as a get (which NLM_F_DUMP turns into a dump).
fn is_get(msg: &RouteNetlinkMessage) -> bool {
    matches!(
        msg,
        RouteNetlinkMessage::GetLink(_)
            | RouteNetlinkMessage::GetAddress(_)
            | RouteNetlinkMessage::GetRoute(_)
            | RouteNetlinkMessage::GetNeighbour(_)
            | RouteNetlinkMessage::GetQueueDiscipline(_)
            | RouteNetlinkMessage::GetTrafficFilter(_)
    )
}

/// The length of the netlink message at the start of `buf`, if it is sane.
/// The message a data message's bytes (its netlink header included) carry.
fn data_message(bytes: &[u8], op: &'static str) -> Result<RouteNetlinkMessage> {
    let msg = NetlinkMessage::<RouteNetlinkMessage>::deserialize(bytes)
        .map_err(|e| Error::protocol(op, e.to_string()))?;
    match msg.payload {
        NetlinkPayload::InnerMessage(m) => Ok(m),
        _ => Err(Error::protocol(op, "a data message that carries no data")),
    }
}

/// The fields of a netlink header (struct nlmsghdr) a reply is sorted by.
struct RawHeader {
    kind: u16,
    flags: u16,
    seq: u32,
}

impl RawHeader {
    /// From a message of at least [`NLMSG_HDRLEN`] bytes (as [`message_len`] found it).
    fn of(msg: &[u8]) -> Self {
        let u16_at = |at: usize| u16::from_ne_bytes([msg[at], msg[at + 1]]);
        RawHeader {
            kind: u16_at(4),
            flags: u16_at(6),
            seq: u32::from_ne_bytes([msg[8], msg[9], msg[10], msg[11]]),
        }
    }
}

/// Whether a message is an ack (NLMSG_ERROR with error code 0), read from its bytes: what
/// `reply_end::read` makes [`End::Done`] of, without deserializing the request the kernel echoes
/// in it (most of a request's replies are acks).
fn is_plain_ack(header: &RawHeader, msg: &[u8]) -> bool {
    header.kind == NLMSG_ERROR
        && msg
            .get(NLMSG_HDRLEN..NLMSG_HDRLEN + 4)
            .is_some_and(|code| code == [0; 4])
}

fn message_len(buf: &[u8]) -> Option<usize> {
    let len = u32::from_ne_bytes(buf.get(..4)?.try_into().ok()?) as usize;
    (NLMSG_HDRLEN..=buf.len()).contains(&len).then_some(len)
}

/// Encodes a request (NLM_F_REQUEST plus `flags`) with sequence number `seq` into `buf`.
/// Pure, so golden tests can pin the bytes we put on the wire.
pub(crate) fn encode(
    msg: RouteNetlinkMessage,
    flags: u16,
    seq: u32,
    buf: &mut Vec<u8>,
) -> std::result::Result<(), String> {
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST | flags;
    header.sequence_number = seq;
    let mut nl = NetlinkMessage::new(header, NetlinkPayload::from(msg));
    nl.finalize();
    // serialize() panics on a short buffer: size it from buffer_len() first.
    let len = nl.buffer_len();
    if len > MAX_REQUEST_LEN {
        return Err(format!("request of {len} bytes is too large"));
    }
    buf.clear();
    buf.resize(len, 0);
    nl.serialize(&mut buf[..]);
    Ok(())
}

/// Encodes `msg` with a fixed sequence number, for golden-bytes tests.
#[cfg(test)]
pub(crate) fn encode_for_test(msg: RouteNetlinkMessage, flags: u16) -> Vec<u8> {
    let mut buf = Vec::new();
    encode(msg, flags, 1, &mut buf).expect("encodable");
    buf
}

/// [`data_message`], for tests that build replies from the crate's encoding.
#[cfg(test)]
pub(crate) fn data_message_for_test(bytes: &[u8]) -> RouteNetlinkMessage {
    data_message(bytes, "test").expect("a data message")
}

/// Renders bytes as the hex the golden tests compare against (one line per 16 bytes).
#[cfg(test)]
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes
        .chunks(16)
        .map(|line| {
            line.iter()
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests;
