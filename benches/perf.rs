//! knid's performance report: one run, in knid's private network namespace, measuring knid
//! against the kernel floor and the CNI peers side by side, and checking each target of
//! docs/performance.md#targets. Prints everything and writes `<target>/bench-report/report.md`,
//! `latency.svg` (CDFs of attach and detach) and `samples.csv` (op,subject,ns: every sample),
//! `<target>` being `$CARGO_TARGET_DIR`, else the workspace's `target/`.
//!
//! Phases, each after 5 unmeasured warm-up cycles, on sandbox netns created in process
//! (`knid_netops::netns::create_bound`) before each batch of 200 and removed after it, neither
//! of them timed. knid runs at its default log level (`info`, as deployed) in every phase
//! held against a target, and at `debug` where steps are read from its log: the step-table
//! phase first (`KNID_BENCH_N` dual-stack cycles at concurrency 1, their steps timed by knid's
//! debug lines) and the reaper's (phase 5). Before phase 1, what a request costs before knid
//! does any work, at the pace of its attaches (0.5 ms apart): round trips between two threads
//! of the bench over a unix socket pair (the machine's two wake-ups), then calls knid's server
//! answers without a handler (an unknown method).
//! 1. knid attach+detach, `KNID_BENCH_N` (default 1000) cycles at concurrency 1 over the
//!    thread-free client (Attach and Detach timed; bridge network), for each shape: dual stack
//!    /16 + /64 (network `default`), then IPv4 only /16 (network `v4`); side by side with the
//!    floor's batched attaches of the same shape (phase 3), a batch of each in turn, every
//!    batch followed by a settle (knid's reaper done, the kernel's netns cleanup given time);
//! 2. the same (dual stack) at concurrency `KNID_BENCH_CLIENTS` (default 8): one client and
//!    distinct sandboxes per thread; cycles/s is the phase's wall time (netns creation
//!    excluded); then again with `workers = 2` instead of knid's default (one shard per CPU,
//!    at least 16), unless `KNID_BENCH_CONFIG` sets `workers`;
//! 3. the floor (testkit/src/floor.rs): the same kernel work through knid_netops directly (a
//!    source guard per sandbox when knid's networks install them, as by default: phase 1's
//!    check finds out), dual stack detached by one RTM_DELLINK per sandbox; each shape detached by one RTM_DELLINK of
//!    a link group per batch (run in turn with phase 1); then its churn at the clients'
//!    concurrency (attach, then knid's detach work: the pod end set down, the host end moved
//!    into the link group; one group RTM_DELLINK per batch), and the same with the pod end left
//!    up;
//! 4. CNI by exec as libcni does: the reference `bridge` + `host-local` plugins (same subnet
//!    sizes, cniVersion 1.0.0) when installed, and knid-cni against the same knid: the musl
//!    build the image ships, which the bench has cargo build, beside cargo's glibc one; then
//!    the musl build through Debian's libcni itself (testkit/src/libcni.rs), what runtimes
//!    call plugins with, when Go and libcni are installed;
//! 5. the reaper: `KNID_BENCH_REAP` (default 500) attached sandboxes detached by the clients,
//!    the time until every address is released, and the reaper's own rounds from knid's debug
//!    log (links per second of reaper time);
//! 6. footprint: knid's VmRSS, VmHWM and threads idle, with 1,000 and `KNID_BENCH_FOOTPRINT`
//!    (default 5000) sandboxes attached (one netns each, attached by the clients; snapshots
//!    after a reconciler round over them, once the fill's threads ended, and again after the
//!    next round with no call to knid between, the one judged: what the node keeps, with its
//!    peak through that round), the
//!    store's size, the time from spawn to a Status answering ready with them all recorded (3
//!    restarts), then all detached (a second reaper measurement) and their netns removed.
//!
//! A Linux bridge takes at most 1023 ports (BR_MAX_PORTS), so sandboxes beyond 1,000 go to
//! further bridge networks of 1,000 each. Without root it prints a skip line and exits 0.
//! `KNID_BENCH_QUICK=1` runs phases 1–3 only, prints their summary and writes no report: for
//! iterating. `KNID_BENCH_ONLY=footprint` runs phase 6 only, printing its lines and no report.
//! `KNID_BENCH_ONLY=churn` runs, `KNID_BENCH_ROUNDS` times (default 3), knid's churn at the
//! clients' concurrency then the floor's (knid's detach work), each round printing both, their
//! ratio and how many of knid's operations were in each step on average: for comparing builds
//! or settings against the noise of one run; with `KNID_BENCH_CHURN_BINS` (colon-separated
//! paths) each round runs knid's churn once per binary, in turn, on the same node: two builds
//! side by side; with `KNID_BENCH_CHURN_WORKERS` (colon-separated counts) once per shard count
//! too. Each round starts one later in that list than the round before (A B, then B A): the
//! first knid to run after the floor's phase was behind in most pairs whichever it was
//! (docs/performance-history.md, round three's fourteenth session), so only rounds in every order
//! compare builds. The rounds run knid at `debug` (for the step occupancy), or at its default
//! level with `KNID_BENCH_CHURN_LEVEL=info`: debug logging costs the churn and hides the
//! effect of more shards (round two's twelfth part). `KNID_BENCH_ONLY=shim` runs,
//! `KNID_BENCH_ROUNDS` times, knid-cni's ADD/DEL cycles (phase 4's last part) and prints each
//! round's p50s and knid's attach steps. `KNID_BENCH_ONLY=attach` runs, `KNID_BENCH_ROUNDS`
//! times, phase 1 alone (both shapes, the floor's batches beside knid's) and prints each
//! shape's attach p50, the floor's and their ratio; with `KNID_BENCH_ATTACH_BINS`
//! (colon-separated paths) once per binary, in turn, each round one later in that list.
//! Every timed batch is [`costed`]: the machine's CPU, knid's and the context switches it took.
//! `KNID_BENCH_RESTARTS` (default 3) is the number of timed restarts, and
//! `KNID_BENCH_RESTART_BINS` (colon-separated paths, default this build's knid) the knid
//! binaries they take turns with: an old and a new build timed against the same store.
//! `KNID_BENCH_HOLD=<file>` pauses the footprint phase once filled, while that file exists.
//! `KNID_BENCH_CONFIG` is TOML put at the top of knid's config, to try a setting (e.g.
//! `store_cache_bytes = 1048576`).
//! Numbers are reported, never asserted; what is asserted is correctness (what knid and the
//! floor set up is what they promised; nothing is left attached). The report itself is
//! benches/perf/report.rs.

// `mod x;` in a crate root looks for benches/x.rs, which cargo would build as a bench of its own;
// inside `mod perf`, it looks in benches/perf/.
mod perf {
    pub mod cpu;
    pub mod report;
}

use std::fmt::Write as _;
use std::io::{Read as _, Write as _};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use knid_netops::NetnsHandle;
use knid_transport::client::oneshot::{OneshotClient, RUNTIME_SERVICE};
use knid_transport::pb;
use perf::cpu::{Cpu, Sample};
use perf::report::{
    loadavg, p50, pairs_text, rates_text, report_dir, write, Results, RoundTrips, ROUND_TRIP_PAUSE,
};
use testkit::floor::Shape;
use testkit::measure::{env_count, ms, proc_status, report};
use testkit::threads;
use testkit::timed_start::{all_true, timed_start};
use testkit::wait::wait_until;
use testkit::{cni_exec, floor, TestNode, RPC};

/// knid's arguments for the footprint: the default log level, as deployed.
const DEPLOYED: &[&str] = &["--log-level", "info"];
/// Cycles run before each measured phase, so first-use costs are excluded.
const WARM_UP: usize = 5;
/// Sandbox netns alive at once in the latency phases: created before a batch, removed after.
const BATCH: usize = 200;
/// Sandboxes per bridge network: a Linux bridge takes at most 1023 ports (BR_MAX_PORTS).
const PER_BRIDGE: usize = 1000;
/// Timed restarts with the footprint's sandboxes recorded, unless `KNID_BENCH_RESTARTS` says.
const RESTARTS: usize = 3;
/// How long knid's reaper may take to release every address after a phase.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(300);
/// The kernel tears removed netns down in a workqueue after the umount returns (~6.5 ms each
/// here, benches/kinds.rs); after a phase the bench waits this long per netns of its last batch.
const NETNS_TEARDOWN_PER_NETNS: Duration = Duration::from_millis(10);
const NETNS_TEARDOWN_MIN: Duration = Duration::from_millis(500);
/// The CNI peer's bridge and subnets: the same sizes as knid's.
const CNI_BRIDGE: &str = "cni0";
const CNI_SUBNETS: [&str; 2] = ["10.89.0.0/16", "fd00:89::/64"];
const MIB: f64 = 1024.0 * 1024.0;
/// Label of the footprint taken as soon as a restarted knid is ready.
const RESTARTED: &str = "just ready after a restart";

fn main() {
    if !testkit::privileged() {
        return;
    }
    let knobs = Knobs::from_env();
    let load_before = loadavg();
    println!(
        "knid perf: N = {}, {} clients, reaper {}, footprint {} (warm-up {WARM_UP} cycles per \
         phase; netns creation never timed)",
        knobs.n, knobs.clients, knobs.reap, knobs.footprint
    );
    // The footprint is a deployment's: knid at its default log level. The timed phases read
    // knid's debug log (where an attach's time goes).
    let mut node = TestNode::start_with(&knobs.config(), &[], DEPLOYED);
    let host = node.host();
    if knobs.only.as_deref() == Some("churn") {
        churn_rounds(&mut node, &host, &knobs);
        return;
    }
    if knobs.only.as_deref() == Some("attach") {
        attach_rounds(&mut node, &host, &knobs);
        return;
    }
    let quick = std::env::var("KNID_BENCH_QUICK").is_ok_and(|v| v == "1");
    // What execs knid-cni, made before anything is timed, and only for the phases that use it.
    let shim_ways =
        (!quick && matches!(knobs.only.as_deref(), None | Some("shim"))).then(ShimWays::find);
    if knobs.only.as_deref() == Some("shim") {
        let shim_ways = shim_ways.as_ref().expect("made for the shim rounds");
        relaunch(&mut node, &[]);
        for round in 1..=knobs.rounds {
            println!("round {round}");
            // Each way first in turn.
            let mut ways = shim_ways.all();
            let first = (round - 1) % ways.len();
            ways.rotate_left(first);
            for way in ways {
                let offset = node.log_text().len();
                way.run(&node, &host, knobs.n);
                print_steps("attach", &op_phases(&node.log_text()[offset..], "attach"));
            }
        }
        return;
    }
    let started = Snapshot::take(&node, "started, nothing attached");
    println!("{}", started.line());
    let idle = settled(&node, "nothing attached");
    println!("{}", idle.line());
    if let Some(warning) = idle.stale_hot_list() {
        println!("warning: {warning}");
    }
    if knobs.only.as_deref() == Some("footprint") {
        footprint_phase(&mut node, &knobs);
        assert!(node.list_ids().is_empty(), "sandboxes left after the bench");
        node.assert_host_clean();
        return;
    }
    relaunch(&mut node, &[]);

    // The floor does knid's kernel work, its source guards included when knid installs them.
    let guards = verify_knid(&node, Shape::DualStack);
    assert_eq!(
        verify_knid(&node, Shape::Ipv4),
        guards,
        "both networks guard, or neither"
    );
    let mut floor = floor::Floor::create(&host, guards);
    for shape in [Shape::DualStack, Shape::Ipv4] {
        verify_floor(&node, &mut floor, shape);
    }
    // Where knid's time goes: concurrency-1 cycles at debug, whose lines time each step.
    println!("knid at debug, for the step tables:");
    let log_offset = node.log_text().len();
    let steps = knid_phase(&node, 1, knobs.n, Shape::DualStack);
    let log = node.log_text();
    let attach_phases = op_phases(&log[log_offset..], "attach");
    let detach_phases = op_phases(&log[log_offset..], "detach");
    // Everything timed against a target, as deployed: knid at its default log level (debug
    // logging cost the attach p50 4–12% and the churn ~6%: round two's eleventh part, A/B in
    // turn).
    relaunch(&mut node, DEPLOYED);
    let round_trips = round_trips(&node, knobs.n);
    let (knid1, batched) = side_by_side(&node, &mut floor, knobs.n, Shape::DualStack);
    let (knid1_v4, batched_v4) = side_by_side(&node, &mut floor, knobs.n, Shape::Ipv4);
    let knid8 = knid_phase(&node, knobs.clients, knobs.n, Shape::DualStack);
    let knid8_narrow = narrow_phase(&mut node, &knobs);
    let floors = Floors {
        per_link: floor_phase(&node, &mut floor, knobs.n),
        batched,
        batched_v4,
        churn: floor_churn_phase(&node, &floor, &host, knobs.clients, knobs.n, true),
        churn_pod_up: floor_churn_phase(&node, &floor, &host, knobs.clients, knobs.n, false),
    };
    drop(floor);
    println!(
        "source guards: {}",
        if guards {
            "on knid's links and on the floor's"
        } else {
            "none (knid's networks have `antispoof = false`)"
        }
    );
    if quick {
        println!("{}", round_trips.line());
        quick_summary(
            &knid1,
            &knid1_v4,
            &knid8,
            knid8_narrow.as_ref(),
            &floors,
            knobs.clients,
        );
        print_steps("attach", &attach_phases);
        print_steps("detach", &detach_phases);
        return;
    }
    let plugins = cni_exec::reference_plugins();
    let cni = plugins
        .as_deref()
        .map(|dir| cni_phase(&node, &host, dir, knobs.n));
    if plugins.is_none() {
        println!("CNI bridge: skipped, no bridge + host-local in /opt/cni/bin or /usr/lib/cni");
    }
    let shim_ways = shim_ways.expect("made for the full run");
    let run = |way: Shim<'_>| way.run(&node, &host, knobs.n);
    let shim = run(shim_ways.shipped());
    let shim_glibc = shim_ways.glibc().map(run);
    let shim_libcni = shim_ways.libcni().map(run);
    let libcni_floor = shim_ways.noop().map(run);
    // The reaper's rounds are read from knid's debug log.
    relaunch(&mut node, &[]);
    let reaper = reaper_phase(&node, knobs.reap, knobs.clients);
    relaunch(&mut node, DEPLOYED);
    let footprint = footprint_phase(&mut node, &knobs);

    assert!(node.list_ids().is_empty(), "sandboxes left after the bench");
    node.assert_host_clean();
    let results = Results {
        group_op: format!(
            "detach: one group RTM_DELLINK per batch of {}",
            BATCH.min(knobs.n)
        ),
        knobs,
        load: (load_before, loadavg()),
        knid1,
        knid1_v4,
        steps,
        attach_phases,
        detach_phases,
        round_trips,
        knid8,
        knid8_narrow,
        floor1: floors.per_link,
        floor_batched: floors.batched,
        floor_batched_v4: floors.batched_v4,
        floor8: floors.churn,
        floor8_pod_up: floors.churn_pod_up,
        floor_guards: guards,
        cni,
        plugins,
        shim,
        shim_glibc,
        shim_libcni,
        libcni_floor,
        shim_build: shim_ways.builds.build.clone(),
        reaper,
        started,
        idle,
        footprint,
    };
    let dir = report_dir();
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    let markdown = results.markdown();
    write(&dir.join("report.md"), &markdown);
    write(&dir.join("latency.svg"), &results.chart());
    write(&dir.join("samples.csv"), &results.csv());
    println!("\n{markdown}");
    println!(
        "report: {}\nchart:  {}\nsamples: {}",
        dir.join("report.md").display(),
        dir.join("latency.svg").display(),
        dir.join("samples.csv").display()
    );
}

/// The bench's settings.
struct Knobs {
    n: usize,
    clients: usize,
    reap: usize,
    footprint: usize,
    /// `KNID_BENCH_ONLY`: the one phase to run (`footprint`, `churn`, `shim` or `attach`).
    only: Option<String>,
    restarts: usize,
    /// Rounds of `KNID_BENCH_ONLY=churn`, `shim` or `attach`.
    rounds: usize,
    /// The knid binaries the timed restarts take turns with.
    restart_bins: Vec<PathBuf>,
    /// The knid binaries each churn round runs in turn (none: this build's).
    churn_bins: Vec<PathBuf>,
    /// The knid binaries each attach round runs in turn (none: this build's).
    attach_bins: Vec<PathBuf>,
    /// The shard counts (`workers`) each churn round runs each binary with, in turn (none:
    /// the configured one).
    churn_workers: Vec<usize>,
    /// Churn rounds at knid's default log level (`KNID_BENCH_CHURN_LEVEL=info`) instead of
    /// `debug`, which gives the step occupancy but costs the churn.
    churn_deployed: bool,
}

impl Knobs {
    fn from_env() -> Knobs {
        let knobs = Knobs {
            n: env_count("KNID_BENCH_N", 1000),
            clients: env_count("KNID_BENCH_CLIENTS", 8),
            reap: env_count("KNID_BENCH_REAP", 500),
            footprint: env_count("KNID_BENCH_FOOTPRINT", 5000),
            only: std::env::var("KNID_BENCH_ONLY")
                .ok()
                .filter(|v| !v.is_empty()),
            restarts: env_count("KNID_BENCH_RESTARTS", RESTARTS),
            rounds: env_count("KNID_BENCH_ROUNDS", 3),
            restart_bins: Some(paths("KNID_BENCH_RESTART_BINS"))
                .filter(|bins| !bins.is_empty())
                .unwrap_or_else(|| vec![PathBuf::from(env!("CARGO_BIN_EXE_knid"))]),
            churn_bins: paths("KNID_BENCH_CHURN_BINS"),
            attach_bins: paths("KNID_BENCH_ATTACH_BINS"),
            churn_workers: std::env::var("KNID_BENCH_CHURN_WORKERS")
                .ok()
                .filter(|v| !v.is_empty())
                .map_or_else(Vec::new, |v| {
                    v.split(':')
                        .map(|w| {
                            w.parse().unwrap_or_else(|e| {
                                panic!("KNID_BENCH_CHURN_WORKERS: {w:?} is not a count: {e}")
                            })
                        })
                        .collect()
                }),
            churn_deployed: match std::env::var("KNID_BENCH_CHURN_LEVEL").as_deref() {
                Err(_) | Ok("" | "debug") => false,
                Ok("info") => true,
                Ok(other) => panic!("KNID_BENCH_CHURN_LEVEL={other}: `debug` or `info`"),
            },
        };
        if !knobs.churn_workers.is_empty() && workers_configured() {
            panic!("KNID_BENCH_CHURN_WORKERS and a `workers` in KNID_BENCH_CONFIG: choose one");
        }
        if let Some(only) = knobs
            .only
            .as_deref()
            .filter(|o| !["footprint", "churn", "shim", "attach"].contains(o))
        {
            panic!(
                "KNID_BENCH_ONLY={only}: only `footprint`, `churn`, `shim` or `attach` can run alone"
            );
        }
        knobs
    }

    /// knid's configuration for the bench: [`networks_config`] for the most sandboxes attached
    /// at once (the reaper's or the footprint's).
    fn config(&self) -> String {
        networks_config(self.reap.max(self.footprint))
    }
}

/// The colon-separated paths of the variable `name` (none when unset or empty).
fn paths(name: &str) -> Vec<PathBuf> {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .map_or_else(Vec::new, |v| v.split(':').map(PathBuf::from).collect())
}

/// The knid binaries a round runs in turn: `bins`, or this build's alone (`None`) when there
/// are none.
fn binaries(bins: &[PathBuf]) -> Vec<Option<&Path>> {
    if bins.is_empty() {
        vec![None]
    } else {
        bins.iter().map(|b| Some(b.as_path())).collect()
    }
}

/// `items` in the order round `round` (from 1) runs them: each round one later in the list, so
/// every item runs first as often as the others.
fn in_turn<T>(items: &[T], round: usize) -> impl Iterator<Item = &T> {
    let first = (round - 1) % items.len();
    items[first..].iter().chain(&items[..first])
}

/// How a round's lines name a binary of [`binaries`].
fn bin_label(bin: Option<&Path>) -> String {
    bin.map_or_else(|| "this build".to_owned(), |b| b.display().to_string())
}

/// The floor's phases.
struct Floors {
    /// Dual stack, detached per sandbox.
    per_link: Timed,
    /// Each shape, detached by link group per batch.
    batched: Timed,
    batched_v4: Timed,
    /// Dual stack at the clients' concurrency, retired as knid's detach retires (pod end set
    /// down), and with the pod end left up.
    churn: Timed,
    churn_pod_up: Timed,
}

/// What `KNID_BENCH_QUICK=1` prints instead of the report.
fn quick_summary(
    knid1: &Timed,
    knid1_v4: &Timed,
    knid8: &Timed,
    knid8_narrow: Option<&Timed>,
    floors: &Floors,
    c: usize,
) {
    println!("\n== quick summary (p50) ==");
    for (shape, knid, floor) in [
        ("dual stack", knid1, &floors.batched),
        ("IPv4 only", knid1_v4, &floors.batched_v4),
    ] {
        println!(
            "attach {shape}: knid {:.3} ms, floor {:.3} ms, ratio {:.2}{}",
            p50(&knid.attach),
            p50(&floor.attach),
            p50(&knid.attach) / p50(&floor.attach),
            pairs_text(knid, floor)
        );
    }
    println!(
        "detach: knid {:.3} ms (IPv4 only {:.3} ms)",
        p50(&knid1.detach),
        p50(&knid1_v4.detach)
    );
    println!(
        "churn at concurrency {c}: knid {:.0}/s, floor {:.0}/s (pod end left up: {:.0}/s), ratio \
         {:.2}; batch by batch knid {}, the floor {}; at concurrency 1: knid {:.0}/s",
        knid8.per_sec(),
        floors.churn.per_sec(),
        floors.churn_pod_up.per_sec(),
        knid8.per_sec() / floors.churn.per_sec(),
        rates_text(knid8),
        rates_text(&floors.churn),
        knid1.per_sec()
    );
    if let Some(narrow) = knid8_narrow {
        println!(
            "churn at concurrency {c} with workers = {NARROW_WORKERS}: knid {:.0}/s, ratio {:.2}",
            narrow.per_sec(),
            narrow.per_sec() / floors.churn.per_sec()
        );
    }
}

/// The network of a shape's sandboxes in the phases that compare shapes.
fn shape_network(shape: Shape) -> &'static str {
    match shape {
        Shape::DualStack => "default",
        Shape::Ipv4 => "v4",
    }
}

/// knid's networks: `default` (bridge knid0, like the test network but /16), `v4` (bridge
/// v4br0, the same with IPv4 only) and as many more bridge networks as `most` sandboxes
/// attached at once need.
fn networks_config(most: usize) -> String {
    // Top-level keys go before the first table.
    let mut config = std::env::var("KNID_BENCH_CONFIG").unwrap_or_default();
    // Keys every network gets, e.g. `antispoof = false` (the floor then installs no guard).
    let each = std::env::var("KNID_BENCH_NETWORK").unwrap_or_default();
    config.push('\n');
    let _ = write!(
        config,
        "[networks.default]\nbridge = \"knid0\"\nsubnets = [\"10.88.0.0/16\", \"fd00:88::/64\"]\n{each}\n\
         \n[networks.v4]\nbridge = \"v4br0\"\nsubnets = [\"10.87.0.0/16\"]\n{each}\n",
    );
    for k in 1..most.div_ceil(PER_BRIDGE) {
        let _ = write!(
            config,
            "\n[networks.{}]\nbridge = \"fpbr{k}\"\nsubnets = [\"10.{}.0.0/16\", \"fd00:{}::/64\"]\n{each}\n",
            network_name(k),
            100 + k,
            100 + k
        );
    }
    config
}

/// The `k`th bridge network.
fn network_name(k: usize) -> String {
    if k == 0 {
        "default".to_owned()
    } else {
        format!("fp{k}")
    }
}

// ---- sandboxes and their netns ----

/// One sandbox of a phase.
struct Sandbox {
    id: String,
    /// Its number in the phase (the floor's addresses and names derive from it).
    n: u32,
    network: String,
    netns: PathBuf,
}

/// Sandboxes `<slug>-<i>` for `range`, each in a new netns under the node's netns dir (so
/// TestNode's drop removes what a failed run leaves), on bridge network `i / PER_BRIDGE`.
fn sandboxes(node: &TestNode, slug: &str, range: std::ops::Range<usize>) -> Vec<Sandbox> {
    range
        .map(|i| {
            let id = format!("{slug}-{i}");
            let netns = node.missing_netns_path(&id);
            knid_netops::netns::create_bound(&netns)
                .unwrap_or_else(|e| panic!("create netns {}: {e}", netns.display()));
            Sandbox {
                n: u32::try_from(i).expect("sandbox number fits u32"),
                network: network_name(i / PER_BRIDGE),
                netns,
                id,
            }
        })
        .collect()
}

fn remove(sandboxes: Vec<Sandbox>) {
    for s in sandboxes {
        knid_netops::netns::remove_bound(&s.netns)
            .unwrap_or_else(|e| panic!("remove netns {}: {e}", s.netns.display()));
    }
}

/// After a phase: knid's reaper done (no address in use, no knid link left) and the kernel
/// given time to tear the last `removed` netns down, so neither slows the next phase.
fn settle(node: &TestNode, removed: usize) {
    let mut client = oneshot(node);
    let drained = wait_until(DRAIN_TIMEOUT, Duration::from_millis(10), || {
        addresses_in_use(&mut client) == 0 && node.host_kn_links().is_empty()
    });
    if !drained {
        println!("warning: knid's reaper had not released every address after {DRAIN_TIMEOUT:?}");
    }
    let removed = u32::try_from(removed).unwrap_or(u32::MAX);
    std::thread::sleep(NETNS_TEARDOWN_PER_NETNS * removed + NETNS_TEARDOWN_MIN);
}

// ---- knid over its socket ----

/// What a request costs before knid does any work, at the pace of concurrency-1 attaches (each
/// [`ROUND_TRIP_PAUSE`] after the last, the threads on both sides asleep in between): `n` round
/// trips between two threads of the bench over a unix socket pair, a byte each way (the
/// machine's own two wake-ups), then `n` calls of a method knid does not have, which its server
/// answers Unimplemented before any handler runs (its reading, framing and decoding, the I/O
/// role parked or handed over, and the reply on top).
fn round_trips(node: &TestNode, n: usize) -> RoundTrips {
    let (mut ours, mut theirs) = UnixStream::pair().expect("a unix socket pair");
    let echo = std::thread::spawn(move || {
        let mut byte = [0u8; 1];
        while theirs.read_exact(&mut byte).is_ok() && theirs.write_all(&byte).is_ok() {}
    });
    let mut pair = Vec::with_capacity(n);
    let mut byte = [1u8; 1];
    for _ in 0..n {
        std::thread::sleep(ROUND_TRIP_PAUSE);
        let started = Instant::now();
        ours.write_all(&byte).expect("write to the echo thread");
        ours.read_exact(&mut byte).expect("read the echo");
        pair.push(started.elapsed());
    }
    // The echo thread ends at end of file.
    drop(ours);
    echo.join().expect("the echo thread");
    let mut client = oneshot(node);
    let server = (0..n)
        .map(|_| {
            std::thread::sleep(ROUND_TRIP_PAUSE);
            let started = Instant::now();
            let refused = client
                .call::<_, pb::StatusResponse>(
                    RUNTIME_SERVICE,
                    "NoSuchMethod",
                    &pb::StatusRequest::new(),
                    RPC,
                )
                .expect_err("knid has no such method");
            let took = started.elapsed();
            assert_eq!(
                refused.code(),
                Some(ttrpc::Code::UNIMPLEMENTED),
                "an unknown method: {refused}"
            );
            took
        })
        .collect();
    RoundTrips { pair, server }
}

fn oneshot(node: &TestNode) -> OneshotClient {
    OneshotClient::connect(node.socket(), RPC).expect("connect to knid")
}

/// Addresses reserved over every network.
fn addresses_in_use(client: &mut OneshotClient) -> u64 {
    let networks: pb::NetworksResponse = client
        .call(
            RUNTIME_SERVICE,
            "Networks",
            &pb::NetworksRequest::new(),
            RPC,
        )
        .expect("Networks");
    networks
        .networks
        .iter()
        .flat_map(|n| &n.capacity)
        .map(|c| c.used)
        .sum()
}

fn attach_req(s: &Sandbox) -> pb::AttachRequest {
    let mut req = testkit::attach_req(&s.id, &s.netns, "eth0");
    req.interfaces[0].network.clone_from(&s.network);
    req
}

/// Attach (timed): the sandbox knid returned, or its error.
fn attach(client: &mut OneshotClient, s: &Sandbox) -> Result<(Duration, pb::Sandbox), String> {
    let req = attach_req(s);
    let started = Instant::now();
    let sandbox = client
        .attach(&req, RPC)
        .map_err(|e| format!("Attach {}: {e}", s.id))?;
    Ok((started.elapsed(), sandbox))
}

/// Detach (timed), or its error.
fn detach(client: &mut OneshotClient, s: &Sandbox) -> Result<Duration, String> {
    let req = testkit::detach_req(&s.id);
    let started = Instant::now();
    client
        .detach(&req, RPC)
        .map_err(|e| format!("Detach {}: {e}", s.id))?;
    Ok(started.elapsed())
}

/// One attach+detach cycle. After a failed Attach (knid rolls it back) the sandbox is detached
/// all the same, untimed: Detach of what is not attached is success.
fn knid_cycle(client: &mut OneshotClient, s: &Sandbox) -> Result<(Duration, Duration), String> {
    match attach(client, s) {
        Ok((attached, _)) => detach(client, s).map(|detached| (attached, detached)),
        Err(e) => {
            let _ = detach(client, s);
            Err(e)
        }
    }
}

/// Runs `op` on every item from `clients` threads, each with its own connection and every
/// `clients`th item. Returns the results, the moment every thread was connected and ready to
/// go, and the time from then until the last one finished.
fn concurrently<T: Send>(
    node: &TestNode,
    items: &[Sandbox],
    clients: usize,
    op: impl Fn(&mut OneshotClient, &Sandbox) -> T + Sync,
) -> (Vec<T>, Instant, Duration) {
    let barrier = Barrier::new(clients + 1);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..clients)
            .map(|w| {
                let (barrier, op) = (&barrier, &op);
                scope.spawn(move || {
                    let mut client = oneshot(node);
                    barrier.wait();
                    items
                        .iter()
                        .skip(w)
                        .step_by(clients)
                        .map(|s| op(&mut client, s))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        barrier.wait();
        let started = Instant::now();
        let results = workers
            .into_iter()
            .flat_map(|w| w.join().expect("client thread"))
            .collect();
        (results, started, started.elapsed())
    })
}

/// One attach of `shape`, checked in the kernel (pod side and host side) before its detach:
/// what the phases time is what knid promises. Returns whether knid put a source guard on its
/// host end (its networks' `antispoof`, on by default), which its detach must have removed.
fn verify_knid(node: &TestNode, shape: Shape) -> bool {
    let mut s = sandboxes(node, "verify", 0..1).remove(0);
    shape_network(shape).clone_into(&mut s.network);
    let mut client = oneshot(node);
    let (_, sandbox) = attach(&mut client, &s).unwrap_or_else(|e| panic!("{e}"));
    let iface = sandbox.interfaces.first().expect("one interface");
    let families = match shape {
        Shape::Ipv4 => 1,
        Shape::DualStack => 2,
    };
    assert_eq!(iface.ips.len(), families, "{shape:?}: {iface:?}");
    match shape {
        Shape::DualStack => {
            testkit::assert_pod_side(&s.netns, iface);
            node.assert_host_side(iface);
        }
        Shape::Ipv4 => {
            assert_pod_side_v4(&s.netns, iface);
            let host = node
                .host_rtnl()
                .link_by_name(&iface.host_ifname)
                .expect("look up the host end")
                .expect("the host end");
            let bridge = node.bridge("v4br0");
            assert!(host.up, "{host:?}");
            assert_eq!(host.controller, Some(bridge.index), "a port of v4br0");
        }
    }
    let knid_guards = || {
        node.guards()
            .iter()
            .any(|(_, device)| *device == iface.host_ifname)
    };
    let guarded = knid_guards();
    detach(&mut client, &s).unwrap_or_else(|e| panic!("{e}"));
    // The reaper removes it with the link.
    testkit::wait_for(
        "knid's reaper to remove the guard",
        threads::SETTLE_LIMIT,
        || !knid_guards(),
    );
    remove(vec![s]);
    guarded
}

/// testkit::assert_pod_side for an IPv4-only interface: the link with its MAC and MTU, up, `lo`
/// up, exactly its one global address, its IPv4 default route out of it, no IPv6 one.
fn assert_pod_side_v4(netns: &Path, iface: &pb::InterfaceResult) {
    let link = testkit::link_in(netns, &iface.name).expect("the pod's interface");
    assert_eq!(link.mac, Some(testkit::assert::parse_mac(&iface.mac)));
    assert!(link.up && link.mtu == iface.mtu, "{link:?}");
    assert!(
        testkit::link_in(netns, "lo").is_some_and(|lo| lo.up),
        "lo up"
    );
    let (v4, gw4) = testkit::assert::ip_of(iface, "ipv4");
    let global: Vec<_> = testkit::addresses_in(netns, &iface.name)
        .into_iter()
        .filter(|a| !testkit::is_link_local(a.addr()))
        .collect();
    assert_eq!(global, [v4], "addresses of {}", iface.name);
    let route = testkit::default_route_in(netns, false).expect("an IPv4 default route");
    assert_eq!((route.gateway, route.oif), (Some(gw4), Some(link.index)));
    assert!(
        testkit::default_route_in(netns, true).is_none(),
        "no IPv6 default route"
    );
}

// ---- the phases ----

/// What a batch timed.
#[derive(Default)]
struct Timed {
    attach: Vec<Duration>,
    detach: Vec<Duration>,
    /// The batch's timed part, end to end.
    wall: Duration,
    /// Failed operations: not in the samples, reported.
    errors: Vec<String>,
    /// What the timed batches cost the machine (warm-up left out).
    cpu: Cpu,
    /// Each timed batch's own attach p50 (ms) and cycles per second, in run order: how far
    /// the batches of one phase, or the two sides of a pair, stray from each other.
    batches: Vec<BatchFigures>,
}

/// One batch's [`Timed::batches`] entry.
#[derive(Debug, Clone, Copy)]
struct BatchFigures {
    attach_p50: f64,
    per_sec: f64,
}

impl Timed {
    /// The cycles that succeeded become samples, the others errors.
    fn from_cycles(cycles: Vec<Result<(Duration, Duration), String>>, wall: Duration) -> Timed {
        let mut timed = Timed {
            wall,
            ..Timed::default()
        };
        for cycle in cycles {
            match cycle {
                Ok((attached, detached)) => {
                    timed.attach.push(attached);
                    timed.detach.push(detached);
                }
                Err(e) => timed.errors.push(e),
            }
        }
        timed
    }

    /// Adds `other`'s samples and costs, and its batches (`other` itself when it is one).
    fn add(&mut self, other: Timed) {
        if other.batches.is_empty() {
            self.batches.push(BatchFigures {
                attach_p50: p50(&other.attach),
                per_sec: other.per_sec(),
            });
        } else {
            self.batches.extend(other.batches);
        }
        self.attach.extend(other.attach);
        self.detach.extend(other.detach);
        self.wall += other.wall;
        self.errors.extend(other.errors);
        self.cpu.add(other.cpu);
    }

    /// What each cycle cost the machine, one line.
    fn cost(&self) -> String {
        self.cpu.per_cycle(self.attach.len())
    }

    /// Sandboxes per second over the timed part.
    fn per_sec(&self) -> f64 {
        self.attach.len() as f64 / self.wall.as_secs_f64().max(1e-9)
    }
}

/// [`WARM_UP`] unmeasured cycles, then `cycles` measured ones, in batches of [`BATCH`] sandboxes
/// `<slug>-<i>` (on `network` when given): their netns created before `run` and removed after
/// it, each batch [`costed`].
fn batched(
    node: &TestNode,
    slug: &str,
    cycles: usize,
    network: Option<&str>,
    mut run: impl FnMut(&[Sandbox]) -> Timed,
) -> Timed {
    let make = |range| phase_sandboxes(node, slug, range, network);
    let warm = make(cycles..cycles + WARM_UP);
    let mut total = Timed {
        errors: run(&warm).errors,
        ..Timed::default()
    };
    remove(warm);
    let mut last = 0;
    for start in (0..cycles).step_by(BATCH) {
        let batch = make(start..(start + BATCH).min(cycles));
        total.add(costed(node, || run(&batch)));
        last = batch.len();
        remove(batch);
    }
    settle(node, last);
    total
}

/// `run`'s samples, with what it cost the machine ([`Cpu`], read just before and after it).
fn costed(node: &TestNode, run: impl FnOnce() -> Timed) -> Timed {
    let before = Sample::take(Some(node.pid()));
    let mut timed = run();
    timed.cpu = Sample::take(Some(node.pid())).since(&before);
    timed
}

/// [`sandboxes`] on `network` when given (else on their bridge network by number).
fn phase_sandboxes(
    node: &TestNode,
    slug: &str,
    range: std::ops::Range<usize>,
    network: Option<&str>,
) -> Vec<Sandbox> {
    let mut made = sandboxes(node, slug, range);
    if let Some(network) = network {
        for s in &mut made {
            network.clone_into(&mut s.network);
        }
    }
    made
}

/// The prefix of the sandbox ids and netns names of a knid phase of `shape` at concurrency
/// `clients`.
fn knid_slug(clients: usize, shape: Shape) -> String {
    match shape {
        Shape::DualStack => format!("c{clients}"),
        Shape::Ipv4 => format!("c{clients}v4"),
    }
}

/// One batch of knid attach+detach cycles at concurrency `clients`.
fn knid_batch(node: &TestNode, batch: &[Sandbox], clients: usize) -> Timed {
    let (cycles, _, wall) = concurrently(node, batch, clients, knid_cycle);
    Timed::from_cycles(cycles, wall)
}

fn print_knid(timed: &Timed, clients: usize, cycles: usize, shape: Shape) {
    println!(
        "knid, concurrency {clients}, {}: {cycles} attach+detach cycles",
        shape.label()
    );
    print_timed(timed, "cycles");
    println!(
        "knid's context switches per cycle, by thread: {}",
        timed.cpu.by_thread_per(timed.attach.len())
    );
}

/// knid attach+detach cycles of `shape` at concurrency `clients`.
fn knid_phase(node: &TestNode, clients: usize, cycles: usize, shape: Shape) -> Timed {
    let slug = knid_slug(clients, shape);
    let network = shape_network(shape);
    let timed = batched(node, &slug, cycles, Some(network), |batch| {
        knid_batch(node, batch, clients)
    });
    print_knid(&timed, clients, cycles, shape);
    timed
}

/// knid's attach+detach cycles at concurrency 1 and the batched floor's attaches, both of
/// `shape`, a batch of each in turn (which goes first alternates), every batch followed by
/// [`settle`]: the two meet the kernel in the same state, with neither's teardown (knid's
/// reaper, the kernel's netns cleanup) running under the other's attaches.
fn side_by_side(
    node: &TestNode,
    floor: &mut floor::Floor,
    cycles: usize,
    shape: Shape,
) -> (Timed, Timed) {
    let knid_slug = knid_slug(1, shape);
    let floor_slug = floor_slug(shape);
    let network = Some(shape_network(shape));
    let mut knid = Timed::default();
    let mut base = Timed::default();
    let mut turn = |range: std::ops::Range<usize>, knid_first: bool, warm: bool| {
        for knid_now in [knid_first, !knid_first] {
            let (batch, timed, into) = if knid_now {
                let batch = phase_sandboxes(node, &knid_slug, range.clone(), network);
                let timed = costed(node, || knid_batch(node, &batch, 1));
                (batch, timed, &mut knid)
            } else {
                let batch = phase_sandboxes(node, floor_slug, range.clone(), None);
                let timed = costed(node, || {
                    floor.in_host(|floor| floor_batch(floor, &batch, shape))
                });
                (batch, timed, &mut base)
            };
            if warm {
                into.errors.extend(timed.errors);
            } else {
                into.add(timed);
            }
            let removed = batch.len();
            remove(batch);
            settle(node, removed);
        }
    };
    turn(cycles..cycles + WARM_UP, true, true);
    for (k, start) in (0..cycles).step_by(BATCH).enumerate() {
        turn(start..(start + BATCH).min(cycles), k % 2 == 0, false);
    }
    print_knid(&knid, 1, cycles, shape);
    print_floor_batched(&base, cycles, shape);
    (knid, base)
}

fn print_timed(timed: &Timed, unit: &str) {
    if !timed.attach.is_empty() {
        report("attach", &mut timed.attach.clone());
        report("detach", &mut timed.detach.clone());
    }
    println!("churn   {:.0} {unit}/s", timed.per_sec());
    println!("cpu     {}", timed.cost());
    print_errors(&timed.errors);
}

/// The p50 of each of `op`'s steps ([`op_phases`]).
fn print_steps(op: &str, phases: &[(String, Vec<Duration>)]) {
    for (phase, samples) in phases {
        println!("{op} phase {phase}: p50 {:.3} ms", p50(samples));
    }
}

/// Failed operations, loudly: they are not in the samples.
fn print_errors(errors: &[String]) {
    if let Some(first) = errors.first() {
        println!(
            "!!! {} operation(s) failed and are not in the samples; the first: {first}",
            errors.len()
        );
    }
}

/// One floor sandbox of `shape` set up, checked in the kernel, then torn down.
fn verify_floor(node: &TestNode, floor: &mut floor::Floor, shape: Shape) {
    let s = sandboxes(node, "floor-verify", 0..1).remove(0);
    let pod = floor
        .in_host(|floor| floor.attach(s.n, &s.netns, shape))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut addresses: Vec<_> = testkit::addresses_in(&s.netns, "eth0")
        .into_iter()
        .filter(|a| !testkit::is_link_local(a.addr()))
        .collect();
    addresses.sort();
    assert_eq!(
        addresses,
        floor::addresses(s.n, shape),
        "the floor's addresses"
    );
    let eth0 = testkit::link_in(&s.netns, "eth0").expect("the floor's eth0");
    assert!(eth0.up && eth0.mtu == 1500, "the floor's eth0: {eth0:?}");
    assert!(
        testkit::link_in(&s.netns, "lo").is_some_and(|lo| lo.up),
        "lo up"
    );
    for gateway in floor::gateways(shape) {
        let route = testkit::default_route_in(&s.netns, gateway.is_ipv6())
            .expect("the floor's default route");
        assert_eq!(route.gateway, Some(gateway), "the floor's default route");
    }
    if shape == Shape::Ipv4 {
        assert!(
            testkit::default_route_in(&s.netns, true).is_none(),
            "an IPv4-only floor sandbox has no IPv6 default route"
        );
    }
    let host_name = pod.host_name().to_owned();
    assert_eq!(
        floor_guards(node).contains(&host_name),
        floor.guards(),
        "the floor guards {host_name} exactly when knid guards its links"
    );
    floor.detach(pod);
    assert!(
        !floor_guards(node).contains(&host_name),
        "the floor's guard of {host_name} outlived its detach"
    );
    remove(vec![s]);
}

/// The devices of the floor's source guards in `node`'s host netns.
fn floor_guards(node: &TestNode) -> Vec<String> {
    node.guard_chains(floor::GUARD_TABLE)
        .into_iter()
        .map(|c| c.device)
        .collect()
}

/// Dual-stack floor cycles, each detached by one RTM_DELLINK.
fn floor_phase(node: &TestNode, floor: &mut floor::Floor, cycles: usize) -> Timed {
    let timed = batched(node, "floor", cycles, None, |batch| {
        floor.in_host(|floor| {
            let started = Instant::now();
            let cycles = batch
                .iter()
                .map(|s| {
                    let t = Instant::now();
                    let pod = floor.attach(s.n, &s.netns, Shape::DualStack)?;
                    let attached = t.elapsed();
                    let t = Instant::now();
                    floor.detach(pod);
                    Ok((attached, t.elapsed()))
                })
                .collect();
            Timed::from_cycles(cycles, started.elapsed())
        })
    });
    println!("floor (knid_netops, no IPAM/store/RPC): {cycles} attach+detach cycles");
    print_timed(&timed, "cycles");
    timed
}

/// The prefix of the sandbox ids and netns names of the batched floor's phase of `shape`.
fn floor_slug(shape: Shape) -> &'static str {
    match shape {
        Shape::DualStack => "floorb",
        Shape::Ipv4 => "floorb4",
    }
}

/// One batch of the floor's attaches of `shape`, then one group RTM_DELLINK for all of them.
/// Its `detach` holds that one sample; the wall time is the attaches plus the deletion.
fn floor_batch(floor: &mut floor::Floor, batch: &[Sandbox], shape: Shape) -> Timed {
    let mut attach = Vec::with_capacity(batch.len());
    let mut pods = Vec::with_capacity(batch.len());
    let mut errors = Vec::new();
    for s in batch {
        let t = Instant::now();
        match floor.attach(s.n, &s.netns, shape) {
            Ok(pod) => {
                attach.push(t.elapsed());
                pods.push(pod);
            }
            Err(e) => errors.push(e),
        }
    }
    // Not timed: the baseline puts the group in the creating message.
    for pod in pods {
        floor.group(pod);
    }
    let t = Instant::now();
    floor.delete_retired();
    let deleted = t.elapsed();
    let wall = attach.iter().sum::<Duration>() + deleted;
    Timed {
        attach,
        detach: vec![deleted],
        wall,
        errors,
        ..Timed::default()
    }
}

fn print_floor_batched(timed: &Timed, cycles: usize, shape: Shape) {
    println!(
        "floor, {}, batched detach: {cycles} attaches, one group RTM_DELLINK per {BATCH}: {:.3} \
         ms per sandbox, {:.0} cycles/s",
        shape.label(),
        per_sandbox_ms(timed),
        timed.per_sec()
    );
    report("attach", &mut timed.attach.clone());
    print_errors(&timed.errors);
}

/// The floor's churn at concurrency `clients` (dual stack): each thread with its own socket
/// attaches a sandbox and retires it as knid's detach does, timed as the cycle's detach: its
/// pod end set down by its index with a retired alias from a socket opened in the sandbox
/// netns (with `pod_end`; without, the pod end is left up), then its host end taken off the
/// bridge into the link group. After each batch one group RTM_DELLINK, in the wall time. The same split of
/// sandboxes over threads as knid's clients.
fn floor_churn_phase(
    node: &TestNode,
    floor: &floor::Floor,
    host: &NetnsHandle,
    clients: usize,
    cycles: usize,
    pod_end: bool,
) -> Timed {
    let mut deleter = floor.connect(host);
    let slug = if pod_end { "floorc" } else { "floorcu" };
    let timed = batched(node, slug, cycles, None, |batch| {
        let barrier = Barrier::new(clients + 1);
        let (cycles, wall) = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..clients)
                .map(|w| {
                    let barrier = &barrier;
                    let mut mine = floor.connect(host);
                    scope.spawn(move || {
                        mine.in_host(|mine| {
                            barrier.wait();
                            batch
                                .iter()
                                .skip(w)
                                .step_by(clients)
                                .map(|s| {
                                    let t = Instant::now();
                                    let pod = mine.attach(s.n, &s.netns, Shape::DualStack)?;
                                    let attached = t.elapsed();
                                    let t = Instant::now();
                                    if pod_end {
                                        mine.retire_with_pod_end(pod, &s.netns)?;
                                    } else {
                                        mine.retire(pod);
                                    }
                                    Ok((attached, t.elapsed()))
                                })
                                .collect::<Vec<_>>()
                        })
                    })
                })
                .collect();
            barrier.wait();
            let started = Instant::now();
            let cycles: Vec<_> = workers
                .into_iter()
                .flat_map(|w| w.join().expect("floor client thread"))
                .collect();
            deleter.delete_retired();
            (cycles, started.elapsed())
        });
        Timed::from_cycles(cycles, wall)
    });
    println!(
        "floor, concurrency {clients}: {cycles} attach + retire cycles ({}), one group \
         RTM_DELLINK per {BATCH}",
        if pod_end {
            "pod end set down, as knid's detach"
        } else {
            "pod end left up"
        }
    );
    print_timed(&timed, "cycles");
    timed
}

/// `KNID_BENCH_ONLY=churn`: rounds of knid's churn at the clients' concurrency (once per
/// binary of `KNID_BENCH_CHURN_BINS` and shard count of `KNID_BENCH_CHURN_WORKERS`, in turn,
/// restarting knid on the same node), then the floor's doing knid's detach work. Each is
/// printed with its cost per cycle ([`Cpu`]), knid's rate over the floor's, and, at `debug`, how
/// many of knid's operations were in each step on average (from its log: the sum over
/// operations of each step's time, over the phase's wall time).
fn churn_rounds(node: &mut TestNode, host: &NetnsHandle, knobs: &Knobs) {
    let level: &[&str] = if knobs.churn_deployed { DEPLOYED } else { &[] };
    let bins = binaries(&knobs.churn_bins);
    let workers: Vec<Option<usize>> = if knobs.churn_workers.is_empty() {
        vec![None]
    } else {
        knobs.churn_workers.iter().copied().map(Some).collect()
    };
    let variants: Vec<(Option<&Path>, Option<usize>)> = bins
        .iter()
        .flat_map(|&bin| workers.iter().map(move |&w| (bin, w)))
        .collect();
    let run_variant = |node: &mut TestNode, (bin, w): (Option<&Path>, Option<usize>)| {
        node.set_bin(bin);
        set_workers(node, knobs, w);
        relaunch(node, level);
    };
    run_variant(node, variants[0]);
    let guards = verify_knid(node, Shape::DualStack);
    let mut floor = floor::Floor::create(host, guards);
    verify_floor(node, &mut floor, Shape::DualStack);
    for round in 1..=knobs.rounds {
        let mut knids = Vec::new();
        for &variant in in_turn(&variants, round) {
            if variants.len() > 1 {
                run_variant(node, variant);
            }
            let offset = node.log_text().len();
            let knid = knid_phase(node, knobs.clients, knobs.n, Shape::DualStack);
            let log = node.log_text();
            let mut busy = String::new();
            for op in ["attach", "detach"] {
                let phases = op_phases(&log[offset..], op);
                // At `info` only the total is there, with no samples.
                if phases.iter().all(|(_, samples)| samples.is_empty()) {
                    continue;
                }
                if busy.is_empty() {
                    busy.push_str("\n  its operations in each step on average:");
                }
                let _ = write!(busy, "\n    {op}:");
                for (phase, samples) in phases {
                    let sum: f64 = samples.iter().map(Duration::as_secs_f64).sum();
                    let _ = write!(busy, " {phase} {:.2}", sum / knid.wall.as_secs_f64());
                }
            }
            knids.push((variant, knid, busy));
        }
        let floor8 = floor_churn_phase(node, &floor, host, knobs.clients, knobs.n, true);
        println!(
            "round {round}: floor {:.0}/s (batch by batch {}), {}",
            floor8.per_sec(),
            rates_text(&floor8),
            floor8.cost()
        );
        for ((bin, w), knid, busy) in knids {
            let mut label = bin_label(bin);
            if let Some(w) = w {
                let _ = write!(label, ", workers = {w}");
            }
            println!(
                "  knid ({label}): {:.0}/s (batch by batch {}), ratio {:.2}, {}{busy}",
                knid.per_sec(),
                rates_text(&knid),
                knid.per_sec() / floor8.per_sec(),
                knid.cost(),
            );
        }
    }
    drop(floor);
    assert!(node.list_ids().is_empty(), "sandboxes left after the bench");
    node.assert_host_clean();
}

/// `KNID_BENCH_ONLY=attach`: rounds of phase 1 alone, each shape's concurrency-1 attaches side
/// by side with the batched floor's ([`side_by_side`]), knid at its deployed level, once per
/// binary of `KNID_BENCH_ATTACH_BINS` in turn (each round one later in that list, as the churn's
/// rounds), each printed with its p50, the floor's beside it and their ratio: two builds'
/// attach against the floor, where one full run's pair carries that hour's noise.
fn attach_rounds(node: &mut TestNode, host: &NetnsHandle, knobs: &Knobs) {
    let bins = binaries(&knobs.attach_bins);
    let launch = |node: &mut TestNode, bin: Option<&Path>| {
        node.set_bin(bin);
        relaunch(node, DEPLOYED);
    };
    launch(node, bins[0]);
    let guards = verify_knid(node, Shape::DualStack);
    assert_eq!(
        verify_knid(node, Shape::Ipv4),
        guards,
        "both networks guard, or neither"
    );
    let mut floor = floor::Floor::create(host, guards);
    for shape in [Shape::DualStack, Shape::Ipv4] {
        verify_floor(node, &mut floor, shape);
    }
    for round in 1..=knobs.rounds {
        let mut lines = Vec::new();
        for &bin in in_turn(&bins, round) {
            if bins.len() > 1 {
                launch(node, bin);
            }
            let label = bin_label(bin);
            for shape in [Shape::DualStack, Shape::Ipv4] {
                let (knid, base) = side_by_side(node, &mut floor, knobs.n, shape);
                let (ours, floors) = (p50(&knid.attach), p50(&base.attach));
                lines.push(format!(
                    "  knid ({label}), {}: attach p50 {ours:.3} ms, the floor's {floors:.3} ms, \
                     ratio {:.2}{}",
                    shape.label(),
                    ours / floors,
                    pairs_text(&knid, &base)
                ));
            }
        }
        println!("round {round}:\n{}", lines.join("\n"));
    }
    drop(floor);
    assert!(node.list_ids().is_empty(), "sandboxes left after the bench");
    node.assert_host_clean();
}

/// Shards of the narrow concurrency-8 phase: what knid's default gave on a 2-CPU machine before
/// round two's thirteenth part (one per CPU, at least 2; now at least
/// [`knid_core::config::MIN_DEFAULT_SHARDS`]).
const NARROW_WORKERS: usize = 2;

/// Whether `KNID_BENCH_CONFIG` sets `workers` itself.
fn workers_configured() -> bool {
    std::env::var("KNID_BENCH_CONFIG").is_ok_and(|c| c.contains("workers"))
}

/// Rewrites knid's configuration for its next start: the bench's, with `workers` shards if
/// given.
fn set_workers(node: &TestNode, knobs: &Knobs, workers: Option<usize>) {
    let config = knobs.config();
    match workers {
        Some(w) => node.write_config(&format!("workers = {w}\n{config}")),
        None => node.write_config(&config),
    }
}

/// knid's churn at the clients' concurrency again, with [`NARROW_WORKERS`] shards: fewer of its
/// operations in the kernel at once, which is what knid's default of more shards than CPUs is
/// for (docs/performance-history.md, round two's twelfth and thirteenth parts). Skipped when
/// `KNID_BENCH_CONFIG` sets `workers`. knid is back on the bench's configuration after it.
fn narrow_phase(node: &mut TestNode, knobs: &Knobs) -> Option<Timed> {
    if workers_configured() {
        println!("knid with workers = {NARROW_WORKERS}: skipped, KNID_BENCH_CONFIG sets workers");
        return None;
    }
    println!("knid with workers = {NARROW_WORKERS}:");
    set_workers(node, knobs, Some(NARROW_WORKERS));
    relaunch(node, DEPLOYED);
    let timed = knid_phase(node, knobs.clients, knobs.n, Shape::DualStack);
    set_workers(node, knobs, None);
    relaunch(node, DEPLOYED);
    Some(timed)
}

/// Batched detach time per sandbox (ms).
fn per_sandbox_ms(batched: &Timed) -> f64 {
    ms(batched.detach.iter().sum::<Duration>()) / batched.attach.len().max(1) as f64
}

/// The reference bridge plugin's ADD/DEL cycles, by exec from a thread in the host netns.
fn cni_phase(node: &TestNode, host: &NetnsHandle, plugins: &Path, cycles: usize) -> Timed {
    let leases = tempfile::tempdir().expect("host-local data dir");
    let subject = cni_exec::Subject {
        label: "CNI bridge",
        program: plugins.join("bridge"),
        conf: cni_exec::bridge_conf("bridgenet", CNI_BRIDGE, &CNI_SUBNETS, leases.path()),
        slug: "bridge",
        setup: "veth on bridge, host-local /16 + /64",
    };
    let timed = exec_phase(node, host, &subject, cycles);
    // The plugin's bridge stays in knid's host netns otherwise.
    node.host_rtnl()
        .delete_link_by_name(CNI_BRIDGE)
        .expect("delete the CNI bridge");
    timed
}

/// The knid-cni builds the bench execs.
struct ShimBuilds {
    /// The one the image ships, built for musl, measured against the target; cargo's own when
    /// that build failed.
    shipped: PathBuf,
    /// cargo's glibc build, beside the musl one.
    glibc: Option<PathBuf>,
    /// Which build `shipped` is, for the report.
    build: String,
}

impl ShimBuilds {
    /// Has cargo build knid-cni for musl (a no-op when it is up to date); without it the
    /// bench measures cargo's build and says why.
    fn find() -> Self {
        let cargo_build = testkit::bins::bin("knid-cni");
        match testkit::bins::musl_knid_cni() {
            Ok(musl) => Self {
                shipped: musl,
                glibc: Some(cargo_build),
                build: format!(
                    "built for {} (static, as the image ships it); beside it cargo's glibc \
                     build (static)",
                    testkit::bins::SHIPPED_TARGET
                ),
            },
            Err(why) => {
                println!("knid-cni: measuring cargo's glibc build, not the shipped one: {why}");
                Self {
                    shipped: cargo_build,
                    glibc: None,
                    build: format!("cargo's glibc build (the musl one could not be built: {why})"),
                }
            }
        }
    }
}

/// Everything that execs knid-cni in the bench: its builds, and Debian's libcni with a no-op
/// plugin beside it.
struct ShimWays {
    builds: ShimBuilds,
    libcni: Option<testkit::libcni::Libcni>,
    noop: Option<PathBuf>,
}

impl ShimWays {
    /// The builds and the libcni client, each said on stdout when it cannot be had.
    fn find() -> Self {
        let builds = ShimBuilds::find();
        let libcni = testkit::libcni::Libcni::build()
            .inspect_err(|why| println!("knid-cni through libcni: skipped: {why}"))
            .ok();
        let noop = libcni.as_ref().and_then(|client| {
            client
                .noop_plugin()
                .inspect_err(|why| println!("a no-op plugin through libcni: skipped: {why}"))
                .ok()
        });
        Self {
            builds,
            libcni,
            noop,
        }
    }

    /// The build the image ships, exec'd by the bench.
    fn shipped(&self) -> Shim<'_> {
        Shim::Exec(&self.builds.shipped, "shim", "knid-cni")
    }

    /// cargo's glibc build, exec'd by the bench, when the shipped one is another.
    fn glibc(&self) -> Option<Shim<'_>> {
        let program = self.builds.glibc.as_deref()?;
        Some(Shim::Exec(program, "shimg", "knid-cni, glibc"))
    }

    /// The shipped build through libcni.
    fn libcni(&self) -> Option<Shim<'_>> {
        let client = self.libcni.as_ref()?;
        let words = (
            "shiml",
            "knid-cni through libcni",
            "knid: veth on bridge, /16 + /64",
        );
        Some(Shim::Libcni(client, &self.builds.shipped, words))
    }

    /// The no-op plugin through libcni.
    fn noop(&self) -> Option<Shim<'_>> {
        let (client, noop) = (self.libcni.as_ref()?, self.noop.as_deref()?);
        let words = (
            "noop",
            "a no-op plugin through libcni",
            "static, musl: the exec floor",
        );
        Some(Shim::Libcni(client, noop, words))
    }

    /// Each way there is, in the full run's order.
    fn all(&self) -> Vec<Shim<'_>> {
        let mut ways = vec![self.shipped()];
        ways.extend(
            [self.glibc(), self.libcni(), self.noop()]
                .into_iter()
                .flatten(),
        );
        ways
    }
}

/// One way of running a knid-cni's ADD/DEL cycles against the node's knid.
enum Shim<'a> {
    /// The binary exec'd by the bench as libcni does, its sandboxes named after the slug, its
    /// lines labelled.
    Exec(&'a Path, &'static str, &'static str),
    /// A plugin exec'd by Debian's libcni itself (knid-cni, or the no-op that is the floor of a
    /// call through it): its sandboxes named after the slug, its lines saying what it is and
    /// what it sets up.
    Libcni(
        &'a testkit::libcni::Libcni,
        &'a Path,
        (&'static str, &'static str, &'static str),
    ),
}

impl Shim<'_> {
    fn run(&self, node: &TestNode, host: &NetnsHandle, cycles: usize) -> Timed {
        match *self {
            Shim::Exec(program, slug, label) => {
                let mut subject = cni_exec::knid_subject("default", node.socket(), slug);
                program.clone_into(&mut subject.program);
                subject.label = label;
                exec_phase(node, host, &subject, cycles)
            }
            Shim::Libcni(client, program, (slug, what, setup)) => {
                let conf = testkit::cni::knid_conf("1.0.0", "default", node.socket());
                let timed = batched(node, slug, cycles, None, |batch| {
                    let sandboxes: Vec<(String, PathBuf)> = batch
                        .iter()
                        .map(|s| (s.id.clone(), s.netns.clone()))
                        .collect();
                    let started = Instant::now();
                    let cycles = client.cycles(host, program, &conf, &sandboxes);
                    Timed::from_cycles(cycles, started.elapsed())
                });
                println!("{what}: {cycles} ADD+DEL cycles by Debian's libcni (Go) ({setup})");
                print_timed(&timed, "cycles");
                timed
            }
        }
    }
}

fn exec_phase(
    node: &TestNode,
    host: &NetnsHandle,
    subject: &cni_exec::Subject,
    cycles: usize,
) -> Timed {
    let timed = batched(node, subject.slug, cycles, None, |batch| {
        knid_netops::run_in(host, || {
            let started = Instant::now();
            let cycles = batch
                .iter()
                .map(|s| cni_exec::add_del(subject, &s.id, &s.netns))
                .collect();
            Timed::from_cycles(cycles, started.elapsed())
        })
        .expect("run in the private host netns")
    });
    println!(
        "{}: {cycles} ADD+DEL cycles by exec ({})",
        subject.label, subject.setup
    );
    print_timed(&timed, "cycles");
    timed
}

/// Sandboxes attached (by `clients` threads), then all detached by `clients` threads, timed.
struct Drain {
    count: usize,
    /// Each Detach.
    detach: Vec<Duration>,
    /// From the first Detach until the last reply.
    replied: Duration,
    /// From the first Detach until every address was released.
    released: Duration,
    /// The reaper's rounds in knid's log: links, time spent, rounds.
    links: u64,
    busy: Duration,
    rounds: u64,
    /// Failed Attach (of the sandboxes to detach) and Detach calls.
    errors: Vec<String>,
}

impl Drain {
    fn links_per_sec(&self) -> f64 {
        self.links as f64 / self.busy.as_secs_f64().max(1e-9)
    }

    fn print(&self, clients: usize) {
        println!(
            "reaper: {} attached sandboxes detached by {clients} clients ({:.0} detaches/s)",
            self.count,
            self.count as f64 / self.replied.as_secs_f64()
        );
        report("detach", &mut self.detach.clone());
        println!(
            "reaper  all {} addresses released {:.0} ms after the first Detach, {:.0} ms after \
             the last reply",
            self.count,
            ms(self.released),
            ms(self.released.saturating_sub(self.replied)),
        );
        println!(
            "reaper  {} links in {} group deletions (mean {:.1} per round), {:.0} ms busy: {:.0} \
             links/s of reaper time",
            self.links,
            self.rounds,
            self.links as f64 / self.rounds.max(1) as f64,
            ms(self.busy),
            self.links_per_sec()
        );
        print_errors(&self.errors);
    }
}

/// Attaches every sandbox of `all` from `clients` threads: the Attach latencies and errors.
fn fill(node: &TestNode, all: &[Sandbox], clients: usize) -> Timed {
    let (results, _, wall) = concurrently(node, all, clients, |client, s| {
        attach(client, s).map(|(took, _)| took)
    });
    let mut timed = Timed {
        wall,
        ..Timed::default()
    };
    for result in results {
        match result {
            Ok(took) => timed.attach.push(took),
            Err(e) => timed.errors.push(e),
        }
    }
    timed
}

/// Attaches `count` sandboxes, then detaches them back to back and times the reaper behind.
fn reaper_phase(node: &TestNode, count: usize, clients: usize) -> Drain {
    let all = sandboxes(node, "reap", 0..count);
    let filled = fill(node, &all, clients);
    let mut drain = drain(node, &all, clients);
    drain.errors.splice(0..0, filled.errors);
    drain.print(clients);
    remove(all);
    settle(node, BATCH);
    drain
}

/// Detaches every sandbox of `all` from `clients` threads and waits for the reaper to release
/// every address.
fn drain(node: &TestNode, all: &[Sandbox], clients: usize) -> Drain {
    // Only the reaper's rounds of this drain count.
    let log_offset = node.log_text().len();
    let mut poller = oneshot(node);
    let (results, started, replied) = concurrently(node, all, clients, detach);
    let (mut detach, mut errors) = (Vec::new(), Vec::new());
    for result in results {
        match result {
            Ok(took) => detach.push(took),
            Err(e) => errors.push(e),
        }
    }
    let released_in_time = wait_until(DRAIN_TIMEOUT, Duration::from_millis(1), || {
        addresses_in_use(&mut poller) == 0
    });
    let released = started.elapsed();
    if !released_in_time {
        println!("warning: addresses still in use {DRAIN_TIMEOUT:?} after the detaches");
    }
    let log = node.log_text();
    let (links, busy, rounds) = reaper_rounds(log.get(log_offset..).unwrap_or_default());
    Drain {
        count: all.len(),
        detach,
        replied,
        released,
        links,
        busy,
        rounds,
        errors,
    }
}

/// Sums the reaper's rounds from knid's debug log: "reaper: N link(s) gone, … in <Debug
/// duration>" → (links, busy time, rounds).
fn reaper_rounds(log: &str) -> (u64, Duration, u64) {
    let mut links = 0;
    let mut busy = Duration::ZERO;
    let mut rounds = 0;
    for line in log.lines() {
        let Some(rest) = line
            .split("reaper: ")
            .nth(1)
            .filter(|r| r.contains(" gone, "))
        else {
            continue;
        };
        let (Some(n), Some(took)) = (rest.split(' ').next(), rest.rsplit(" in ").next()) else {
            continue;
        };
        let (Ok(n), Some(took)) = (n.parse::<u64>(), parse_debug_duration(took)) else {
            continue;
        };
        links += n;
        busy += took;
        rounds += 1;
    }
    (links, busy, rounds)
}

/// knid's own account of its `op`s (attach, detach), from its debug log: "<op> <id>: <total> =
/// <phase> <took>, …" → each phase (in the order knid names them) with its samples, the total
/// last.
fn op_phases(log: &str, op: &str) -> Vec<(String, Vec<Duration>)> {
    let marker = format!("knid_core::lifecycle::{op}] {op} ");
    let mut phases: Vec<(String, Vec<Duration>)> = Vec::new();
    let mut add = |name: &str, took: Duration| match phases.iter_mut().find(|(n, _)| n == name) {
        Some((_, samples)) => samples.push(took),
        None => phases.push((name.to_owned(), vec![took])),
    };
    let mut totals = Vec::new();
    for line in log.lines() {
        let Some((total, parts)) = line
            .split(marker.as_str())
            .nth(1)
            .and_then(|rest| rest.split_once(": "))
            .and_then(|(_, rest)| rest.split_once(" = "))
        else {
            continue;
        };
        let Some(total) = parse_debug_duration(total) else {
            continue;
        };
        totals.push(total);
        for part in parts.split(", ") {
            if let Some((name, took)) = part.split_once(' ') {
                if let Some(took) = parse_debug_duration(took) {
                    add(name, took);
                }
            }
        }
    }
    phases.push(("total (in knid's worker)".to_owned(), totals));
    phases
}

/// Parses `Duration`'s Debug form: `12.5ms`, `830.1µs`, `1.2s`, `950ns`.
fn parse_debug_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (value, unit) = text.split_at(split);
    let value: f64 = value.parse().ok()?;
    let secs = match unit {
        "s" => value,
        "ms" => value / 1e3,
        "µs" | "us" => value / 1e6,
        "ns" => value / 1e9,
        _ => return None,
    };
    Some(Duration::from_secs_f64(secs))
}

// ---- footprint ----

/// Code an idle knid mapped in round three's runs: 1.46–2.38 MiB at the three commits that had
/// just made the hot-first list again (fb65b2f, f7298ca, 6b25b5d), 2.52 MiB with one three days
/// stale (docs/performance-history.md, round three's twenty-eighth session). Above this, the list
/// is worth making again and comparing.
const STALE_HOT_CODE_KIB: u64 = 2 * 1024;

/// knid's memory and threads, and the store's size, at one moment.
struct Snapshot {
    label: String,
    rss_kib: u64,
    hwm_kib: u64,
    /// VmRSS split: knid's own memory (heap, stacks) and the binary's mapped pages.
    anon_kib: u64,
    file_kib: u64,
    threads: u64,
    /// The threads by name, counted (`sled-io-* ×7, knid, …`).
    thread_names: String,
    /// Where VmRSS is: the binary's code and data, heap, stacks (`None`: smaps unreadable).
    memory: Option<testkit::measure::MemoryParts>,
    /// Apparent bytes of the state dir's files, and bytes allocated to them.
    store: (u64, u64),
    /// knid's context switches per second by thread, measured over [`IDLE_SPAN`] (idle
    /// snapshots only): how often an idle knid wakes.
    wakeups: Option<String>,
}

impl Snapshot {
    fn take(node: &TestNode, label: &str) -> Snapshot {
        let pid = u32::try_from(node.pid().as_raw()).expect("pid is positive");
        Self::of(pid, &node.dir().join("state"), label)
    }

    fn of(pid: u32, state_dir: &Path, label: &str) -> Snapshot {
        let field = |f| proc_status(pid, f).unwrap_or_else(|| panic!("{f} of knid ({pid})"));
        Snapshot {
            label: label.to_owned(),
            rss_kib: field("VmRSS"),
            hwm_kib: field("VmHWM"),
            anon_kib: field("RssAnon"),
            file_kib: field("RssFile"),
            threads: field("Threads"),
            thread_names: threads::summary(&threads::of(i32::try_from(pid).expect("pid"))),
            memory: testkit::measure::memory_parts(pid),
            store: dir_size(state_dir),
            wakeups: None,
        }
    }

    fn line(&self) -> String {
        format!(
            "footprint {}: VmRSS {:.1} MiB (anonymous {:.1}, file {:.1}), VmHWM {:.1} MiB, {} \
             threads, store {:.2} MiB\n  threads: {}\n  memory: {}",
            self.label,
            self.rss_kib as f64 / 1024.0,
            self.anon_kib as f64 / 1024.0,
            self.file_kib as f64 / 1024.0,
            self.hwm_kib as f64 / 1024.0,
            self.threads,
            self.store.0 as f64 / MIB,
            self.thread_names,
            self.parts()
        ) + &self
            .wakeups
            .as_ref()
            .map_or_else(String::new, |w| format!("\n  context switches: {w}"))
    }

    /// For an idle knid's snapshot: a warning when its code mapped is above [`STALE_HOT_CODE_KIB`],
    /// which a `.cargo/knid.hot` that no longer names what an idle knid runs causes (not alone:
    /// the ranges overlap).
    fn stale_hot_list(&self) -> Option<String> {
        let code = self.memory?.code_kib;
        (code > STALE_HOT_CODE_KIB).then(|| {
            format!(
                "the idle knid maps {:.2} MiB of its code, more than {:.1} MiB: `.cargo/knid.hot` \
                 may be stale; make it again (`bash .cargo/knid-hot.sh`, docs/operations.md) and \
                 compare",
                code as f64 / 1024.0,
                STALE_HOT_CODE_KIB as f64 / 1024.0
            )
        })
    }

    /// [`Snapshot::memory`] as a line, or why it is missing.
    fn parts(&self) -> String {
        self.memory
            .map_or_else(|| "smaps unreadable".to_owned(), |m| m.to_string())
    }
}

/// Stops knid (asserting a clean exit) and starts it again with `args`.
fn relaunch(node: &mut TestNode, args: &[&str]) {
    let status = node.stop();
    assert!(status.success(), "knid exit status {status}");
    node.set_args(args);
    node.restart();
}

/// The footprint once knid has been idle long enough for its on-demand threads (a handler, the
/// store's flusher, the reaper) to end, or after [`threads::SETTLE_LIMIT`]: what an idle node
/// holds, with `state` (e.g. "nothing attached") in its label.
fn settled(node: &TestNode, state: &str) -> Snapshot {
    let (waited, _) = threads::settle(node.pid().as_raw(), &[]);
    let mut snapshot = Snapshot::take(
        node,
        &format!("idle: {:.0} s later, {state}", waited.as_secs_f64().ceil()),
    );
    let before = Sample::take(Some(node.pid()));
    std::thread::sleep(IDLE_SPAN);
    let idle = Sample::take(Some(node.pid())).since(&before);
    snapshot.wakeups = Some(idle.by_thread_rate(IDLE_SPAN));
    snapshot
}

/// How long an idle knid's context switches are counted: ten of sled's one-second timeouts.
const IDLE_SPAN: Duration = Duration::from_secs(10);

/// How long a reconciler round may take to come: the default `gc_interval` (60 s), and a
/// margin for a round over thousands of sandboxes.
const ROUND_LIMIT: Duration = Duration::from_secs(90);

/// knid's `gc_interval` in the bench's config: its default. The next round starts this long after
/// the last one ended.
const GC_INTERVAL: Duration = Duration::from_secs(60);

/// How long after the next round is due the footprint is taken again: the round over 5,000
/// sandboxes (1–3 s on this machine class), and a margin. A round that took longer is caught
/// still running: the figure is then too high, never too low.
const AFTER_NEXT_ROUND: Duration = Duration::from_secs(25);

/// The label of the footprint a reconciler round after the settled one (`<STEADY>, N attached`).
const STEADY: &str = "idle: the next reconciler round over";

/// Reads knid's VmRSS every 250 ms until `until`, calling nothing of knid's; the highest, KiB.
fn peak_rss_until(node: &TestNode, until: Instant) -> u64 {
    let pid = u32::try_from(node.pid().as_raw()).expect("pid is positive");
    let mut peak = 0;
    loop {
        peak = peak.max(proc_status(pid, "VmRSS").expect("VmRSS of knid"));
        if Instant::now() >= until {
            return peak;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Waits until knid's reconciler completes a round (`knid_reconciler_rounds_total` rises).
fn after_reconciler_round(node: &TestNode) {
    let rounds = || testkit::cli::knictl_metric(node, "knid_reconciler_rounds_total");
    // Called once the fill has ended: the next round to complete read the store after that
    // (all of it, or most of it when it began during the fill).
    let before = rounds();
    assert!(
        wait_until(ROUND_LIMIT, Duration::from_millis(500), || {
            rounds() > before
        }),
        "no reconciler round completed within {ROUND_LIMIT:?}"
    );
}

/// (apparent size, allocated size) in bytes of every file under `dir`.
fn dir_size(dir: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let mut total = (0, 0);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return total;
    };
    for entry in entries.flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        let (len, alloc) = if meta.is_dir() {
            dir_size(&entry.path())
        } else {
            (meta.len(), meta.blocks() * 512)
        };
        total.0 += len;
        total.1 += alloc;
    }
    total
}

/// What the footprint phase measured.
struct Footprint {
    count: usize,
    /// Attach latencies while filling up to `count`, at the clients' concurrency.
    fill: Timed,
    snapshots: Vec<Snapshot>,
    /// knid's highest VmRSS from the settled footprint through the next reconciler round, KiB.
    round_peak_kib: u64,
    /// Spawn to ready, per restart.
    ready: Vec<Duration>,
    drain: Drain,
}

fn footprint_phase(node: &mut TestNode, knobs: &Knobs) -> Footprint {
    let (count, clients) = (knobs.footprint, knobs.clients);
    let mut snapshots = Vec::new();
    let mut filled = Timed::default();
    let mut all = Vec::new();
    let first = count.min(PER_BRIDGE);
    for (range, label) in [
        (0..first, format!("{first} attached")),
        (first..count, format!("{count} attached")),
    ] {
        if range.is_empty() {
            continue;
        }
        let batch = sandboxes(node, "fp", range);
        filled.add(fill(node, &batch, clients));
        all.extend(batch);
        snapshots.push(Snapshot::take(node, &label));
        println!("{}", snapshots.last().expect("just pushed").line());
    }
    // What a node holds with them once its reconciler has gone over them all (a round every
    // gc_interval, 60 s by default) and the fill's threads have ended.
    after_reconciler_round(node);
    let round_over = Instant::now();
    snapshots.push(settled(
        node,
        &format!("after a reconciler round, {count} attached"),
    ));
    println!("{}", snapshots.last().expect("just pushed").line());
    // What the node keeps from then on: the next round (no call to knid meanwhile) runs its
    // code and reads every record again, and what it leaves is what an idle node holds.
    let round_peak_kib = peak_rss_until(node, round_over + GC_INTERVAL + AFTER_NEXT_ROUND);
    snapshots.push(Snapshot::take(node, &format!("{STEADY}, {count} attached")));
    println!(
        "{}\n  VmRSS at most {:.1} MiB through that round",
        snapshots.last().expect("just pushed").line(),
        round_peak_kib as f64 / 1024.0
    );
    println!(
        "knid, filling to {count} at concurrency {clients}: {:.0} attaches/s",
        filled.per_sec()
    );
    report("attach", &mut filled.attach.clone());
    print_errors(&filled.errors);
    hold(node);

    let status = node.stop();
    assert!(status.success(), "knid exit status {status}");
    let mut ready = Vec::new();
    let bins = &knobs.restart_bins;
    for r in 0..knobs.restarts {
        let bin = &bins[r % bins.len()];
        let (took, knid) = timed_start(node, bin, DEPLOYED, all_true);
        ready.push(took);
        if r < bins.len() {
            let mut label = format!("{RESTARTED} with {count} recorded");
            if bins.len() > 1 {
                label.push_str(&format!(" ({})", bin.display()));
            }
            snapshots.push(Snapshot::of(knid.pid(), &node.dir().join("state"), &label));
            println!("{}", snapshots.last().expect("just pushed").line());
        }
        knid.stop();
        println!(
            "start-up with {count} sandboxes recorded: ready {:.1} ms after spawn ({})",
            ms(took),
            bin.display()
        );
    }
    // The drain's reaper rounds are read from knid's debug log.
    node.set_args(&[]);
    node.restart();

    let drain = drain(node, &all, clients);
    drain.print(clients);
    remove(all);
    // The last phase: nothing timed follows, so the kernel's netns teardown need not be waited.
    settle(node, 0);
    snapshots.push(Snapshot::take(node, "all detached and reaped"));
    println!("{}", snapshots.last().expect("just pushed").line());
    Footprint {
        count,
        fill: filled,
        snapshots,
        round_peak_kib,
        ready,
        drain,
    }
}

/// With `KNID_BENCH_HOLD=<file>`, waits while that file exists, the footprint's sandboxes
/// attached: time to look at knid (its pid is printed) with other tools.
fn hold(node: &TestNode) {
    let Some(file) = std::env::var_os("KNID_BENCH_HOLD").map(PathBuf::from) else {
        return;
    };
    println!(
        "holding, knid pid {}: remove {} to go on",
        node.pid(),
        file.display()
    );
    while file.exists() {
        std::thread::sleep(Duration::from_millis(200));
    }
}
