//! What every knid bench shares: its settings from the environment, its latency summary and
//! reading a process's memory from /proc ([`crate::wait::wait_until`] waits for the daemon to
//! settle).

use std::time::Duration;

/// The number in environment variable `name`, at least 1; `default` when it is unset.
pub fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name} must be a number"))
        })
        .unwrap_or(default)
        .max(1)
}

/// Nearest-rank percentile `p` (0-100) of `sorted`, which must not be empty.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// `d` in milliseconds.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Sorts `samples` and prints their p50, p90, p99 and max on one line headed `what`.
pub fn report(what: &str, samples: &mut [Duration]) {
    samples.sort();
    println!(
        "{what:<7} p50 {:>7.3} ms   p90 {:>7.3} ms   p99 {:>7.3} ms   max {:>7.3} ms",
        ms(percentile(samples, 50.0)),
        ms(percentile(samples, 90.0)),
        ms(percentile(samples, 99.0)),
        ms(*samples.last().expect("at least one sample")),
    );
}

/// A `kB` field of `/proc/<pid>/status` (`VmRSS`, `VmHWM`, …) in KiB, or the `Threads` count;
/// `None` when the process or the field is gone.
pub fn proc_status(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Process `pid`'s threads by name, counted, sorted by count then name: `sled-io-* ×7, knid,
/// log flusher`. Numbered names (`sled-io-3`) count under one pattern. Empty when the process
/// is gone.
pub fn thread_names(pid: u32) -> String {
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten();
    for task in tasks.flatten() {
        let Ok(comm) = std::fs::read_to_string(task.path().join("comm")) else {
            continue;
        };
        let name = comm.trim_end();
        let stem = name.trim_end_matches(|c: char| c.is_ascii_digit());
        let key = if stem.len() < name.len() && stem.ends_with('-') {
            format!("{stem}*")
        } else {
            name.to_owned()
        };
        *counts.entry(key).or_default() += 1;
    }
    let mut named: Vec<(String, usize)> = counts.into_iter().collect();
    named.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    named
        .iter()
        .map(|(name, n)| {
            if *n > 1 {
                format!("{name} ×{n}")
            } else {
                name.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Where process `pid`'s resident memory is, in KiB, from `/proc/<pid>/smaps`: its binary's
/// code, read-only data and writable data, the heap (glibc's main arena), the main stack, and
/// every other anonymous mapping (thread stacks, glibc's other arenas, sled's buffers). The
/// parts add up to VmRSS.
pub fn memory_parts(pid: u32) -> Option<MemoryParts> {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).ok()?;
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
    let exe = exe.to_string_lossy().into_owned();
    let mut parts = MemoryParts::default();
    let mut slot: Option<&mut u64> = None;
    for line in smaps.lines() {
        let mut words = line.split_whitespace();
        let first = words.next().unwrap_or_default();
        if first.contains('-') && first.ends_with(|c: char| c.is_ascii_hexdigit()) {
            let perms = words.next().unwrap_or_default();
            let name = words.nth(3).unwrap_or_default();
            slot = Some(if name == exe {
                match perms {
                    p if p.contains('x') => &mut parts.code_kib,
                    p if p.contains('w') => &mut parts.data_kib,
                    _ => &mut parts.rodata_kib,
                }
            } else if name == "[heap]" {
                &mut parts.heap_kib
            } else if name == "[stack]" {
                &mut parts.stack_kib
            } else if name.is_empty() {
                &mut parts.other_anon_kib
            } else {
                &mut parts.other_kib
            });
        } else if first == "Rss:" {
            let kib: u64 = words.next().and_then(|k| k.parse().ok()).unwrap_or(0);
            if let Some(slot) = slot.as_deref_mut() {
                *slot += kib;
            }
        }
    }
    Some(parts)
}

/// [`memory_parts`]'s answer.
#[derive(Debug, Default, Clone, Copy)]
pub struct MemoryParts {
    /// The binary's executable pages mapped.
    pub code_kib: u64,
    /// Its read-only data (constants, unwind tables, relocations).
    pub rodata_kib: u64,
    /// Its writable data (relocated pointers, statics).
    pub data_kib: u64,
    /// glibc's main arena.
    pub heap_kib: u64,
    /// The main thread's stack.
    pub stack_kib: u64,
    /// Every other anonymous mapping: thread stacks, glibc's other arenas, sled's buffers.
    pub other_anon_kib: u64,
    /// Other files mapped (none for a static knid), vdso and the like.
    pub other_kib: u64,
}

impl std::fmt::Display for MemoryParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mib = |kib: u64| kib as f64 / 1024.0;
        write!(
            f,
            "code {:.2}, read-only data {:.2}, data {:.2}, heap {:.2}, main stack {:.2}, \
             thread stacks and other anonymous {:.2}, other {:.2} MiB",
            mib(self.code_kib),
            mib(self.rodata_kib),
            mib(self.data_kib),
            mib(self.heap_kib),
            mib(self.stack_kib),
            mib(self.other_anon_kib),
            mib(self.other_kib)
        )
    }
}
