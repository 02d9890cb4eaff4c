//! Sysctls under /proc/sys.
//!
//! /proc/sys/net resolves against the calling thread's network namespace, so for a foreign
//! namespace call these inside [`crate::run_in`].

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use crate::error::{Error, Result};

/// Writes `value` to /proc/sys/`key` (`key` like `net/ipv4/ip_forward`).
pub fn write(key: &str, value: &str) -> Result<()> {
    let path = path_of(key)?;
    let mut file = OpenOptions::new()
        .write(true)
        .open(&path)
        .map_err(|e| Error::io(format!("open sysctl {key}"), e))?;
    // One write: procfs parses each write(2) on its own.
    file.write_all(value.as_bytes())
        .map_err(|e| Error::io(format!("write sysctl {key}={value}"), e))
}

/// Reads /proc/sys/`key`, trimmed.
pub fn read(key: &str) -> Result<String> {
    let path = path_of(key)?;
    let text = fs::read_to_string(&path).map_err(|e| Error::io(format!("read sysctl {key}"), e))?;
    Ok(text.trim().to_owned())
}

/// Enables IPv4 and IPv6 forwarding in the caller's network namespace. Each is written only
/// when it is off: the kernel walks every link of the namespace at each write of IPv6's `all`,
/// even one that changes nothing (0.26 ms with 5,000 pods' host ends, 0.016 ms without).
pub fn enable_forwarding() -> Result<()> {
    ensure("net/ipv4/ip_forward", "1")?;
    ensure("net/ipv6/conf/all/forwarding", "1")
}

/// Writes `value` to `key` unless it reads so already.
fn ensure(key: &str, value: &str) -> Result<()> {
    if read(key).is_ok_and(|now| now == value) {
        return Ok(());
    }
    write(key, value)
}

/// Turns duplicate address detection off on interface `ifname` for the IPv6 addresses it gets
/// from now on, the link-local one the kernel makes when it gets carrier among them. (The
/// kernel runs DAD when `all` or the interface asks for it: a host with
/// `net.ipv6.conf.all.accept_dad` above 0 keeps it on.)
pub fn skip_dad(ifname: &str) -> Result<()> {
    write(&format!("net/ipv6/conf/{ifname}/accept_dad"), "0")
}

/// Turns IPv6 off on interface `ifname` (`disable_ipv6`). For a bridge port, which carries
/// frames and needs no IPv6 of its own: not even an address-less port is free, as the kernel
/// gives every link with carrier a multicast route (`ff00::/8`) in the node's local table, and
/// the node's look-up for each multicast packet the bridge hands it (a pod's duplicate
/// detection, its listener reports) goes through every such route: with a thousand ports per
/// bridge the pods' own multicast kept the node's CPU busy (docs/performance-history.md). Set
/// before the link has carrier, it never gets that route. `Ok(false)` when there is nothing to
/// turn off (no such interface; one without IPv6, its MTU below 1,280; a kernel without IPv6):
/// the caller that expects the link asks the kernel which. While another holds the RTNL lock the
/// kernel restarts the write instead of sleeping: under a pile of attaches the writer spins, at
/// a cost in CPU the performance notes measure.
pub fn disable_ipv6(ifname: &str) -> Result<bool> {
    let key = format!("net/ipv6/conf/{ifname}/disable_ipv6");
    // One writer at a time: the others sleep here rather than spin in the kernel too.
    static ONE_WRITER: Mutex<()> = Mutex::new(());
    let _one = ONE_WRITER.lock().unwrap_or_else(PoisonError::into_inner);
    match write(&key, "1") {
        Ok(()) => Ok(true),
        Err(e) if e.errno() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Only plain relative keys: no `..`, no absolute path, nothing outside /proc/sys.
fn path_of(key: &str) -> Result<PathBuf> {
    let rel = Path::new(key);
    let plain = !key.is_empty() && rel.components().all(|c| matches!(c, Component::Normal(_)));
    if !plain || key.contains("..") {
        return Err(Error::io(
            format!("sysctl key {key:?}"),
            io::Error::new(io::ErrorKind::InvalidInput, "not a relative /proc/sys key"),
        ));
    }
    Ok(Path::new("/proc/sys").join(rel))
}

#[cfg(test)]
mod tests;
