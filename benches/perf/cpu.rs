//! What a phase costs the machine: CPU time on every CPU (all but idle and I/O wait), context
//! switches, and knid's own CPU time, read from `/proc` around each timed batch. Rates say how
//! fast; this says how much work each cycle took, which varies far less between runs.

use std::time::Duration;

use nix::unistd::Pid;

/// Ticks of `/proc/stat` and `/proc/<pid>/stat`: USER_HZ, 100 per second on Linux.
const TICK: Duration = Duration::from_millis(10);

/// Counters at one moment, or their difference over a span.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cpu {
    /// CPU time of the whole machine, every CPU, not idle and not waiting for I/O.
    pub busy: Duration,
    /// Context switches of the whole machine.
    pub switches: u64,
    /// knid's CPU time (every thread, user and system).
    pub knid: Duration,
}

impl Cpu {
    /// The counters now; knid's only if `knid` is given.
    pub fn sample(knid: Option<Pid>) -> Cpu {
        let stat = std::fs::read_to_string("/proc/stat").expect("read /proc/stat");
        let mut cpu = Cpu::default();
        for line in stat.lines() {
            let mut fields = line.split_whitespace();
            match fields.next() {
                Some("cpu") => {
                    let ticks: Vec<u64> =
                        fields.map(|f| f.parse().expect("a tick count")).collect();
                    // user nice system idle iowait irq softirq steal …
                    let busy: u64 = ticks.iter().take(8).sum::<u64>() - ticks[3] - ticks[4];
                    cpu.busy = TICK * u32::try_from(busy).expect("ticks fit u32");
                }
                Some("ctxt") => {
                    cpu.switches = fields.next().and_then(|n| n.parse().ok()).expect("ctxt")
                }
                _ => {}
            }
        }
        if let Some(pid) = knid {
            cpu.knid = process_time(pid);
        }
        cpu
    }

    /// The counters' growth from `before` to `self`.
    pub fn since(self, before: Cpu) -> Cpu {
        Cpu {
            busy: self.busy.saturating_sub(before.busy),
            switches: self.switches.saturating_sub(before.switches),
            knid: self.knid.saturating_sub(before.knid),
        }
    }

    /// Adds a span's counters.
    pub fn add(&mut self, other: Cpu) {
        self.busy += other.busy;
        self.switches += other.switches;
        self.knid += other.knid;
    }

    /// One line: each counter per cycle, over `cycles` cycles.
    pub fn per_cycle(&self, cycles: usize) -> String {
        let n = cycles.max(1) as f64;
        format!(
            "{:.2} ms CPU per cycle on the machine (knid's own {:.2} ms), {:.1} context switches \
             per cycle",
            self.busy.as_secs_f64() * 1e3 / n,
            self.knid.as_secs_f64() * 1e3 / n,
            self.switches as f64 / n
        )
    }
}

/// utime + stime of a process, all its threads (those that ended included).
fn process_time(pid: Pid) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command (which may hold spaces) end with ')'; utime and stime are the
    // 14th and 15th fields, the 12th and 13th after it.
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
