//! What a phase costs the machine: CPU time on every CPU (all but idle), context switches, and
//! knid's own CPU time, read from `/proc` and `/sys` around each timed batch. Rates say how
//! fast; this says how much work each cycle took.
//!
//! The machine's CPU time is the CPUs' time less their idle time, which the kernel measures
//! precisely (cpuidle's per-state residency in µs; else `/proc/stat`'s idle and iowait, exact
//! on a tickless kernel too). Summing `/proc/stat`'s user and system ticks instead would miss
//! short bursts between idle periods, which no tick sees. knid's time is its threads' scheduler
//! runtime (`/proc/<pid>/stat`'s utime + stime, scaled to it by the kernel), in 10 ms ticks.
//!
//! knid's context switches are counted per thread (`/proc/<pid>/task/<tid>/status`, voluntary
//! and involuntary) and summed by the thread's name, a numbered family under one
//! ([`testkit::threads::pattern`]: `sled-io-*`): which of knid's threads wakes how often. A thread that ends within the span takes its count
//! with it; one that starts within it counts from zero.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use nix::unistd::Pid;

/// Ticks of `/proc/stat` and `/proc/<pid>/stat`: USER_HZ, 100 per second on Linux.
const TICK: Duration = Duration::from_millis(10);

/// Counters at one moment.
#[derive(Debug, Clone)]
pub struct Sample {
    at: Instant,
    cpus: u32,
    idle: Duration,
    switches: u64,
    knid: Duration,
    /// knid's threads by id: name, context switches.
    threads: BTreeMap<u32, (String, u64)>,
}

/// The counters' growth over a span, or the sum over several.
#[derive(Debug, Clone, Default)]
pub struct Cpu {
    /// CPU time of the whole machine, every CPU, not idle.
    pub busy: Duration,
    /// Context switches of the whole machine.
    pub switches: u64,
    /// knid's CPU time (every thread, user and system).
    pub knid: Duration,
    /// knid's context switches by thread name (a numbered family as one: `sled-io-*`).
    pub by_thread: BTreeMap<String, u64>,
}

impl Sample {
    /// The counters now; knid's only if `knid` is given.
    pub fn take(knid: Option<Pid>) -> Sample {
        let stat = std::fs::read_to_string("/proc/stat").expect("read /proc/stat");
        let mut cpus = 0;
        let mut stat_idle = Duration::ZERO;
        let mut switches = 0;
        for line in stat.lines() {
            let mut fields = line.split_whitespace();
            match fields.next() {
                Some("cpu") => {
                    // user nice system idle iowait …
                    let ticks: u64 = fields
                        .skip(3)
                        .take(2)
                        .map(|f| f.parse::<u64>().expect("a tick count"))
                        .sum();
                    stat_idle = TICK * u32::try_from(ticks).expect("ticks fit u32");
                }
                Some(cpu) if cpu.starts_with("cpu") => cpus += 1,
                Some("ctxt") => {
                    switches = fields.next().and_then(|n| n.parse().ok()).expect("ctxt");
                }
                _ => {}
            }
        }
        Sample {
            at: Instant::now(),
            cpus,
            idle: cpuidle_residency(cpus).unwrap_or(stat_idle),
            switches,
            knid: knid.map_or(Duration::ZERO, process_time),
            threads: knid.map(thread_switches).unwrap_or_default(),
        }
    }

    /// What the machine did from `before` to this sample.
    pub fn since(&self, before: &Sample) -> Cpu {
        let wall = self.at.duration_since(before.at) * self.cpus;
        let mut by_thread = BTreeMap::new();
        for (tid, (name, now)) in &self.threads {
            let then = before.threads.get(tid).map_or(0, |(_, then)| *then);
            *by_thread.entry(name.clone()).or_insert(0) += now.saturating_sub(then);
        }
        Cpu {
            busy: wall.saturating_sub(self.idle.saturating_sub(before.idle)),
            switches: self.switches.saturating_sub(before.switches),
            knid: self.knid.saturating_sub(before.knid),
            by_thread,
        }
    }
}

impl Cpu {
    /// Adds a span's counters.
    pub fn add(&mut self, other: Cpu) {
        self.busy += other.busy;
        self.switches += other.switches;
        self.knid += other.knid;
        for (name, switches) in other.by_thread {
            *self.by_thread.entry(name).or_insert(0) += switches;
        }
    }

    /// The machine's CPU time per cycle (ms), over `cycles` cycles.
    pub fn busy_ms(&self, cycles: usize) -> f64 {
        self.busy.as_secs_f64() * 1e3 / cycles.max(1) as f64
    }

    /// knid's CPU time per cycle (ms).
    pub fn knid_ms(&self, cycles: usize) -> f64 {
        self.knid.as_secs_f64() * 1e3 / cycles.max(1) as f64
    }

    /// Context switches per cycle.
    pub fn switches_per(&self, cycles: usize) -> f64 {
        self.switches as f64 / cycles.max(1) as f64
    }

    /// One line: each counter per cycle, over `cycles` cycles.
    pub fn per_cycle(&self, cycles: usize) -> String {
        format!(
            "{:.2} ms CPU per cycle on the machine (knid's own {:.2} ms), {:.1} context switches \
             per cycle",
            self.busy_ms(cycles),
            self.knid_ms(cycles),
            self.switches_per(cycles)
        )
    }

    /// knid's context switches per cycle by thread name, the most first:
    /// `sled-io-* 19.8, knid 4.7, …`; empty when none were counted.
    pub fn by_thread_per(&self, cycles: usize) -> String {
        self.by_thread_line(cycles.max(1) as f64, "")
    }

    /// knid's context switches per second over `span` by thread name, the most first, and
    /// their sum: `sled-io-* 7.0/s, knid 0.3/s (7.3/s in all)`.
    pub fn by_thread_rate(&self, span: Duration) -> String {
        let secs = span.as_secs_f64().max(1e-9);
        let all = self.by_thread.values().sum::<u64>() as f64 / secs;
        format!("{} ({all:.1}/s in all)", self.by_thread_line(secs, "/s"))
    }

    /// Each thread name's count divided by `per`, with `unit`, the most first.
    fn by_thread_line(&self, per: f64, unit: &str) -> String {
        let mut threads: Vec<(&String, &u64)> = self.by_thread.iter().collect();
        threads.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        threads
            .iter()
            .filter(|(_, switches)| **switches > 0)
            .map(|(name, switches)| format!("{name} {:.1}{unit}", **switches as f64 / per))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Idle time of all `cpus` CPUs: the sum of cpuidle's residency in each state (µs), if every CPU
/// has it.
fn cpuidle_residency(cpus: u32) -> Option<Duration> {
    let mut total = 0u64;
    for cpu in 0..cpus {
        let dir = Path::new("/sys/devices/system/cpu")
            .join(format!("cpu{cpu}"))
            .join("cpuidle");
        let states = std::fs::read_dir(&dir).ok()?;
        for state in states.flatten() {
            let time = std::fs::read_to_string(state.path().join("time")).ok()?;
            total += time.trim().parse::<u64>().ok()?;
        }
    }
    Some(Duration::from_micros(total))
}

/// utime + stime of a process, all its threads (those that ended included).
fn process_time(pid: Pid) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command (which may hold spaces) follow its ')'; utime and stime are
    // the 14th and 15th fields, the 12th and 13th after it.
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return Duration::ZERO;
    };
    let ticks: u64 = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|f| f.parse::<u64>().ok())
        .sum();
    TICK * u32::try_from(ticks).expect("ticks fit u32")
}

/// Context switches (voluntary and involuntary) of each of `pid`'s threads, by thread id, with
/// the thread's name as [`testkit::threads::pattern`] gives it.
fn thread_switches(pid: Pid) -> BTreeMap<u32, (String, u64)> {
    let mut threads = BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return threads;
    };
    for task in tasks.flatten() {
        let Some(tid) = task
            .file_name()
            .to_str()
            .and_then(|t| t.parse::<u32>().ok())
        else {
            continue;
        };
        // A thread may end between the listing and the read.
        let Ok(status) = std::fs::read_to_string(task.path().join("status")) else {
            continue;
        };
        let mut name = String::new();
        let mut switches = 0;
        for line in status.lines() {
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            match key {
                "Name" => name = testkit::threads::pattern(value.trim()),
                "voluntary_ctxt_switches" | "nonvoluntary_ctxt_switches" => {
                    switches += value.trim().parse::<u64>().unwrap_or(0);
                }
                _ => {}
            }
        }
        threads.insert(tid, (name, switches));
    }
    threads
}
