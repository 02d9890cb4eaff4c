//! What a phase costs the machine: CPU time on every CPU (all but idle), context switches, and
//! knid's own CPU time, read from `/proc` and `/sys` around each timed batch. Rates say how
//! fast; this says how much work each cycle took.
//!
//! The machine's CPU time is the CPUs' time less their idle time, which the kernel measures
//! precisely (cpuidle's per-state residency in µs; else `/proc/stat`'s idle and iowait, exact
//! on a tickless kernel too). Summing `/proc/stat`'s user and system ticks instead would miss
//! short bursts between idle periods, which no tick sees. knid's time is its threads' scheduler
//! runtime (`/proc/<pid>/stat`'s utime + stime, scaled to it by the kernel), in 10 ms ticks.

use std::path::Path;
use std::time::{Duration, Instant};

use nix::unistd::Pid;

/// Ticks of `/proc/stat` and `/proc/<pid>/stat`: USER_HZ, 100 per second on Linux.
const TICK: Duration = Duration::from_millis(10);

/// Counters at one moment.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    at: Instant,
    cpus: u32,
    idle: Duration,
    switches: u64,
    knid: Duration,
}

/// The counters' growth over a span, or the sum over several.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cpu {
    /// CPU time of the whole machine, every CPU, not idle.
    pub busy: Duration,
    /// Context switches of the whole machine.
    pub switches: u64,
    /// knid's CPU time (every thread, user and system).
    pub knid: Duration,
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
        }
    }

    /// What the machine did from `before` to this sample.
    pub fn since(&self, before: &Sample) -> Cpu {
        let wall = self.at.duration_since(before.at) * self.cpus;
        Cpu {
            busy: wall.saturating_sub(self.idle.saturating_sub(before.idle)),
            switches: self.switches.saturating_sub(before.switches),
            knid: self.knid.saturating_sub(before.knid),
        }
    }
}

impl Cpu {
    /// Adds a span's counters.
    pub fn add(&mut self, other: Cpu) {
        self.busy += other.busy;
        self.switches += other.switches;
        self.knid += other.knid;
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
