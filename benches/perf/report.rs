//! The performance report of benches/perf.rs: markdown (targets, latency, churn, ratios, reaper,
//! footprint, method), the SVG chart and the raw samples, plus the run's context (date, commit,
//! kernel, CPUs, load, command).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use knid_core::config::MIN_DEFAULT_SHARDS;
use testkit::chart;
use testkit::measure::{ms, percentile, spread};

use crate::{
    per_sandbox_ms, Drain, Footprint, Knobs, Snapshot, Timed, BATCH, CNI_SUBNETS, IDLE_SPAN, MIB,
    NARROW_WORKERS, RESTARTED, RESTARTS, STEADY, WARM_UP,
};

/// Everything one run measured.
pub struct Results {
    pub knobs: Knobs,
    /// The batched floor's detach, as the tables name it.
    pub group_op: String,
    /// /proc/loadavg before and after the run.
    pub load: (String, String),
    /// knid attach+detach at concurrency 1 (dual stack, then IPv4 only) and at the clients'
    /// concurrency (dual stack).
    pub knid1: Timed,
    pub knid1_v4: Timed,
    /// knid's dual-stack cycles at concurrency 1 and `--log-level debug`, apart from the timed
    /// phases (which run at its default level): their log gives the step tables.
    pub steps: Timed,
    /// What a request costs before knid does any work (knid at its default level).
    pub round_trips: RoundTrips,
    /// knid's phases of each of those attaches (its debug log), the total last.
    pub attach_phases: Vec<(String, Vec<Duration>)>,
    /// knid's phases of each of those detaches (its debug log), the total last.
    pub detach_phases: Vec<(String, Vec<Duration>)>,
    pub knid8: Timed,
    /// The same with [`NARROW_WORKERS`] shards, unless `KNID_BENCH_CONFIG` set `workers`.
    pub knid8_narrow: Option<Timed>,
    /// The floor (dual stack), detached per sandbox and by link group; IPv4 only by link group;
    /// its churn at the clients' concurrency, retired as knid's detach retires (pod end set
    /// down), and with the pod end left up.
    pub floor1: Timed,
    pub floor_batched: Timed,
    pub floor_batched_v4: Timed,
    pub floor8: Timed,
    pub floor8_pod_up: Timed,
    /// Whether the floor put a source guard on each sandbox (as knid's networks did).
    pub floor_guards: bool,
    /// The reference bridge plugin (ADD in `attach`, DEL in `detach`), if installed, and where.
    pub cni: Option<Timed>,
    pub plugins: Option<PathBuf>,
    /// knid-cni against knid: the build the image ships.
    pub shim: Timed,
    /// cargo's glibc knid-cni, beside it (when the shipped one is the musl build).
    pub shim_glibc: Option<Timed>,
    /// The shipped knid-cni through Debian's libcni (when Go and libcni are installed).
    pub shim_libcni: Option<Timed>,
    /// A no-op static plugin through the same libcni: the floor of a call through it.
    pub libcni_floor: Option<Timed>,
    /// Which knid-cni `shim` is.
    pub shim_build: String,
    pub reaper: Drain,
    /// Just after start-up (its on-demand threads still there).
    pub started: Snapshot,
    /// Idle: once the on-demand threads have ended.
    pub idle: Snapshot,
    pub footprint: Footprint,
}

/// How long after the last one each of [`RoundTrips`] starts: about a concurrency-1 attach.
pub const ROUND_TRIP_PAUSE: Duration = Duration::from_micros(500);

/// Round trips [`ROUND_TRIP_PAUSE`] apart, in run order: between two threads over a unix socket
/// pair (a byte each way), and calls of a method knid does not have (its server's own cost).
pub struct RoundTrips {
    pub pair: Vec<Duration>,
    pub server: Vec<Duration>,
}

impl RoundTrips {
    /// Both p50s, as one line.
    pub fn line(&self) -> String {
        format!(
            "round trips {} ms apart, p50: two threads over a unix socket pair {:.3} ms, knid's \
             server answering an unknown method {:.3} ms",
            ms(ROUND_TRIP_PAUSE),
            p50(&self.pair),
            p50(&self.server)
        )
    }
}

/// One latency row of the tables and of samples.csv.
struct Row<'a> {
    subject: String,
    op: &'a str,
    /// In run order.
    samples: &'a [Duration],
    /// Sequential ops per second (n / their summed time), where that means something.
    per_sec: bool,
}

/// (p50, p90, p99, max) in ms of unsorted `samples`.
fn stats(samples: &[Duration]) -> Option<[f64; 4]> {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let max = *sorted.last()?;
    Some([
        ms(percentile(&sorted, 50.0)),
        ms(percentile(&sorted, 90.0)),
        ms(percentile(&sorted, 99.0)),
        ms(max),
    ])
}

/// The mean of `samples` (zero for none).
fn mean(samples: &[Duration]) -> Duration {
    let n = u32::try_from(samples.len()).unwrap_or(u32::MAX).max(1);
    samples.iter().sum::<Duration>() / n
}

/// The nearest-rank p50 of unsorted `samples`, in ms (NaN for none).
pub fn p50(samples: &[Duration]) -> f64 {
    stats(samples).map_or(f64::NAN, |s| s[0])
}

/// The attach p50 ratio of each pair of batches run in turn, `knid`'s over `floor`'s, in run
/// order.
fn pair_ratios(knid: &Timed, floor: &Timed) -> Vec<f64> {
    knid.batches
        .iter()
        .zip(&floor.batches)
        .map(|(k, f)| k.attach_p50 / f.attach_p50)
        .collect()
}

/// How the pairs of batches behind an attach ratio compare, for a report line: "; batch by
/// batch 1.21–1.40× (median 1.30×, 5 pairs)", or nothing without pairs.
pub fn pairs_text(knid: &Timed, floor: &Timed) -> String {
    let ratios = pair_ratios(knid, floor);
    spread(ratios.iter().copied()).map_or_else(String::new, |s| {
        format!(
            "; batch by batch {:.2}–{:.2}× (median {:.2}×, {} pairs)",
            s.least,
            s.most,
            s.median,
            ratios.len()
        )
    })
}

/// The range of a phase's per-batch rates, for a report line: "640–720 /s", or "-".
pub fn rates_text(timed: &Timed) -> String {
    spread(timed.batches.iter().map(|b| b.per_sec)).map_or_else(
        || "-".to_owned(),
        |s| format!("{:.0}–{:.0} /s", s.least, s.most),
    )
}

/// A target of docs/performance.md#targets.
enum Goal {
    AtMost(f64),
    AtLeast(f64),
}

impl Goal {
    /// (met?, by how much) for `value`.
    fn judge(&self, value: f64) -> (&'static str, String) {
        if value.is_nan() {
            return ("n/a", "not measured".to_owned());
        }
        match *self {
            Goal::AtMost(limit) if value <= limit => (
                "**met**",
                format!("{:.0}% below the limit", (1.0 - value / limit) * 100.0),
            ),
            Goal::AtMost(limit) => ("**missed**", format!("{:.2}× the limit", value / limit)),
            Goal::AtLeast(limit) if value >= limit => {
                ("**met**", format!("{:.2}× the target", value / limit))
            }
            Goal::AtLeast(limit) => (
                "**missed**",
                format!(
                    "{:.0}% short ({:.2}× the target)",
                    (1.0 - value / limit) * 100.0,
                    value / limit
                ),
            ),
        }
    }
}

impl Results {
    fn rows(&self) -> Vec<Row<'_>> {
        let c = self.knobs.clients;
        let fp = &self.footprint;
        let mut rows = vec![
            row("knid, concurrency 1", "attach", &self.knid1.attach, true),
            row("knid, concurrency 1", "detach", &self.knid1.detach, true),
            row(
                "knid, concurrency 1, IPv4 only",
                "attach",
                &self.knid1_v4.attach,
                true,
            ),
            row(
                "knid, concurrency 1, IPv4 only",
                "detach",
                &self.knid1_v4.detach,
                true,
            ),
            row(
                &format!("knid, concurrency {c}"),
                "attach",
                &self.knid8.attach,
                false,
            ),
            row(
                &format!("knid, concurrency {c}"),
                "detach",
                &self.knid8.detach,
                false,
            ),
            row("floor (knid_netops)", "attach", &self.floor1.attach, true),
            row(
                "floor (knid_netops)",
                "detach: RTM_DELLINK per sandbox",
                &self.floor1.detach,
                true,
            ),
            row(
                "floor (knid_netops), batched",
                "attach",
                &self.floor_batched.attach,
                true,
            ),
            row(
                "floor (knid_netops), batched",
                &self.group_op,
                &self.floor_batched.detach,
                false,
            ),
            row(
                "floor (knid_netops), batched, IPv4 only",
                "attach",
                &self.floor_batched_v4.attach,
                true,
            ),
            row(
                &format!("floor (knid_netops), concurrency {c}"),
                "attach",
                &self.floor8.attach,
                false,
            ),
            row(
                &format!("floor (knid_netops), concurrency {c}"),
                "detach: pod end down, host end off the bridge into the link group",
                &self.floor8.detach,
                false,
            ),
            row(
                &format!("floor (knid_netops), concurrency {c}, pod end left up"),
                "attach",
                &self.floor8_pod_up.attach,
                false,
            ),
            row(
                &format!("floor (knid_netops), concurrency {c}, pod end left up"),
                "detach: host end off the bridge into the link group",
                &self.floor8_pod_up.detach,
                false,
            ),
            row(
                &format!("knid's server, {} ms apart", ms(ROUND_TRIP_PAUSE)),
                "unknown method (Unimplemented)",
                &self.round_trips.server,
                false,
            ),
            row(
                &format!(
                    "two threads over a unix socket pair, {} ms apart",
                    ms(ROUND_TRIP_PAUSE)
                ),
                "round trip (a byte each way)",
                &self.round_trips.pair,
                false,
            ),
        ];
        if let Some(cni) = &self.cni {
            rows.push(row(
                "CNI bridge + host-local (exec)",
                "ADD",
                &cni.attach,
                true,
            ));
            rows.push(row(
                "CNI bridge + host-local (exec)",
                "DEL",
                &cni.detach,
                true,
            ));
        }
        rows.extend([
            row("knid-cni (exec) → knid", "ADD", &self.shim.attach, true),
            row("knid-cni (exec) → knid", "DEL", &self.shim.detach, true),
        ]);
        if let Some(glibc) = &self.shim_glibc {
            rows.extend([
                row(
                    "knid-cni, glibc build (exec) → knid",
                    "ADD",
                    &glibc.attach,
                    true,
                ),
                row(
                    "knid-cni, glibc build (exec) → knid",
                    "DEL",
                    &glibc.detach,
                    true,
                ),
            ]);
        }
        if let Some(libcni) = &self.shim_libcni {
            rows.extend([
                row(
                    "knid-cni through libcni (Go) → knid",
                    "ADD",
                    &libcni.attach,
                    true,
                ),
                row(
                    "knid-cni through libcni (Go) → knid",
                    "DEL",
                    &libcni.detach,
                    true,
                ),
            ]);
        }
        if let Some(floor) = &self.libcni_floor {
            rows.extend([
                row(
                    "a no-op plugin through libcni (Go)",
                    "ADD",
                    &floor.attach,
                    true,
                ),
                row(
                    "a no-op plugin through libcni (Go)",
                    "DEL",
                    &floor.detach,
                    true,
                ),
            ]);
        }
        rows.extend([
            row(
                &format!(
                    "knid reaper: {} detached, concurrency {c}",
                    self.reaper.count
                ),
                "detach",
                &self.reaper.detach,
                false,
            ),
            row(
                &format!("knid filling to {}, concurrency {c}", fp.count),
                "attach",
                &fp.fill.attach,
                false,
            ),
            row(
                &format!("knid draining {}, concurrency {c}", fp.count),
                "detach",
                &fp.drain.detach,
                false,
            ),
            row(
                &format!("knid start-up, {} recorded", fp.count),
                "spawn → ready",
                &fp.ready,
                false,
            ),
        ]);
        rows
    }

    pub fn markdown(&self) -> String {
        let mut md = String::new();
        let k = &self.knobs;
        let _ = writeln!(md, "# knid performance report\n");
        let _ = writeln!(md, "- date: {}", utc_now());
        let _ = writeln!(md, "- commit: {}", git_commit());
        let _ = writeln!(md, "- kernel: {}", read_trim("/proc/sys/kernel/osrelease"));
        let _ = writeln!(
            md,
            "- CPUs: {} ({})",
            std::thread::available_parallelism().map_or(0, usize::from),
            cpu_model()
        );
        let _ = writeln!(
            md,
            "- load average (1, 5, 15 min): {} before, {} after",
            self.load.0, self.load.1
        );
        let _ = writeln!(
            md,
            "- N = {} (`KNID_BENCH_N`), concurrency {} (`KNID_BENCH_CLIENTS`), reaper {} \
             (`KNID_BENCH_REAP`), footprint {} (`KNID_BENCH_FOOTPRINT`); {WARM_UP} warm-up \
             cycles per phase",
            k.n, k.clients, k.reap, k.footprint
        );
        let _ = writeln!(md, "- command: `{}`", command_line());
        let failed: usize = self.failures().iter().map(|(_, e)| e.len()).sum();
        let _ = writeln!(
            md,
            "- failed operations: {}",
            if failed == 0 {
                "none".to_owned()
            } else {
                format!("**{failed}**, not in the samples (see Errors)")
            }
        );
        let _ = writeln!(
            md,
            "- build: {}; knid runs at its default `info`, as deployed, in every phase measured \
             against a target (concurrency 1 and {}, knid-cni, the footprint), and with \
             `--log-level debug` in a separate phase of concurrency-1 cycles whose log gives the \
             step tables, and in the reaper's (its rounds are read from the log); in a private \
             network namespace, sandbox netns made in process \
             (`knid_netops::netns::create_bound`, `lo` up) before each batch of {BATCH} and \
             removed after it, never timed",
            if cfg!(debug_assertions) {
                "debug (not `cargo bench`): numbers are not representative"
            } else {
                "optimized (`cargo bench` profile)"
            },
            self.knobs.clients
        );

        let _ = writeln!(
            md,
            "- source guards: {}",
            if self.floor_guards {
                "knid's networks install them (the default), and so does the floor, through the \
                 same `knid_netops::nft` calls on its own table: the same kernel work"
            } else {
                "knid's networks install none (`antispoof = false`), nor does the floor"
            }
        );
        self.targets(&mut md);
        self.latency_table(&mut md);
        self.churn_table(&mut md);
        self.ratios(&mut md);
        self.phases_section(&mut md);
        self.reaper_section(&mut md);
        self.footprint_section(&mut md);
        self.errors_section(&mut md);
        let _ = writeln!(
            md,
            "\n## Latency CDFs\n\n![attach and detach latency CDFs](latency.svg)\n\nRaw \
             samples (every timed operation, in run order): `samples.csv` (op,subject,ns)."
        );
        self.notes(&mut md);
        md
    }

    /// Where an attach's and a detach's time goes, from knid's own debug line per operation.
    fn phases_section(&self, md: &mut String) {
        phases_of(
            md,
            ("an attach", "attach"),
            &self.attach_phases,
            &self.steps.attach,
            " (ttrpc framing, the API thread that reads the request and runs it on the \
             sandbox's idle shard, the validation and conversion around it). lookup: the \
             sandbox's records and its netns; plan: names, addresses, MAC; intent: the Pending \
             records and reservations applied; mark: Provisioning applied and the background \
             flush started; kernel: veth creation, the pod side in one netlink batch; \
             intent-wait: what was left of the intent's flush after the veth was made; \
             complete: the host end's ownership mark, group and hairpin mode, the last kernel \
             step; commit: Attached applied (durable with the next flush; a crash before it is \
             rolled forward by recovery).",
        );
        let _ = writeln!(
            md,
            "\nOf the RPC, {ms:.1} ms after the last call (the pace of these attaches, both sides' \
             threads asleep in between), at the p50: a call knid's server answers without a \
             handler (an unknown method: its reading, decoding and reply, the I/O role parked \
             or handed over) takes {:.3} ms, and a bare round trip between two threads over a unix \
             socket pair, a byte each way, {:.3} ms: this machine's own two wake-ups.",
            p50(&self.round_trips.server),
            p50(&self.round_trips.pair),
            ms = ms(ROUND_TRIP_PAUSE),
        );
        phases_of(
            md,
            ("a detach", "detach"),
            &self.detach_phases,
            &self.steps.detach,
            ". lookup: the sandbox's records; commit: the Detaching marks and the sandbox \
             record's change, one key at a time, and their flush started in the background; \
             kernel: the host end off its bridge into the reaper's link group, the pod end set \
             down, the source guard removed, while the marks flush; commit-wait: what was left \
             of their flush (durable before the reply); mark: Reaping applied (a progress mark) \
             and the links handed to the reaper.",
        );
    }

    fn targets(&self, md: &mut String) {
        let knid_attach = p50(&self.knid1.attach);
        let floor_attach = p50(&self.floor_batched.attach);
        let knid_attach_v4 = p50(&self.knid1_v4.attach);
        let floor_attach_v4 = p50(&self.floor_batched_v4.attach);
        let cni_add = self.cni.as_ref().map_or(f64::NAN, |c| p50(&c.attach));
        let fp = &self.footprint;
        let full = fp
            .snapshots
            .iter()
            .find(|s| s.label == format!("{} attached", fp.count));
        let steady = format!("{STEADY}, {} attached", fp.count);
        let held = fp.snapshots.iter().find(|s| s.label == steady);
        let settled = fp.snapshots.iter().find(|s| {
            s.label != steady
                && s.label.starts_with("idle: ")
                && s.label.ends_with(&format!(", {} attached", fp.count))
        });
        let restarted = fp.snapshots.iter().find(|s| s.label.starts_with(RESTARTED));
        let mut ready = fp.ready.clone();
        ready.sort();
        let ready_p50 = ready.get(ready.len() / 2).map_or(f64::NAN, |d| ms(*d));
        let ready_max = ready.last().map_or(f64::NAN, |d| ms(*d));
        let narrow = self
            .knid8_narrow
            .as_ref()
            .map_or_else(String::new, |narrow| {
                format!(
                    "; with `workers = {NARROW_WORKERS}`: {:.0} /s, {:.2}× the floor",
                    narrow.per_sec(),
                    narrow.per_sec() / self.floor8.per_sec()
                )
            });
        let targets: Vec<(String, Goal, f64, String)> = vec![
            (
                "attach p50 ≤ 1.25× the floor, dual stack".into(),
                Goal::AtMost(1.25),
                knid_attach / floor_attach,
                format!(
                    "{:.2}× ({knid_attach:.3} ms / floor {floor_attach:.3} ms){}",
                    knid_attach / floor_attach,
                    pairs_text(&self.knid1, &self.floor_batched)
                ),
            ),
            (
                "attach p50 ≤ 1.25× the floor, IPv4 only".into(),
                Goal::AtMost(1.25),
                knid_attach_v4 / floor_attach_v4,
                format!(
                    "{:.2}× ({knid_attach_v4:.3} ms / floor {floor_attach_v4:.3} ms){}",
                    knid_attach_v4 / floor_attach_v4,
                    pairs_text(&self.knid1_v4, &self.floor_batched_v4)
                ),
            ),
            (
                "attach ≥ 10× faster than CNI ADD (p50)".into(),
                Goal::AtLeast(10.0),
                cni_add / knid_attach,
                if cni_add.is_nan() {
                    "plugins absent".to_owned()
                } else {
                    format!(
                        "{:.1}× (CNI ADD {cni_add:.3} ms / {knid_attach:.3} ms)",
                        cni_add / knid_attach
                    )
                },
            ),
            (
                "detach p50 ≤ 0.5 ms".into(),
                Goal::AtMost(0.5),
                p50(&self.knid1.detach),
                format!("{:.3} ms", p50(&self.knid1.detach)),
            ),
            (
                format!(
                    "churn at concurrency {} ≥ 1.0× the floor's at the same concurrency",
                    self.knobs.clients
                ),
                Goal::AtLeast(1.0),
                self.knid8.per_sec() / self.floor8.per_sec(),
                format!(
                    "{:.2}× ({:.0} /s / floor {:.0} /s, knid's kernel work); batch by batch \
                     knid {}, the floor {}",
                    self.knid8.per_sec() / self.floor8.per_sec(),
                    self.knid8.per_sec(),
                    self.floor8.per_sec(),
                    rates_text(&self.knid8),
                    rates_text(&self.floor8)
                ),
            ),
            (
                format!(
                    "churn ≥ 1,000 sandboxes/s at concurrency {}",
                    self.knobs.clients
                ),
                Goal::AtLeast(1000.0),
                self.knid8.per_sec(),
                format!(
                    "{:.0} /s (the floor at the same concurrency, knid's kernel work: {:.0} /s; \
                     leaving the pod end up: {:.0} /s); the machine's CPU per cycle {:.2} ms \
                     against the floor's {:.2} ms{narrow}",
                    self.knid8.per_sec(),
                    self.floor8.per_sec(),
                    self.floor8_pod_up.per_sec(),
                    self.knid8.cpu.busy_ms(self.knid8.attach.len()),
                    self.floor8.cpu.busy_ms(self.floor8.attach.len()),
                ),
            ),
            (
                "idle RSS ≤ 4 MiB".into(),
                Goal::AtMost(4.0),
                self.idle.rss_kib as f64 / 1024.0,
                format!(
                    "{:.1} MiB ({:.1} anonymous, {:.1} the binary's mapped pages)",
                    self.idle.rss_kib as f64 / 1024.0,
                    self.idle.anon_kib as f64 / 1024.0,
                    self.idle.file_kib as f64 / 1024.0
                ),
            ),
            (
                "idle ≤ 9 threads".into(),
                Goal::AtMost(9.0),
                self.idle.threads as f64,
                format!(
                    "{} ({} just after start-up)",
                    self.idle.threads, self.started.threads
                ),
            ),
            (
                format!("RSS ≤ 12 MiB with {} attached", of_5000(fp.count)),
                Goal::AtMost(12.0),
                held.map_or(f64::NAN, |s| s.rss_kib as f64 / 1024.0),
                held.zip(full).map_or("-".into(), |(h, s)| {
                    format!(
                        "{:.1} MiB (anonymous {:.1}, code {}) idle, the next reconciler round \
                         over (at most {:.1} MiB through it); {} once the fill's threads ended; \
                         {:.1} MiB just after the fill (peak {:.1} MiB); {}",
                        h.rss_kib as f64 / 1024.0,
                        h.anon_kib as f64 / 1024.0,
                        code_mib(h),
                        fp.round_peak_kib as f64 / 1024.0,
                        settled.map_or("-".into(), |t| format!(
                            "{:.1} MiB (code {})",
                            t.rss_kib as f64 / 1024.0,
                            code_mib(t)
                        )),
                        s.rss_kib as f64 / 1024.0,
                        s.hwm_kib as f64 / 1024.0,
                        restarted.map_or("-".into(), |r| format!(
                            "{:.1} MiB just after a restart",
                            r.rss_kib as f64 / 1024.0
                        ))
                    )
                }),
            ),
            (
                format!("ready ≤ 200 ms with {} recorded", of_5000(fp.count)),
                Goal::AtMost(200.0),
                ready_p50,
                format!("{ready_p50:.1} ms (median of {RESTARTS}; max {ready_max:.1} ms)"),
            ),
            (
                "knid-cni ADD p50 ≤ 2 ms through libcni".into(),
                Goal::AtMost(2.0),
                self.shim_libcni
                    .as_ref()
                    .map_or(p50(&self.shim.attach), |l| p50(&l.attach)),
                self.shim_measured(),
            ),
            (
                "reaper ≥ 1,000 links/s".into(),
                Goal::AtLeast(1000.0),
                self.reaper.links_per_sec(),
                format!(
                    "{:.0} links/s ({} links; {:.0} links/s draining {})",
                    self.reaper.links_per_sec(),
                    self.reaper.links,
                    fp.drain.links_per_sec(),
                    fp.count
                ),
            ),
        ];
        let _ = writeln!(md, "\n## Measured against the targets\n");
        let _ = writeln!(md, "| target | measured | result | by how much |");
        let _ = writeln!(md, "|---|---|---|---|");
        for (what, goal, value, shown) in targets {
            let (verdict, margin) = goal.judge(value);
            let _ = writeln!(md, "| {what} | {shown} | {verdict} | {margin} |");
        }
    }

    /// The knid-cni ADD target's measured column: through libcni when it ran (else as the bench
    /// execs it), with the bench's own exec of each build beside it.
    fn shim_measured(&self) -> String {
        let exec = match &self.shim_glibc {
            Some(glibc) => format!(
                "exec'd by the bench as libcni does: {:.3} ms, cargo's glibc build {:.3} ms",
                p50(&self.shim.attach),
                p50(&glibc.attach)
            ),
            None => format!(
                "exec'd by the bench as libcni does: {:.3} ms",
                p50(&self.shim.attach)
            ),
        };
        let floor = self.libcni_floor.as_ref().map_or(String::new(), |f| {
            format!(
                "; a no-op static plugin through the same libcni {:.3} ms, the floor of a call",
                p50(&f.attach)
            )
        });
        match &self.shim_libcni {
            Some(libcni) => {
                let through = p50(&libcni.attach);
                let bound = self.libcni_bound().map_or(String::new(), |(bound, parts)| {
                    format!(
                        "; the least this machine allows such a call, summed from this run's \
                         p50s: {bound:.3} ms ({parts}), knid-cni through libcni {:.2}× it",
                        through / bound
                    )
                });
                format!(
                    "{through:.3} ms through Debian's libcni (Go), the build the image ships; \
                     {exec}{floor}{bound}"
                )
            }
            None => format!("{exec} (libcni not installed: not through it)"),
        }
    }

    /// The least a knid-cni ADD through libcni can take on this machine, from this run's p50s:
    /// a call of the no-op plugin through the same libcni, the floor's dual-stack attach (the
    /// kernel work of knid's attach, on warm caches) and a bare round trip to knid's server
    /// (knid-cni's Attach call, less any work) — with the sum's parts as text. `None` when the
    /// no-op did not run.
    fn libcni_bound(&self) -> Option<(f64, String)> {
        let noop = p50(&self.libcni_floor.as_ref()?.attach);
        let kernel = p50(&self.floor_batched.attach);
        let call = p50(&self.round_trips.server);
        Some((
            noop + kernel + call,
            format!(
                "the no-op through libcni {noop:.3} + the floor's dual-stack attach \
                 {kernel:.3} + knid's bare round trip {call:.3}"
            ),
        ))
    }

    fn latency_table(&self, md: &mut String) {
        let _ = writeln!(md, "\n## Latency (ms, nearest-rank percentiles)\n");
        let _ = writeln!(md, "| subject | op | n | p50 | p90 | p99 | max | ops/s |");
        let _ = writeln!(md, "|---|---|---|---|---|---|---|---|");
        for r in self.rows() {
            let Some([p50, p90, p99, max]) = stats(r.samples) else {
                continue;
            };
            let per_sec = if r.per_sec {
                let busy: Duration = r.samples.iter().sum();
                format!("{:.0}", r.samples.len() as f64 / busy.as_secs_f64())
            } else {
                "-".to_owned()
            };
            let _ = writeln!(
                md,
                "| {} | {} | {} | {p50:.3} | {p90:.3} | {p99:.3} | {max:.3} | {per_sec} |",
                r.subject,
                r.op,
                r.samples.len()
            );
        }
        if self.cni.is_none() {
            let _ = writeln!(
                md,
                "| CNI bridge + host-local (exec) | ADD/DEL | - | - | - | - | - | skipped: no \
                 `bridge` + `host-local` in /opt/cni/bin or /usr/lib/cni |"
            );
        }
        let _ = writeln!(
            md,
            "\nops/s: sequential operations per second of their own summed time. The batched \
             floor's detach row has one sample per group deletion of up to {BATCH} sandboxes: \
             {:.3} ms per sandbox.",
            per_sandbox_ms(&self.floor_batched)
        );
    }

    fn churn_table(&self, md: &mut String) {
        let c = self.knobs.clients;
        let _ = writeln!(
            md,
            "\n## Churn (attach + detach cycles per second; netns creation excluded)\n"
        );
        let _ = writeln!(
            md,
            "The cost columns are per cycle, over the timed batches: the whole machine's CPU \
             time (every CPU's time less its idle time, from cpuidle, else `/proc/stat`), knid's \
             own CPU time and \
             the machine's context switches (from `/proc`).\n"
        );
        if self.knid8_narrow.is_some() {
            let _ = writeln!(
                md,
                "`workers = {NARROW_WORKERS}`: knid restarted with {NARROW_WORKERS} shards instead \
                 of its default (one per CPU, at least {MIN_DEFAULT_SHARDS}), the same phase: \
                 fewer operations in the kernel at once (docs/performance-history.md, round two's \
                 twelfth and thirteenth parts).\n"
            );
        }
        let _ = writeln!(
            md,
            "| subject | concurrency | cycles | cycles/s | machine CPU ms | knid CPU ms | context \
             switches |"
        );
        let _ = writeln!(md, "|---|---|---|---|---|---|---|");
        let mut churn = vec![
            ("knid", 1, &self.knid1),
            ("knid, IPv4 only", 1, &self.knid1_v4),
            ("knid", c, &self.knid8),
        ];
        let narrow = format!("knid, `workers = {NARROW_WORKERS}`");
        if let Some(t) = &self.knid8_narrow {
            churn.push((&narrow, c, t));
        }
        churn.extend([
            ("floor, RTM_DELLINK per sandbox", 1, &self.floor1),
            (
                "floor, one group RTM_DELLINK per batch",
                1,
                &self.floor_batched,
            ),
            (
                "floor, pod end down, host end off the bridge into the group (knid's detach), \
                 one group RTM_DELLINK per batch",
                c,
                &self.floor8,
            ),
            (
                "floor, pod end left up, host end off the bridge into the group, one group \
                 RTM_DELLINK per batch",
                c,
                &self.floor8_pod_up,
            ),
        ]);
        if let Some(cni) = &self.cni {
            churn.push(("CNI bridge + host-local (exec)", 1, cni));
        }
        churn.push(("knid-cni (exec) → knid", 1, &self.shim));
        if let Some(glibc) = &self.shim_glibc {
            churn.push(("knid-cni, glibc build (exec) → knid", 1, glibc));
        }
        if let Some(libcni) = &self.shim_libcni {
            churn.push(("knid-cni through libcni (Go) → knid", 1, libcni));
        }
        if let Some(floor) = &self.libcni_floor {
            churn.push(("a no-op plugin through libcni (Go)", 1, floor));
        }
        let mut by_thread = String::new();
        for (subject, clients, t) in churn {
            let n = t.attach.len();
            let _ = writeln!(
                md,
                "| {subject} | {clients} | {n} | {:.0} | {:.2} | {:.2} | {:.1} |",
                t.per_sec(),
                t.cpu.busy_ms(n),
                t.cpu.knid_ms(n),
                t.cpu.switches_per(n)
            );
            let threads = t.cpu.by_thread_per(n);
            // The floors' and CNI's batches count knid's threads too, idle beside them.
            if subject.starts_with("knid") && !threads.is_empty() {
                let _ = writeln!(by_thread, "| {subject} | {clients} | {threads} |");
            }
        }
        if !by_thread.is_empty() {
            let _ = writeln!(
                md,
                "\nknid's share of the context switches, per cycle, by thread (voluntary and \
                 involuntary, from `/proc/<pid>/task`; a numbered family of threads counts as one, `sled-io-*`; a \
                 thread that ended within a batch is not counted):\n\n| subject | concurrency | \
                 knid's threads |\n|---|---|---|\n{by_thread}"
            );
        }
    }

    fn ratios(&self, md: &mut String) {
        let knid_a = p50(&self.knid1.attach);
        let knid_d = p50(&self.knid1.detach);
        let floor_a = p50(&self.floor_batched.attach);
        let floor_d = p50(&self.floor1.detach);
        let floor_batch_d = per_sandbox_ms(&self.floor_batched);
        // Churn as time per cycle (1 / cycles/s), so every ratio reads the same way.
        let cycle = |t: &Timed| 1.0 / t.per_sec();
        let cni = self.cni.as_ref();
        let ratio =
            |v: Option<f64>| v.map_or("n/a (plugins absent)".to_owned(), |v| format!("{v:.2}"));
        let _ = writeln!(
            md,
            "\n## Ratios\n\np50; attach against the batched floor of the same shape; churn: time \
             per cycle.\n"
        );
        let _ = writeln!(md, "| op | knid / floor | CNI / knid |");
        let _ = writeln!(md, "|---|---|---|");
        let _ = writeln!(
            md,
            "| attach, dual stack | {:.2} | {} |",
            knid_a / floor_a,
            ratio(cni.map(|c| p50(&c.attach) / knid_a))
        );
        let _ = writeln!(
            md,
            "| attach, IPv4 only | {:.2} | - |",
            p50(&self.knid1_v4.attach) / p50(&self.floor_batched_v4.attach),
        );
        let _ = writeln!(
            md,
            "| detach | {:.3} (per-link floor); {:.2} (batched floor, per sandbox) | {} |",
            knid_d / floor_d,
            knid_d / floor_batch_d,
            ratio(cni.map(|c| p50(&c.detach) / knid_d))
        );
        let _ = writeln!(
            md,
            "| churn | {:.3} (per-link floor); {:.2} (batched floor) | {} |",
            cycle(&self.knid1) / cycle(&self.floor1),
            cycle(&self.knid1) / cycle(&self.floor_batched),
            ratio(cni.map(|c| cycle(c) / cycle(&self.knid1)))
        );
        let _ = writeln!(
            md,
            "| churn at concurrency {} | {:.2} (the floor at the same concurrency, knid's kernel \
             work); {:.2} (leaving the pod end up) | - |",
            self.knobs.clients,
            cycle(&self.knid8) / cycle(&self.floor8),
            cycle(&self.knid8) / cycle(&self.floor8_pod_up),
        );
        let _ = writeln!(
            md,
            "\nknid / floor below 1: knid is faster; CNI / knid above 1: knid is faster by that \
             factor."
        );
        match cni {
            Some(c) => {
                let _ = writeln!(
                    md,
                    "\nknid-cni vs CNI bridge (p50): ADD {:.3} ms vs {:.3} ms ({:.2}×), DEL {:.3} \
                     ms vs {:.3} ms ({:.2}×); knid-cni / CNI bridge, below 1 means knid-cni is \
                     faster.",
                    p50(&self.shim.attach),
                    p50(&c.attach),
                    p50(&self.shim.attach) / p50(&c.attach),
                    p50(&self.shim.detach),
                    p50(&c.detach),
                    p50(&self.shim.detach) / p50(&c.detach),
                );
            }
            None => {
                let _ = writeln!(md, "\nknid-cni vs CNI bridge: n/a (plugins absent).");
            }
        }
    }

    fn reaper_section(&self, md: &mut String) {
        let _ = writeln!(md, "\n## Reaper\n");
        let _ = writeln!(
            md,
            "| sandboxes detached (concurrency {}) | detaches/s | all released after first Detach | after last reply | links reaped | rounds | reaper busy | links/s of reaper time |",
            self.knobs.clients
        );
        let _ = writeln!(md, "|---|---|---|---|---|---|---|---|");
        for d in [&self.reaper, &self.footprint.drain] {
            let _ = writeln!(
                md,
                "| {} | {:.0} | {:.0} ms | {:.0} ms | {} | {} | {:.0} ms | {:.0} |",
                d.count,
                d.count as f64 / d.replied.as_secs_f64(),
                ms(d.released),
                ms(d.released.saturating_sub(d.replied)),
                d.links,
                d.rounds,
                ms(d.busy),
                d.links_per_sec()
            );
        }
        let _ = writeln!(
            md,
            "\nlinks reaped counts the links knid's reaper found and deleted (its debug log: \
             \"reaper: N link(s) gone … in T\"); a link whose netns was removed first is gone \
             with it, without the reaper."
        );
    }

    fn footprint_section(&self, md: &mut String) {
        let fp = &self.footprint;
        let _ = writeln!(md, "\n## Footprint\n");
        let _ = writeln!(
            md,
            "| knid | VmRSS MiB | anonymous | file | VmHWM MiB | threads | state dir MiB (allocated) |"
        );
        let _ = writeln!(md, "|---|---|---|---|---|---|---|");
        for s in [&self.started, &self.idle].into_iter().chain(&fp.snapshots) {
            let _ = writeln!(
                md,
                "| {} | {:.1} | {:.1} | {:.1} | {:.1} | {} | {:.2} ({:.2}) |",
                s.label,
                s.rss_kib as f64 / 1024.0,
                s.anon_kib as f64 / 1024.0,
                s.file_kib as f64 / 1024.0,
                s.hwm_kib as f64 / 1024.0,
                s.threads,
                s.store.0 as f64 / MIB,
                s.store.1 as f64 / MIB
            );
        }
        let _ = writeln!(
            md,
            "\nEach row's threads by name and its VmRSS by mapping; for an idle knid, its \
             threads' context switches per second over {} s (voluntary and involuntary, each a \
             wake-up; a numbered family of threads counts as one, `sled-io-*`):\n",
            IDLE_SPAN.as_secs()
        );
        for s in [&self.started, &self.idle].into_iter().chain(&fp.snapshots) {
            let wakeups = s
                .wakeups
                .as_ref()
                .map_or_else(String::new, |w| format!("; context switches: {w}"));
            let _ = writeln!(
                md,
                "- {}: {}; {}{wakeups}",
                s.label,
                s.thread_names,
                s.parts()
            );
        }
        if let Some(warning) = self.idle.stale_hot_list() {
            let _ = writeln!(md, "\n**Warning**: {warning}.");
        }
        let ready: Vec<String> = fp.ready.iter().map(|d| format!("{:.1}", ms(*d))).collect();
        let _ = writeln!(
            md,
            "\nStart-up with {} sandboxes recorded (and their netns present), SIGTERM then spawn \
             → Status answering ready with every condition true: {} ms.",
            fp.count,
            ready.join(", ")
        );
        let _ = writeln!(
            md,
            "Filling to {} at concurrency {}: {:.0} attaches/s. The sandboxes beyond each 1,000 \
             are on another bridge network: a Linux bridge takes at most 1023 ports \
             (BR_MAX_PORTS).",
            fp.count,
            self.knobs.clients,
            fp.fill.per_sec()
        );
    }

    /// Each phase's failed operations.
    fn failures(&self) -> Vec<(String, &[String])> {
        let c = self.knobs.clients;
        let fp = &self.footprint;
        let mut list: Vec<(String, &[String])> = vec![
            ("knid, concurrency 1".into(), &self.knid1.errors),
            (format!("knid, concurrency {c}"), &self.knid8.errors),
            (
                format!("knid, concurrency {c}, `workers = {NARROW_WORKERS}`"),
                self.knid8_narrow.as_ref().map_or(&[], |t| &t.errors),
            ),
            ("knid, IPv4 only".into(), &self.knid1_v4.errors),
            ("floor".into(), &self.floor1.errors),
            ("floor, batched".into(), &self.floor_batched.errors),
            (
                "floor, batched, IPv4 only".into(),
                &self.floor_batched_v4.errors,
            ),
            (format!("floor, concurrency {c}"), &self.floor8.errors),
            (
                format!("floor, concurrency {c}, pod end left up"),
                &self.floor8_pod_up.errors,
            ),
        ];
        if let Some(cni) = &self.cni {
            list.push(("CNI bridge + host-local".into(), &cni.errors));
        }
        if let Some(glibc) = &self.shim_glibc {
            list.push(("knid-cni, glibc build".into(), &glibc.errors));
        }
        if let Some(libcni) = &self.shim_libcni {
            list.push(("knid-cni through libcni".into(), &libcni.errors));
        }
        if let Some(floor) = &self.libcni_floor {
            list.push(("a no-op plugin through libcni".into(), &floor.errors));
        }
        list.extend([
            ("knid-cni".into(), &self.shim.errors[..]),
            (
                format!("reaper, {} sandboxes", self.reaper.count),
                &self.reaper.errors,
            ),
            (format!("filling to {}", fp.count), &fp.fill.errors),
            (format!("draining {}", fp.count), &fp.drain.errors),
        ]);
        list
    }

    fn errors_section(&self, md: &mut String) {
        let failures = self.failures();
        if failures.iter().all(|(_, e)| e.is_empty()) {
            return;
        }
        let _ = writeln!(
            md,
            "\n## Errors\n\nFailed operations are left out of the samples; a knid Attach that \
             failed was detached again (untimed).\n"
        );
        let _ = writeln!(md, "| phase | failed | first messages |");
        let _ = writeln!(md, "|---|---|---|");
        for (phase, errors) in failures.iter().filter(|(_, e)| !e.is_empty()) {
            let mut shown: Vec<String> = Vec::new();
            for e in errors.iter() {
                let e: String = e.replace(['|', '\n'], " ").chars().take(300).collect();
                if !shown.contains(&e) && shown.len() < 3 {
                    shown.push(e);
                }
            }
            let _ = writeln!(
                md,
                "| {phase} | {} | {} |",
                errors.len(),
                shown
                    .iter()
                    .map(|e| format!("`{e}`"))
                    .collect::<Vec<_>>()
                    .join("<br>")
            );
        }
    }

    fn notes(&self, md: &mut String) {
        let _ = writeln!(md, "\n## Method\n");
        let _ = writeln!(
            md,
            "- knid: Attach and Detach over the thread-free client (`OneshotClient`), one \
             connection per client thread; bridge network, veth, IPv4 /16 + IPv6 /64 (network \
             `default`) or IPv4 /16 only (network `v4`, the IPv4-only rows). A Detach returns \
             once the host end is retired; the reaper deletes links in the background. knid's \
             kernel work per attach: the veth (peer created in the sandbox netns, host end up, on \
             the bridge, in knid's attaching link group; one queue each way per end, as the \
             floor's), IPv6 turned off on the host end (its `disable_ipv6`, one write to \
             /proc/sys: netlink has no such request), the pod side in one \
             batch (addresses, `eth0` and `lo` up, default route(s)), then the host end's \
             ownership mark, group 0 \
             and hairpin mode in one request; per detach: the pod end set down by the index its \
             attach recorded and marked retired in one request (an RCU grace period), the host \
             end taken off its bridge (another) into the reaper's group; the reaper deletes the \
             group."
        );
        let _ = writeln!(
            md,
            "- floor (`testkit/src/floor.rs`): the same kernel work through knid_netops from \
             the bench in the same host netns, on its own bridge and subnets, per shape: veth \
             with the peer created in the sandbox netns as `eth0` (MTU 1500, MAC), host end on \
             the bridge and up; IPv6 turned off on the host end (as knid's, the same write); \
             its alias (as long as knid's mark) and hairpin mode in one request; the \
             IPv4 (and IPv6, nodad) address, `eth0` and `lo` up, the default route(s). Four \
             netlink round trips and the write, as knid's attach; knid's veth carries a link group in \
             its creating message and sets the alias last, with group 0. The attach ratios use \
             the batched floor of each shape, run in turn with knid's concurrency-1 cycles, a \
             batch of 200 of each, every batch followed by a settle. The floor's churn: each \
             thread attaches and retires the sandbox as knid's detach does: the pod end set down \
             by the index its attach found, with a retired alias, from a socket opened in the \
             sandbox netns (one RCU grace period), the host end taken off the bridge into the floor's link group (another); \
             one group RTM_DELLINK per batch. Its churn with the pod end left up is reported \
             beside it: what knid's choice to set it down costs."
        );
        let _ = writeln!(
            md,
            "- Batch by batch: the attach ratios' pairs are each knid batch's p50 over that of \
             the floor's batch run beside it (same shape, 200 each); the churn's figures are \
             each batch's own cycles per second, knid's and the floor's phases being run apart. \
             How far they stray within one run is the noise any one figure carries."
        );
        match &self.plugins {
            Some(dir) => {
                let _ = writeln!(
                    md,
                    "- CNI: `{}/bridge` with `host-local`, cniVersion 1.0.0, `isGateway`, ranges \
                     {} and {}; exec'd as libcni does (environment, config on stdin, DEL with \
                     `prevResult`) from a thread in the host netns. Dual stack makes the bridge \
                     plugin wait for IPv6 duplicate address detection on the pod's address; \
                     benches/cni.rs also measures it with IPv4 only, the baseline's set-up.",
                    dir.display(),
                    CNI_SUBNETS[0],
                    CNI_SUBNETS[1]
                );
            }
            None => {
                let _ = writeln!(
                    md,
                    "- CNI: skipped, no `bridge` and `host-local` plugins in /opt/cni/bin or \
                     /usr/lib/cni (Debian: `apt-get install containernetworking-plugins`)."
                );
            }
        }
        let _ = writeln!(
            md,
            "- knid-cni: the shim exec'd the same way against the same knid (network `default`), {}.",
            self.shim_build
        );
        if self.shim_libcni.is_some() {
            let _ = writeln!(
                md,
                "- knid-cni through libcni: the same build, conflist and knid, called by a Go \
                 client on Debian's libcni (golang-github-appc-cni-dev; benches/libcni/main.go) \
                 with `AddNetworkList` and `DelNetworkList`, as containerd's go-cni and CRI-O \
                 call it: libcni's exec, its configuration and result handling and its result \
                 cache (read back for DEL) are in each time. The knid-cni ADD target is judged \
                 on it. Beside it, through the same client, a plugin that does no work \
                 (benches/libcni/noop.c, static, musl): the floor of a call through libcni."
            );
        }
        let _ = writeln!(
            md,
            "- Peers measured on this machine class (the baseline of \
             docs/comparison.md#where-the-numbers-come-from, p50, IPv4 only): CNI bridge ADD \
             6.4 ms, DEL 20.1 ms; netavark setup 19.6 ms, teardown 24.1 ms; raw-netlink floor \
             attach 0.29 ms, per-link delete 20 ms."
        );
    }

    pub fn chart(&self) -> String {
        use chart::{Panel, Series};
        let sorted = |s: &[Duration]| {
            let mut v = s.to_vec();
            v.sort();
            v
        };
        let c = self.knobs.clients;
        let knid8 = format!("knid, concurrency {c}");
        let (knid1_a, knid8_a, floor_a, shim_a) = (
            sorted(&self.knid1.attach),
            sorted(&self.knid8.attach),
            sorted(&self.floor1.attach),
            sorted(&self.shim.attach),
        );
        let (knid1_d, knid8_d, floor_d, shim_d) = (
            sorted(&self.knid1.detach),
            sorted(&self.knid8.detach),
            sorted(&self.floor1.detach),
            sorted(&self.shim.detach),
        );
        let cni_a = self
            .cni
            .as_ref()
            .map(|t| sorted(&t.attach))
            .unwrap_or_default();
        let cni_d = self
            .cni
            .as_ref()
            .map(|t| sorted(&t.detach))
            .unwrap_or_default();
        let series = |knid1, knid8_s, floor, cni, shim, floor_label| {
            vec![
                Series {
                    label: "knid, concurrency 1",
                    color: "#1f77b4",
                    sorted: knid1,
                },
                Series {
                    label: &knid8,
                    color: "#9ecae1",
                    sorted: knid8_s,
                },
                Series {
                    label: floor_label,
                    color: "#222222",
                    sorted: floor,
                },
                Series {
                    label: "CNI bridge + host-local",
                    color: "#d62728",
                    sorted: cni,
                },
                Series {
                    label: "knid-cni → knid",
                    color: "#ff7f0e",
                    sorted: shim,
                },
            ]
        };
        let panels = [
            Panel {
                title: format!("attach (CNI: ADD), N = {}", self.knobs.n),
                series: series(
                    &knid1_a,
                    &knid8_a,
                    &floor_a,
                    &cni_a,
                    &shim_a,
                    "floor (knid_netops)",
                ),
            },
            Panel {
                title: format!("detach (CNI: DEL), N = {}", self.knobs.n),
                series: series(
                    &knid1_d,
                    &knid8_d,
                    &floor_d,
                    &cni_d,
                    &shim_d,
                    "floor, RTM_DELLINK per sandbox",
                ),
            },
        ];
        chart::cdf_svg("knid latency CDFs (private netns, this machine)", &panels)
    }

    pub fn csv(&self) -> String {
        let mut csv = String::from("op,subject,ns\n");
        for r in self.rows() {
            for d in r.samples {
                let _ = writeln!(
                    csv,
                    "{},{},{}",
                    csv_field(r.op),
                    csv_field(&r.subject),
                    d.as_nanos()
                );
            }
        }
        csv
    }
}

/// A footprint's code (knid's text mapped), in MiB, or "-" when its smaps was unreadable.
fn code_mib(snapshot: &Snapshot) -> String {
    snapshot.memory.map_or_else(
        || "-".to_owned(),
        |m| format!("{:.1} MiB", m.code_kib as f64 / 1024.0),
    )
}

/// A footprint count as a target names it: the targets (docs/performance.md#targets) are for
/// 5,000.
fn of_5000(count: usize) -> String {
    if count == 5000 {
        "5,000".to_owned()
    } else {
        format!("{count} (5,000 in the target)")
    }
}

fn row<'a>(subject: &str, op: &'a str, samples: &'a [Duration], per_sec: bool) -> Row<'a> {
    Row {
        subject: subject.to_owned(),
        op,
        samples,
        per_sec,
    }
}

fn csv_field(text: &str) -> String {
    if text.contains([',', '"']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_owned()
    }
}

// ---- the run's context ----

/// `$CARGO_TARGET_DIR/bench-report`, else `<workspace>/target/bench-report`.
pub fn report_dir() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map_or_else(|| root.join("target"), |t| root.join(t));
    target.join("bench-report")
}

pub fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

fn read_trim(path: &str) -> String {
    std::fs::read_to_string(path).map_or_else(|_| "unknown".to_owned(), |s| s.trim().to_owned())
}

pub fn loadavg() -> String {
    read_trim("/proc/loadavg")
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|l| l.strip_prefix("model name")?.split(':').nth(1))
                .map(|m| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown model".to_owned())
}

/// The workspace's commit, marked when the tree has uncommitted changes.
fn git_commit() -> String {
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(env!("CARGO_MANIFEST_DIR"))
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(commit) => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            if dirty {
                format!("{commit} (with uncommitted changes)")
            } else {
                commit
            }
        }
        None => "unknown (no git)".to_owned(),
    }
}

/// How to run this again: the bench's knobs that were set, then the cargo command.
fn command_line() -> String {
    let mut line: Vec<String> = [
        "KNID_BENCH_N",
        "KNID_BENCH_CLIENTS",
        "KNID_BENCH_REAP",
        "KNID_BENCH_FOOTPRINT",
    ]
    .iter()
    .filter_map(|k| std::env::var(k).ok().map(|v| format!("{k}={v}")))
    .collect();
    line.push("cargo bench --bench perf".to_owned());
    line.join(" ")
}

/// Now as `YYYY-MM-DD HH:MM:SS UTC`.
fn utc_now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%d %H:%M:%S UTC")
        .to_string()
}

/// Writes the section on where `op`'s time goes (`op` as `(heading, log name)`): the table of
/// its `phases` (the total last), then the client's p50 from `client` and what the rest is
/// (`rest`, which goes on the sentence that names the RPC).
fn phases_of(
    md: &mut String,
    op: (&str, &str),
    phases: &[(String, Vec<Duration>)],
    client: &[Duration],
    rest: &str,
) {
    let _ = writeln!(
        md,
        "\n## Where {}'s time goes (concurrency 1, knid's debug log)\n",
        op.0
    );
    let Some((_, totals)) = phases.last().filter(|(_, t)| !t.is_empty()) else {
        let _ = writeln!(md, "knid logged no {} phases.", op.1);
        return;
    };
    let total_mean = mean(totals);
    let _ = writeln!(md, "| phase | p50 ms | mean ms | share of the mean |");
    let _ = writeln!(md, "|---|---|---|---|");
    for (name, samples) in phases {
        let _ = writeln!(
            md,
            "| {name} | {:.3} | {:.3} | {:.0}% |",
            p50(samples),
            ms(mean(samples)),
            100.0 * mean(samples).as_secs_f64() / total_mean.as_secs_f64().max(1e-12)
        );
    }
    let client = p50(client);
    let _ = writeln!(
        md,
        "\nThe client saw a p50 of {client:.3} ms: the rest, {:.3} ms at the p50, is the RPC{rest}",
        (client - p50(totals)).max(0.0)
    );
}
