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

/// The least, the median and the most of some values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// The smallest value.
    pub least: f64,
    /// The middle value; the mean of the middle two for an even count.
    pub median: f64,
    /// The largest value.
    pub most: f64,
}

/// The [`Spread`] of `values`, NaNs left out; `None` for no value.
pub fn spread(values: impl IntoIterator<Item = f64>) -> Option<Spread> {
    let mut sorted: Vec<f64> = values.into_iter().filter(|v| !v.is_nan()).collect();
    sorted.sort_by(f64::total_cmp);
    let (least, most) = (*sorted.first()?, *sorted.last()?);
    let mid = sorted.len() / 2;
    let median = if sorted.len() % 2 == 0 {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    } else {
        sorted[mid]
    };
    Some(Spread {
        least,
        median,
        most,
    })
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

/// Where process `pid`'s resident memory is, in KiB, from `/proc/<pid>/smaps`: its binary's
/// code, read-only data and writable data, the heap (glibc's main arena), the main stack, and
/// every other anonymous mapping (thread stacks, glibc's other arenas, sled's buffers). The
/// parts add up to VmRSS.
pub fn memory_parts(pid: u32) -> Option<MemoryParts> {
    let (maps, exe) = mappings_of(pid)?;
    let mut parts = MemoryParts::default();
    for m in maps {
        let slot = if m.inode == exe {
            if m.perms.contains('x') {
                &mut parts.code_kib
            } else if m.perms.contains('w') {
                &mut parts.data_kib
            } else {
                &mut parts.rodata_kib
            }
        } else {
            match m.name.as_str() {
                "[heap]" => &mut parts.heap_kib,
                "[stack]" => &mut parts.stack_kib,
                "" => &mut parts.other_anon_kib,
                _ => &mut parts.other_kib,
            }
        };
        *slot += m.rss_kib;
    }
    Some(parts)
}

/// KiB resident of what a release of process `pid`'s code drops
/// ([`knid_netops::code_pages::release`]: its binary's code and first read-only segment), the
/// figure knid's debug log gives for each release, read from the kernel.
pub fn releasable_kib(pid: u32) -> Option<u64> {
    let (maps, exe) = mappings_of(pid)?;
    Some(
        maps.iter()
            .filter(|m| m.inode == exe && m.is_file_backed_unwritten())
            .map(|m| m.rss_kib)
            .sum(),
    )
}

/// Process `pid`'s mappings from `/proc/<pid>/smaps`, and the inode of its binary.
fn mappings_of(pid: u32) -> Option<(Vec<knid_netops::code_pages::Mapping>, u64)> {
    use std::os::unix::fs::MetadataExt;
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).ok()?;
    let exe = std::fs::metadata(format!("/proc/{pid}/exe")).ok()?.ino();
    Some((knid_netops::code_pages::mappings(&smaps), exe))
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

#[cfg(test)]
mod tests;
