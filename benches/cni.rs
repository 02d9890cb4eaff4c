//! CNI ADD/DEL by exec, side by side in one run: `knid-cni` against a knid daemon, and the
//! reference `bridge` plugin with `host-local` IPAM (Debian's containernetworking-plugins), both
//! giving a pod a veth on a bridge with an IPv4 address from a /16 and an IPv6 one from a /64,
//! cniVersion 1.0.0 (the reference plugins' newest).
//!
//! The bridge plugin runs a second time with IPv4 only, the set-up of the baseline numbers.
//! Without the reference plugins (`bridge` and `host-local` in /opt/cni/bin or /usr/lib/cni)
//! only knid-cni runs, and the bench says so. The exec machinery is testkit/src/cni_exec.rs,
//! shared with benches/perf.rs.
//!
//! `KNID_BENCH_N` (default 200) sequential cycles per plugin after 5 warm-up cycles: create a
//! sandbox netns (not timed), ADD (timed), DEL with the ADD's result as `prevResult` (timed).
//! Each time is one plugin process from spawn to exit, exec'd the way libcni does (environment,
//! config on stdin), from a thread inside the private host netns. Prints p50/p90/p99/max of
//! each, a table with the ratios, each plugin's peak RSS (below), and the p50 of knid-cni
//! VERSION, which calls nothing: the process's own share of each ADD and DEL. Numbers are
//! reported, never asserted.
//!
//! Peak RSS is the plugin process's own VmHWM, read from /proc while it is blocked writing its
//! result to a stdout pipe the bench filled beforehand: all of its work is done, and it has not
//! exited yet. getrusage(RUSAGE_CHILDREN) is not used: its ru_maxrss also counts the memory of
//! the forked bench before exec, and it keeps only the maximum over every child.

use std::io::Read;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use testkit::cni::cni_env;
use testkit::cni_exec::{self, add_del, bridge_conf, command, exec, feed, knid_subject, Subject};
use testkit::measure::{env_count, ms, percentile, proc_status, report};
use testkit::TestNode;

/// Cycles run before measuring, so first-use costs (bridge creation, sled pages) are excluded.
const WARM_UP: usize = 5;
/// knid's network: the same sizes as the bridge plugin's ranges.
const BENCH_NETWORK: &str = r#"
[networks.cninet]
bridge = "knid0"
subnets = ["10.88.0.0/16", "fd00:88::/64"]
"#;
/// How long a plugin may take to block on its full stdout before its RSS is reported unknown.
const RSS_WAIT: Duration = Duration::from_secs(10);
/// Peer numbers measured on this machine class (the baseline of
/// docs/comparison.md#where-the-numbers-come-from), p50.
const PEERS: &str = "baseline (docs/comparison.md#latency-and-throughput, p50): CNI bridge ADD \
                     6.4 ms, DEL 20.1 ms; one CNI ADD exec 4.7 MiB; knid-cni ADD target <= 2 ms";

/// What one subject measured.
struct Measured {
    add: Vec<Duration>,
    del: Vec<Duration>,
    rss_kib: Option<u64>,
}

fn main() {
    if !testkit::privileged() {
        return;
    }
    let cycles = env_count("KNID_BENCH_N", 200);
    let node = TestNode::start(BENCH_NETWORK);
    let ipam_dir = tempfile::tempdir().expect("host-local data dir");
    let mut subjects = vec![knid_subject("cninet", node.socket(), "shim")];
    match cni_exec::reference_plugins() {
        Some(dir) => subjects.extend([
            Subject {
                label: "CNI bridge",
                program: dir.join("bridge"),
                conf: bridge_conf(
                    "bridgenet",
                    "cni0",
                    &["10.89.0.0/16", "fd00:89::/64"],
                    ipam_dir.path(),
                ),
                slug: "bridge",
                setup: "veth on bridge, host-local /16 + /64",
            },
            // The baseline's set-up (docs/comparison.md#where-the-numbers-come-from): IPv4 only.
            // Dual stack costs the bridge plugin its wait for IPv6 duplicate address detection
            // (polled every 50 ms).
            Subject {
                label: "bridge v4",
                program: dir.join("bridge"),
                conf: bridge_conf("bridgev4", "cni1", &["10.90.0.0/16"], ipam_dir.path()),
                slug: "bridgev4",
                setup: "veth on bridge, host-local /16 only",
            },
        ]),
        None => println!(
            "CNI bridge: skipped, no bridge and host-local plugins in /opt/cni/bin or /usr/lib/cni \
             (Debian: apt-get install containernetworking-plugins)"
        ),
    }
    let host = knid_netops::NetnsHandle::open(node.host_path()).expect("open host netns");
    let mut results = Vec::new();
    for subject in &subjects {
        // Every netns first: creating one is not part of what is measured.
        let netns: Vec<PathBuf> = (0..=WARM_UP + cycles)
            .map(|i| node.netns(&format!("{}-{i}", subject.slug)))
            .collect();
        let measured = knid_netops::run_in(&host, || run_cycles(subject, &netns, cycles))
            .expect("run in the private host netns");
        println!(
            "{}: {cycles} sequential ADD + DEL by exec ({})",
            subject.label, subject.setup
        );
        let (mut add, mut del) = (measured.add.clone(), measured.del.clone());
        report("ADD", &mut add);
        report("DEL", &mut del);
        results.push(measured);
    }
    table(&subjects, &mut results);
    let mut floor = knid_netops::run_in(&host, || exec_floor(&subjects[0], cycles))
        .expect("run in the private host netns");
    floor.sort();
    println!(
        "knid-cni VERSION (exec, no knid call) p50 {:.3} ms: the process cost inside each ADD/DEL above",
        ms(percentile(&floor, 50.0))
    );
    println!("{PEERS}");
    assert!(node.list_ids().is_empty(), "sandboxes left after the bench");
    node.assert_host_clean();
}

/// Runs on a thread inside the host netns, so every plugin starts there.
fn run_cycles(subject: &Subject, netns: &[PathBuf], cycles: usize) -> Measured {
    let mut add = Vec::with_capacity(cycles);
    let mut del = Vec::with_capacity(cycles);
    for (i, ns) in netns.iter().enumerate().take(WARM_UP + cycles) {
        let (a, d) = add_del(subject, &format!("{}-{i}", subject.slug), ns)
            .unwrap_or_else(|e| panic!("{e}"));
        if i >= WARM_UP {
            add.push(a);
            del.push(d);
        }
    }
    // One more ADD, watched for its peak RSS, then undone.
    let last = netns.last().expect("a netns for the RSS run");
    let id = format!("{}-rss", subject.slug);
    let rss_kib = peak_rss(subject, &cni_env("ADD", &id, Some(last), "eth0"));
    exec(
        subject,
        &cni_env("DEL", &id, Some(last), "eth0"),
        &subject.conf.to_string(),
    );
    Measured { add, del, rss_kib }
}

/// `cycles` knid-cni VERSION calls: what exec'ing the shim costs without calling knid.
fn exec_floor(subject: &Subject, cycles: usize) -> Vec<Duration> {
    let env = [("CNI_COMMAND".to_owned(), "VERSION".to_owned())];
    (0..WARM_UP + cycles)
        .map(|_| {
            let started = Instant::now();
            exec(subject, &env, "{}");
            started.elapsed()
        })
        .skip(WARM_UP)
        .collect()
}

/// VmHWM (KiB) of one ADD of `subject`, read while it blocks writing its result to a full
/// pipe; `None` if that state was not seen within [`RSS_WAIT`].
fn peak_rss(subject: &Subject, env: &[(String, String)]) -> Option<u64> {
    let (reader, writer) = nix::unistd::pipe().expect("pipe");
    let mut reader = std::fs::File::from(reader);
    fill(&writer);
    let mut child = command(subject, env)
        .stdout(Stdio::from(writer))
        .spawn()
        .expect("spawn plugin");
    feed(&mut child, &subject.conf.to_string());
    let pid = child.id();
    let started = Instant::now();
    let mut rss = None;
    while started.elapsed() < RSS_WAIT {
        if blocked_writing_stdout(pid) {
            rss = proc_status(pid, "VmHWM");
            break;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    // Drain the filler and the result so the plugin can finish.
    let mut sink = Vec::new();
    reader
        .read_to_end(&mut sink)
        .expect("drain the plugin's stdout");
    let status = child.wait().expect("wait for plugin");
    assert!(
        status.success(),
        "{} RSS run failed: {status}",
        subject.label
    );
    rss
}

/// Fills a pipe to capacity: a later write to it blocks until it is read.
fn fill(writer: &std::os::fd::OwnedFd) {
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    let set = |flags: OFlag| {
        fcntl(writer.as_fd(), FcntlArg::F_SETFL(flags)).expect("set pipe flags");
    };
    set(OFlag::O_NONBLOCK);
    let chunk = [b' '; 4096];
    while nix::unistd::write(writer.as_fd(), &chunk).is_ok() {}
    // The flag belongs to the open file the child shares: it must block again.
    set(OFlag::empty());
}

/// Whether some thread of `pid` is in write(2) on fd 1 (/proc/<pid>/task/*/syscall).
fn blocked_writing_stdout(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    let want = format!("{} 0x1 ", libc::SYS_write);
    tasks.flatten().any(|task| {
        std::fs::read_to_string(task.path().join("syscall")).is_ok_and(|s| s.starts_with(&want))
    })
}

fn table(subjects: &[Subject], results: &mut [Measured]) {
    let p = |samples: &mut Vec<Duration>, q: f64| {
        samples.sort();
        ms(percentile(samples, q))
    };
    println!();
    println!(
        "{:<12} {:>10} {:>10} {:>10} {:>10} {:>12}",
        "plugin", "ADD p50", "ADD p90", "DEL p50", "DEL p90", "peak RSS"
    );
    let mut rows = Vec::new();
    for (subject, m) in subjects.iter().zip(results.iter_mut()) {
        let row = [
            p(&mut m.add, 50.0),
            p(&mut m.add, 90.0),
            p(&mut m.del, 50.0),
            p(&mut m.del, 90.0),
        ];
        let rss = m.rss_kib.map_or_else(
            || "n/a".to_owned(),
            |k| format!("{:.1} MiB", k as f64 / 1024.0),
        );
        println!(
            "{:<12} {:>7.3} ms {:>7.3} ms {:>7.3} ms {:>7.3} ms {:>12}",
            subject.label, row[0], row[1], row[2], row[3], rss
        );
        rows.push(row);
    }
    if let Some((shim, others)) = rows.split_first() {
        for (subject, other) in subjects[1..].iter().zip(others) {
            println!(
                "{:<12} {:>9.2}x {:>9.2}x {:>9.2}x {:>9.2}x",
                format!("/{}", subject.label),
                shim[0] / other[0],
                shim[1] / other[1],
                shim[2] / other[2],
                shim[3] / other[3]
            );
        }
        println!("(knid-cni / that plugin; below 1 means knid-cni is faster)");
    }
}
