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
