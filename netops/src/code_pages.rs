//! Unmapping the pages of knid's own binary that it ran once: its start-up (configuration,
//! recovery, the first sweep) and a burst's rare paths (abuse handling, error paths).
//!
//! The kernel maps a binary's pages as the code and constants on them are first used, 64 KiB at
//! a time (fault-around), and keeps them mapped for the process's life: an idle knid's RSS was
//! mostly code that ran once at start-up (docs/performance-history.md). [`release`] drops those
//! mappings. The pages stay in the page cache, unmapped, which is what the kernel reclaims first
//! under pressure; the code knid runs next maps back on its first use, a minor fault per 64 KiB
//! and no disk read unless the kernel reclaimed it meanwhile.
//!
//! Only mappings no write ever reaches are released: the binary's executable segment and its
//! first read-only one (headers, relocations, constants, unwind tables), which the kernel maps
//! straight from the file. The relocated read-only data after the code (RELRO) is never
//! touched: its pages are private copies written at start-up, which MADV_DONTNEED would
//! discard.

use std::os::unix::fs::MetadataExt;

/// What [`release`] did: the mappings it released and their RSS before, in KiB.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Released {
    /// Mappings released.
    pub mappings: usize,
    /// Their resident size before, in KiB.
    pub kib: u64,
}

/// Unmaps the pages of this process's binary that are mapped straight from its file (see the
/// module docs). Returns what it released; a mapping it cannot release is skipped and said at
/// debug level.
pub fn release() -> Released {
    let Ok(exe) = std::fs::metadata("/proc/self/exe") else {
        return Released::default();
    };
    let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else {
        return Released::default();
    };
    let mut released = Released::default();
    for mapping in mappings(&smaps) {
        if mapping.inode != exe.ino() || !mapping.is_file_backed_unwritten() {
            continue;
        }
        // SAFETY: the range is one whole mapping of this process's own binary, read-only,
        // private and never written (`is_file_backed_unwritten`: executable, or read-only at file offset 0,
        // with no anonymous page). MADV_DONTNEED on such a mapping only drops its page table
        // entries: every later access maps the unchanged file page again.
        let done = unsafe {
            libc::madvise(
                mapping.start as *mut libc::c_void,
                mapping.end - mapping.start,
                libc::MADV_DONTNEED,
            )
        };
        if done == 0 {
            released.mappings += 1;
            released.kib += mapping.rss_kib;
        } else {
            log::debug!(
                "code pages: madvise {:#x}-{:#x}: {}",
                mapping.start,
                mapping.end,
                std::io::Error::last_os_error()
            );
        }
    }
    released
}

/// One mapping of a `/proc/<pid>/smaps` text: where it is, how it is mapped, of what, and its
/// resident sizes.
#[derive(Debug, PartialEq, Eq)]
pub struct Mapping {
    /// Its first address.
    pub start: usize,
    /// The address after its last.
    pub end: usize,
    /// `r-xp` and the like.
    pub perms: String,
    /// Its offset in the file mapped.
    pub offset: u64,
    /// The file's inode; 0 for an anonymous mapping.
    pub inode: u64,
    /// The file's path, `[heap]`, `[stack]` and the like, or empty.
    pub name: String,
    /// `Rss`, in KiB.
    pub rss_kib: u64,
    /// `Anonymous`, in KiB (`u64::MAX` when unreadable).
    pub anonymous_kib: u64,
}

impl Mapping {
    /// Executable, or read-only at the file's start; private, and with no page written: what
    /// [`release`] drops of the binary's mappings.
    pub fn is_file_backed_unwritten(&self) -> bool {
        let read_only = self.perms == "r--p" && self.offset == 0;
        (self.perms == "r-xp" || read_only) && self.anonymous_kib == 0
    }
}

/// The mappings of an smaps text (`/proc/<pid>/smaps`), with their `Rss` and `Anonymous`
/// sizes.
pub fn mappings(smaps: &str) -> Vec<Mapping> {
    let mut out: Vec<Mapping> = Vec::new();
    for line in smaps.lines() {
        let mut words = line.split_whitespace();
        let Some(first) = words.next() else {
            continue;
        };
        if let Some((start, end)) = first.split_once('-').and_then(|(s, e)| {
            Some((
                usize::from_str_radix(s, 16).ok()?,
                usize::from_str_radix(e, 16).ok()?,
            ))
        }) {
            let perms = words.next().unwrap_or_default().to_owned();
            let offset = words.next().and_then(|o| u64::from_str_radix(o, 16).ok());
            let inode = words.nth(1).and_then(|i| i.parse().ok());
            if let (Some(offset), Some(inode)) = (offset, inode) {
                out.push(Mapping {
                    start,
                    end,
                    perms,
                    offset,
                    inode,
                    name: words.collect::<Vec<_>>().join(" "),
                    rss_kib: 0,
                    anonymous_kib: 0,
                });
                continue;
            }
        }
        let size = || words.clone().next().and_then(|k| k.parse::<u64>().ok());
        if let Some(last) = out.last_mut() {
            match first {
                "Rss:" => last.rss_kib = size().unwrap_or(0),
                // Unknown: taken as written, so the mapping is left alone.
                "Anonymous:" => last.anonymous_kib = size().unwrap_or(u64::MAX),
                _ => {}
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
