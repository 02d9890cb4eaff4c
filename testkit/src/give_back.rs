//! Whether knid gives back what a burst took: its threads, open files and resident memory read
//! from /proc while a well-behaved client keeps calling at a steady light rate.

use std::path::Path;
use std::time::{Duration, Instant};

use knid_transport::client::RuntimeClient;

use crate::measure::proc_status;

/// What a process holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footprint {
    /// Threads.
    pub threads: u64,
    /// Open file descriptors.
    pub fds: u64,
    /// Resident memory, KiB.
    pub rss_kib: u64,
    /// Of it, anonymous memory (heap, stacks), KiB; the rest is mapped files (the binary's
    /// pages it has touched).
    pub anon_kib: u64,
}

impl Footprint {
    /// Process `pid`'s now.
    pub fn of(pid: u32) -> Footprint {
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
            .map(|d| d.count() as u64)
            .unwrap_or(0);
        Footprint {
            threads: proc_status(pid, "Threads").unwrap_or(0),
            fds,
            rss_kib: proc_status(pid, "VmRSS").unwrap_or(0),
            anon_kib: proc_status(pid, "RssAnon").unwrap_or(0),
        }
    }

    /// Whether this is back to `idle`: no more threads or files, and resident memory within
    /// `slack_kib` of it.
    pub fn back_to(&self, idle: &Footprint, slack_kib: u64) -> bool {
        self.threads <= idle.threads
            && self.fds <= idle.fds
            && self.rss_kib <= idle.rss_kib + slack_kib
    }
}

impl std::fmt::Display for Footprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} threads, {} fds, VmRSS {:.1} MiB (anonymous {:.1})",
            self.threads,
            self.fds,
            self.rss_kib as f64 / 1024.0,
            self.anon_kib as f64 / 1024.0
        )
    }
}

/// How a process came back after a burst.
#[derive(Debug)]
pub struct Recovery {
    /// Samples: time since the burst ended, and the footprint then.
    pub samples: Vec<(Duration, Footprint)>,
    /// When the footprint was back to idle for good (it stayed so to the end); `None`: never.
    pub back_after: Option<Duration>,
    /// Calls the client made meanwhile, and how many failed.
    pub calls: (u64, u64),
}

/// Calls Status on `socket` every `every` for `window` (a steady light load) and samples
/// process `pid` every 250 ms meanwhile; when it was back to `idle` for good (threads and fds
/// at most idle, RSS within `slack_kib`).
pub fn recovery(
    socket: &Path,
    pid: u32,
    idle: &Footprint,
    slack_kib: u64,
    every: Duration,
    window: Duration,
) -> Recovery {
    let client = RuntimeClient::connect(socket).expect("connect the light client");
    let started = Instant::now();
    let mut samples = Vec::new();
    let mut next_sample = started;
    let mut calls = (0, 0);
    while started.elapsed() < window {
        if client.status(Duration::from_secs(10)).is_err() {
            calls.1 += 1;
        }
        calls.0 += 1;
        if Instant::now() >= next_sample {
            samples.push((started.elapsed(), Footprint::of(pid)));
            next_sample += Duration::from_millis(250);
        }
        std::thread::sleep(every);
    }
    let mut back_after = None;
    for (at, footprint) in &samples {
        match (footprint.back_to(idle, slack_kib), back_after) {
            (true, None) => back_after = Some(*at),
            (false, _) => back_after = None,
            _ => {}
        }
    }
    Recovery {
        samples,
        back_after,
        calls,
    }
}
