//! nf_tables over a synchronous NETLINK_NETFILTER socket: knid's own table (one `inet` table,
//! see [`Ruleset`]) replaced in one transaction, its host-port map elements added and removed
//! in one transaction each, and read back; and the source-address guards of pod interfaces
//! (a `netdev` table, see [`Guard`]); and the data plane of NetworkPolicy, a table of set
//! lookups (see [`PolicyState`]).
//!
//! Nothing here runs `nft`: an attach with port mappings costs one netlink transaction, and
//! other tables (kube-proxy's, firewalld's, Docker's iptables-nft) are never read or touched.

use std::collections::HashSet;
use std::fmt;
use std::io;
use std::os::fd::AsRawFd;

use netlink_sys::{protocols::NETLINK_NETFILTER, Socket};

use crate::error::{Error, Result};
use crate::extack;
use crate::netns::{visit, NetnsHandle};

mod expr;
mod guard;
mod policy;
mod ruleset;
mod wire;

pub use guard::{guard_table, DropReason, Guard, GuardChain, GUARD_TABLES};
pub use policy::{Allow, Direction, PolicyDrops, PolicyState, PortRange};
pub use ruleset::{
    masquerade_chain, never_masqueraded, Masquerade, PortMap, Protocol, Ruleset, CHAIN_HOSTPORTS,
    CHAIN_OUTPUT, CHAIN_POSTROUTING, CHAIN_PREROUTING, HAIRPIN_MARK, PORT_MAPS,
};
use wire::{attrs, Request};

const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_DUMP: u16 = 0x300;
const RECV_BUF_LEN: usize = 64 * 1024;

/// A NETLINK_NETFILTER socket bound to the network namespace it was opened in.
pub struct Nft {
    socket: Socket,
    seq: u32,
    buf: Vec<u8>,
    recv: Vec<u8>,
    /// Guard tables (with their counters) that a transaction of this handle made or found, so
    /// that the next guards in them are sent without the seven requests that ensure them
    /// ([`Nft::add_guards`]).
    known_guard_tables: HashSet<String>,
}

impl fmt::Debug for Nft {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Nft")
            .field("fd", &self.socket.as_raw_fd())
            .finish_non_exhaustive()
    }
}

/// What [`Nft::table`] found of a table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableContents {
    /// Its chains' names.
    pub chains: Vec<String>,
    /// The elements of the host-port maps.
    pub port_maps: Vec<PortMap>,
}

impl Nft {
    /// Opens a socket in the calling thread's current network namespace.
    pub fn open() -> Result<Self> {
        let socket = crate::nlsocket::open(NETLINK_NETFILTER, "nf_tables socket", false)?;
        Ok(Self {
            socket,
            seq: 0,
            buf: Vec::with_capacity(4096),
            recv: vec![0; RECV_BUF_LEN],
            known_guard_tables: HashSet::new(),
        })
    }

    /// Opens a socket inside `ns`; it stays bound to `ns`.
    pub fn open_in(ns: &NetnsHandle) -> Result<Self> {
        visit(ns, Self::open)?
    }

    /// Replaces table `ruleset.table` (family `inet`) by `ruleset`, atomically: packets see
    /// the old table or the new one, never none.
    pub fn replace(&mut self, ruleset: &Ruleset) -> Result<()> {
        self.transact(
            &ruleset::replace(ruleset),
            "replace nf_tables table",
            &ruleset.table,
        )
    }

    /// Deletes table `table` if it exists.
    pub fn delete_table(&mut self, table: &str) -> Result<()> {
        self.transact(&ruleset::delete(table), "delete nf_tables table", &table)
    }

    /// Adds host-port elements in one transaction. An identical element is accepted; one whose
    /// key is taken with another target is refused (EEXIST), and then nothing is added.
    pub fn add_port_maps(&mut self, table: &str, maps: &[PortMap]) -> Result<()> {
        if maps.is_empty() {
            return Ok(());
        }
        self.transact(
            &ruleset::elements(table, maps, true),
            "add host ports",
            &table,
        )
    }

    /// Removes host-port elements in one transaction; when some are already gone (ENOENT
    /// refuses the whole transaction), removes the others one by one.
    pub fn remove_port_maps(&mut self, table: &str, maps: &[PortMap]) -> Result<()> {
        if maps.is_empty() {
            return Ok(());
        }
        match self.transact(
            &ruleset::elements(table, maps, false),
            "remove host ports",
            &table,
        ) {
            Err(e) if e.is_not_found() => {
                for m in maps {
                    match self.transact(
                        &ruleset::elements(table, std::slice::from_ref(m), false),
                        "remove host port",
                        &table,
                    ) {
                        Err(e) if e.is_not_found() => {}
                        other => other?,
                    }
                }
                Ok(())
            }
            other => other,
        }
    }

    /// The chains and host-port elements of table `table`; `None` if it does not exist.
    pub fn table(&mut self, table: &str) -> Result<Option<TableContents>> {
        match self.query(
            &ruleset::get_table(table),
            false,
            "get nf_tables table",
            table,
        ) {
            Err(e) if e.is_not_found() => return Ok(None),
            other => other?,
        };
        let mut contents = TableContents::default();
        for msg in self.query(&ruleset::dump_chains(table), true, "list chains", table)? {
            let mut in_table = false;
            let mut name = None;
            for (kind, value) in attrs(&msg) {
                match kind {
                    wire::NFTA_CHAIN_TABLE => in_table = cstr(value) == table,
                    wire::NFTA_CHAIN_NAME => name = Some(cstr(value)),
                    _ => {}
                }
            }
            if let (true, Some(name)) = (in_table, name) {
                contents.chains.push(name);
            }
        }
        for (set, ..) in PORT_MAPS {
            let elements = match self.dump_set(table, set, "list host ports") {
                Err(e) if e.is_not_found() => continue,
                other => other?,
            };
            for e in elements {
                let data = match &e.data {
                    Some(ruleset::ElementData::Value(v)) => v.as_slice(),
                    _ => continue,
                };
                if let Some(m) = PortMap::from_element(set, &e.key, data) {
                    contents.port_maps.push(m);
                }
            }
        }
        contents.port_maps.sort();
        Ok(Some(contents))
    }

    /// The elements of set `set` (keys, range ends, data values; a verdict's data is left
    /// out).
    fn dump_set(
        &mut self,
        table: &str,
        set: &str,
        op: &'static str,
    ) -> Result<Vec<ruleset::SetElement>> {
        let mut out = Vec::new();
        for msg in self.query(&ruleset::dump_elements(table, set), true, op, set)? {
            for (kind, list) in attrs(&msg) {
                if kind != wire::NFTA_SET_ELEM_LIST_ELEMENTS {
                    continue;
                }
                for (_, elem) in attrs(list) {
                    let mut e = ruleset::SetElement {
                        key: Vec::new(),
                        key_end: None,
                        data: None,
                    };
                    for (k, v) in attrs(elem) {
                        match k {
                            wire::NFTA_SET_ELEM_KEY => {
                                e.key = expr::data_value(v).unwrap_or_default()
                            }
                            wire::NFTA_SET_ELEM_KEY_END => e.key_end = expr::data_value(v),
                            wire::NFTA_SET_ELEM_DATA => {
                                e.data = expr::data_value(v).map(ruleset::ElementData::Value)
                            }
                            _ => {}
                        }
                    }
                    out.push(e);
                }
            }
        }
        Ok(out)
    }

    /// Sends `requests` as one batch and waits for every ack: all applied, or none.
    fn transact(
        &mut self,
        requests: &[Request],
        op: &'static str,
        target: &dyn fmt::Display,
    ) -> Result<()> {
        let first = self.next_seq(requests.len() as u32 + 2);
        let acked = wire::encode_batch(requests, first, &mut self.buf);
        self.send(op)?;
        // The kernel runs the batch inside sendmsg: every answer is queued once send returns,
        // the last request's ack, errors of the refused ones (the whole batch is then undone).
        // Read until the last request is answered or an error comes.
        let mut answered = 0;
        let mut failure = None;
        while answered < acked.len() {
            let len = self.recv_datagram(op, failure.is_some())?;
            let Some(len) = len else { break };
            for (kind, flags, seq, body) in messages(&self.recv[..len]) {
                // The batch's begin and end are answered only when refused.
                let ours = seq.wrapping_sub(first) <= requests.len() as u32 + 1;
                if !ours || kind != NLMSG_ERROR {
                    continue;
                }
                answered += usize::from(acked.contains(&seq));
                let code = body
                    .get(..4)
                    .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
                    .unwrap_or(0);
                if code != 0 && failure.is_none() {
                    let text = extack::from_error(flags, body.get(4..).unwrap_or_default());
                    failure = Some(Error::netlink(op, target.to_string(), -code, text));
                }
            }
        }
        match failure {
            Some(e) => Err(e),
            None if answered < acked.len() => Err(Error::protocol(
                op,
                format!("{answered} of {} requests answered", acked.len()),
            )),
            None => {
                log::debug!(
                    "nf_tables: {op} {target}: done ({} requests)",
                    requests.len()
                );
                Ok(())
            }
        }
    }

    /// Sends a get (or, with `dump`, a dump) and returns the attribute bytes of each answer.
    fn query(
        &mut self,
        request: &Request,
        dump: bool,
        op: &'static str,
        target: &str,
    ) -> Result<Vec<Vec<u8>>> {
        let seq = self.next_seq(1);
        self.buf.clear();
        let kind = (wire::NFNL_SUBSYS_NFTABLES << 8) | request.kind;
        let flags = if dump { NLM_F_DUMP } else { 0x4 }; // NLM_F_ACK for a get
        wire::put_message(
            &mut self.buf,
            kind,
            flags,
            seq,
            request.family,
            0,
            &request.attrs.0,
        );
        self.send(op)?;
        let mut out = Vec::new();
        loop {
            let Some(len) = self.recv_datagram(op, false)? else {
                return Err(Error::protocol(op, "no answer"));
            };
            for (kind, flags, mseq, body) in messages(&self.recv[..len]) {
                if mseq != seq {
                    continue;
                }
                match kind {
                    NLMSG_DONE => return Ok(out),
                    NLMSG_ERROR => {
                        let code = body
                            .get(..4)
                            .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
                            .unwrap_or(0);
                        if code != 0 {
                            let text = extack::from_error(flags, body.get(4..).unwrap_or_default());
                            return Err(Error::netlink(op, target.to_owned(), -code, text));
                        }
                        return Ok(out);
                    }
                    _ => {
                        // nfgenmsg, then attributes.
                        out.push(body.get(4..).unwrap_or_default().to_vec());
                    }
                }
            }
            if !dump && !out.is_empty() {
                // A get's answer may come without an ack after it.
                self.drain();
                return Ok(out);
            }
        }
    }

    fn next_seq(&mut self, count: u32) -> u32 {
        let first = self.seq.wrapping_add(1).max(1);
        self.seq = first.wrapping_add(count);
        first
    }

    fn send(&mut self, op: &'static str) -> Result<()> {
        self.make_room(op)?;
        let sent = self
            .socket
            .send(&self.buf, 0)
            .map_err(|e| Error::io(format!("{op}: send nf_tables request"), e))?;
        if sent != self.buf.len() {
            return Err(Error::protocol(op, format!("short send: {sent} bytes")));
        }
        Ok(())
    }

    /// Grows the socket's send buffer to hold the whole batch: the kernel refuses a netlink
    /// message longer than the buffer (EMSGSIZE; 208 KiB by default), and a table must be
    /// replaced in one batch to stay atomic (a masquerade exception per node's pod CIDR in a
    /// 1,000-node cluster is ~400 KiB; found by benches/startup.rs). SO_SNDBUFFORCE, as knid
    /// runs with CAP_NET_ADMIN: `wmem_max` does not cap it.
    fn make_room(&mut self, op: &'static str) -> Result<()> {
        use nix::sys::socket::{getsockopt, setsockopt, sockopt};
        // The kernel keeps twice what it is given, and wants the message below that minus a
        // skb's overhead.
        const SLACK: usize = 4096;
        let have = getsockopt(&self.socket, sockopt::SndBuf)
            .map_err(|e| Error::io(format!("{op}: read the send buffer size"), e.into()))?;
        if self.buf.len() + SLACK <= have {
            return Ok(());
        }
        setsockopt(
            &self.socket,
            sockopt::SndBufForce,
            &(self.buf.len() + SLACK),
        )
        .map_err(|e| Error::io(format!("{op}: grow the send buffer"), e.into()))
    }

    /// One datagram; `None` when `nonblocking` and nothing is queued.
    fn recv_datagram(&mut self, op: &'static str, nonblocking: bool) -> Result<Option<usize>> {
        let flags = if nonblocking { libc::MSG_DONTWAIT } else { 0 };
        loop {
            let mut buf = &mut self.recv[..];
            match self.socket.recv(&mut buf, flags | libc::MSG_TRUNC) {
                Ok(n) if n > self.recv.len() => {
                    return Err(Error::protocol(op, format!("{n}-byte answer truncated")))
                }
                Ok(n) => return Ok(Some(n)),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if nonblocking && e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                Err(e) => return Err(Error::io(format!("{op}: receive nf_tables answer"), e)),
            }
        }
    }

    fn drain(&mut self) {
        while let Ok(Some(_)) = self.recv_datagram("drain", true) {}
    }
}

/// The messages of a datagram: (type, flags, sequence number, body after the header).
fn messages(mut buf: &[u8]) -> impl Iterator<Item = (u16, u16, u32, &[u8])> {
    std::iter::from_fn(move || {
        let len = u32::from_ne_bytes(buf.get(..4)?.try_into().ok()?) as usize;
        if len < 16 || len > buf.len() {
            return None;
        }
        let kind = u16::from_ne_bytes(buf.get(4..6)?.try_into().ok()?);
        let flags = u16::from_ne_bytes(buf.get(6..8)?.try_into().ok()?);
        let seq = u32::from_ne_bytes(buf.get(8..12)?.try_into().ok()?);
        let body = &buf[16..len];
        buf = buf.get(len.next_multiple_of(4)..).unwrap_or_default();
        Some((kind, flags, seq, body))
    })
}

fn cstr(value: &[u8]) -> String {
    let text = value.split(|b| *b == 0).next().unwrap_or_default();
    String::from_utf8_lossy(text).into_owned()
}

#[cfg(test)]
mod tests;
