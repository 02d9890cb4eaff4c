//! The load driver of tests/load.rs and benches/load.rs: client threads, each with its own
//! connection, run a random mix of Attach, Detach, Inspect, List, Status and GarbageCollect on
//! sandbox ids they all share, so operations on one sandbox race from many connections. Every
//! answer is judged against what the races allow; a watchdog ends the run when no operation
//! completes for too long. Afterwards the node's records are checked against the kernel, then
//! everything is detached and whatever is left is counted as leaked.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ipnet::IpNet;
use knid_core::error::chain;
use knid_transport::{pb, ClientError, RuntimeClient};
use ttrpc::Code;

use crate::assert::assert_pod_side;
use crate::faults::leaked_objects;
use crate::kernel::{link_names, wait_only_lo};
use crate::node::{TestNode, BRIDGE, RPC};
use crate::requests::{attach_req, detach_req, inspect_req};
use crate::wait::{wait_until, SETTLE};

/// The load's network: a /16, so concurrent attaches of the 48 shared sandboxes can never run
/// the pool dry and ResourceExhausted is never a legitimate answer. The reconciler runs every
/// 2 s, so it races the load too.
pub const LOAD_CONFIG: &str = r#"
gc_interval = "2s"
[networks.default]
bridge = "knid0"
subnets = ["10.88.0.0/16", "fd00:88::/64"]
mtu = 1500
"#;
/// The subnets of [`LOAD_CONFIG`].
const SUBNETS: [&str; 2] = ["10.88.0.0/16", "fd00:88::/64"];
/// Unexpected answers kept verbatim in a report (all are counted).
const KEEP_UNEXPECTED: usize = 30;
/// How often the watchdog looks at the progress counter.
const WATCH_EVERY: Duration = Duration::from_millis(250);
/// Lines of knid's log a stall report ends with.
const LOG_TAIL: usize = 60;

/// xorshift64 (Marsaglia): a seeded, reproducible stream of pseudo-random numbers.
pub struct Xorshift(u64);

impl Xorshift {
    /// A generator seeded with `seed` (zero, the one fixed point, is replaced).
    pub fn new(seed: u64) -> Self {
        Self(if seed == 0 {
            0x9e37_79b9_7f4a_7c15
        } else {
            seed
        })
    }

    /// The next 64 pseudo-random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// An index into a slice of `len` (> 0) elements.
    pub fn index(&mut self, len: usize) -> usize {
        usize::try_from(self.below(len as u64)).expect("below a usize fits a usize")
    }

    /// True with probability `percent` / 100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// `len` pseudo-random bytes.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len + 8);
        while out.len() < len {
            out.extend_from_slice(&self.next_u64().to_le_bytes());
        }
        out.truncate(len);
        out
    }

    /// Fewer than `max` (> 0) pseudo-random bytes, how many chosen at random.
    pub fn some_bytes(&mut self, max: usize) -> Vec<u8> {
        let len = self.index(max);
        self.bytes(len)
    }
}

/// The number in environment variable `name`, or `default` when it is unset.
pub fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name).map_or(default, |v| {
        v.parse()
            .unwrap_or_else(|e| panic!("{name}={v:?} is not a number: {e}"))
    })
}

/// Shape of one load run.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    /// Client threads, each with its own connection.
    pub threads: usize,
    /// Sandbox ids shared by every thread, each with its own netns.
    pub sandboxes: usize,
    /// How long the clients keep starting operations.
    pub duration: Duration,
    /// The watchdog ends the run when no operation completes for this long.
    pub stall: Duration,
    /// Seed of the threads' generators.
    pub seed: u64,
}

impl LoadConfig {
    /// 64 threads on 48 sandboxes, a 20 s watchdog; the duration is `KNID_LOAD_SECS` (else
    /// `default_secs`) and the seed `KNID_LOAD_SEED` (else a fixed one).
    pub fn from_env(default_secs: u64) -> Self {
        Self {
            threads: 64,
            sandboxes: 48,
            duration: Duration::from_secs(env_number("KNID_LOAD_SECS", default_secs)),
            stall: Duration::from_secs(20),
            seed: env_number("KNID_LOAD_SEED", 0x6b6e_6964_6c6f_6164),
        }
    }
}

/// The operations of the mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Op {
    /// Attach of the pod's `eth0`, always the same spec.
    Attach,
    /// Detach of every interface.
    Detach,
    /// Inspect.
    Inspect,
    /// List without filters.
    List,
    /// Status.
    Status,
    /// GarbageCollect, every load sandbox valid (or sweep only), half of them dry runs.
    GarbageCollect,
}

impl Op {
    /// Every operation, in report order.
    pub const ALL: [Op; 6] = [
        Op::Attach,
        Op::Detach,
        Op::Inspect,
        Op::List,
        Op::Status,
        Op::GarbageCollect,
    ];

    /// Share of the mix, in percent.
    fn weight(self) -> u64 {
        match self {
            Op::Attach => 30,
            Op::Detach => 25,
            Op::Inspect => 20,
            Op::List => 10,
            Op::Status => 10,
            Op::GarbageCollect => 5,
        }
    }

    fn pick(rng: &mut Xorshift) -> Op {
        let mut roll = rng.below(Op::ALL.iter().map(|op| op.weight()).sum());
        for op in Op::ALL {
            if roll < op.weight() {
                return op;
            }
            roll -= op.weight();
        }
        unreachable!("the roll is below the sum of the weights")
    }

    /// The codes the races allow. Attach repeats an identical spec (idempotent) in a /16 that
    /// cannot run dry; Detach of a detached sandbox succeeds; Inspect of a sandbox detached by
    /// another thread is NotFound; GarbageCollect is told every sandbox is valid.
    fn expected(self) -> &'static [Code] {
        match self {
            Op::Inspect => &[Code::OK, Code::NOT_FOUND],
            Op::Attach | Op::Detach | Op::List | Op::Status | Op::GarbageCollect => &[Code::OK],
        }
    }
}

/// One sandbox of the load: its id and its netns.
#[derive(Debug, Clone)]
pub struct Pod {
    /// Sandbox id.
    pub id: String,
    /// Its netns, under the node's allowed prefix.
    pub netns: PathBuf,
}

/// `n` sandboxes `load-00`, `load-01`, …, each with a netns of its own.
pub fn make_pods(node: &TestNode, n: usize) -> Vec<Pod> {
    (0..n)
        .map(|i| {
            let id = format!("load-{i:02}");
            let netns = node.netns(&id);
            Pod { id, netns }
        })
        .collect()
}

/// Requests, results and latencies of one operation.
#[derive(Debug, Default)]
pub struct OpStats {
    /// Calls completed.
    pub requests: u64,
    /// Result name ("OK", "NOT_FOUND", "TRANSPORT", …) → count.
    pub results: BTreeMap<String, u64>,
    /// Every call's duration, in completion order per thread.
    pub latencies: Vec<Duration>,
}

/// What a load run did.
#[derive(Debug, Default)]
pub struct LoadReport {
    /// Per operation.
    pub ops: BTreeMap<Op, OpStats>,
    /// From the first thread's start to the last one's end.
    pub wall: Duration,
    /// The first `KEEP_UNEXPECTED` answers the races do not allow.
    pub unexpected: Vec<String>,
    /// Answers the races do not allow.
    pub unexpected_count: u64,
    /// The watchdog's report, when it ended the run.
    pub stall: Option<String>,
}

impl LoadReport {
    /// Operations completed.
    pub fn total(&self) -> u64 {
        self.ops.values().map(|s| s.requests).sum()
    }

    /// Prints requests and results per operation and the throughput.
    pub fn print(&self) {
        println!("{:<15} {:>9}  results", "op", "requests");
        for (op, stats) in &self.ops {
            let results: Vec<String> = stats
                .results
                .iter()
                .map(|(code, n)| format!("{code} {n}"))
                .collect();
            println!(
                "{:<15} {:>9}  {}",
                format!("{op:?}"),
                stats.requests,
                results.join(", ")
            );
        }
        println!(
            "total {} ops in {:.1?}: {:.0} ops/s; unexpected answers: {}",
            self.total(),
            self.wall,
            self.total() as f64 / self.wall.as_secs_f64().max(f64::EPSILON),
            self.unexpected_count
        );
    }

    /// Panics when the watchdog fired or an answer was not one the races allow.
    pub fn assert_clean(&self) {
        if let Some(stall) = &self.stall {
            panic!("{stall}");
        }
        assert!(
            self.unexpected_count == 0,
            "{} unexpected answer(s) under load; the first ones:\n{}",
            self.unexpected_count,
            self.unexpected.join("\n")
        );
    }

    fn absorb(&mut self, tally: Tally) {
        for (op, stats) in tally.ops {
            let into = self.ops.entry(op).or_default();
            into.requests += stats.requests;
            for (code, n) in stats.results {
                *into.results.entry(code).or_default() += n;
            }
            into.latencies.extend(stats.latencies);
        }
        self.unexpected_count += tally.unexpected_count;
        let room = KEEP_UNEXPECTED.saturating_sub(self.unexpected.len());
        self.unexpected
            .extend(tally.unexpected.into_iter().take(room));
    }
}

/// One thread's share of a [`LoadReport`].
#[derive(Default)]
struct Tally {
    ops: BTreeMap<Op, OpStats>,
    unexpected: Vec<String>,
    unexpected_count: u64,
}

impl Tally {
    fn record(&mut self, op: Op, pod: &str, outcome: Outcome, took: Duration) {
        let stats = self.ops.entry(op).or_default();
        stats.requests += 1;
        *stats.results.entry(outcome.result.clone()).or_default() += 1;
        stats.latencies.push(took);
        if let Some(problem) = outcome.problem {
            self.unexpected_count += 1;
            if self.unexpected.len() < KEEP_UNEXPECTED {
                self.unexpected
                    .push(format!("{op:?} {pod} -> {}: {problem}", outcome.result));
            }
        }
    }
}

/// How one call ended: its result name and, when the races do not allow it, why.
struct Outcome {
    result: String,
    problem: Option<String>,
}

impl Outcome {
    /// An answer with code OK; `problem` when its content is wrong.
    fn ok(problem: Option<String>) -> Self {
        Self {
            result: "OK".to_owned(),
            problem,
        }
    }

    fn error(op: Op, err: &ClientError) -> Self {
        match err {
            ClientError::Rpc { code, message } => Self {
                result: format!("{code:?}"),
                problem: (!op.expected().contains(code)).then(|| message.clone()),
            },
            ClientError::Connect { .. } => Self {
                result: "CONNECT".to_owned(),
                problem: Some(chain(err)),
            },
            ClientError::Transport(_) => Self {
                result: "TRANSPORT".to_owned(),
                problem: Some(chain(err)),
            },
        }
    }

    fn is_transport(&self) -> bool {
        matches!(self.result.as_str(), "CONNECT" | "TRANSPORT")
    }
}

/// What the threads and the watchdog share.
struct Shared {
    /// Operations completed, by every thread.
    completed: AtomicU64,
    /// Set by the watchdog: the threads stop starting operations.
    stop: AtomicBool,
    /// Per thread: the operation it is in, on which sandbox, since when.
    in_flight: Vec<Mutex<Option<(Op, usize, Instant)>>>,
}

/// Runs the load of `cfg` on `pods` against `node`: `cfg.threads` client threads until
/// `cfg.duration` has passed, and a watchdog which, when no operation completes for
/// `cfg.stall`, captures knid's state, kills knid (so the blocked calls return now rather than
/// at their timeout) and ends the run with a report.
pub fn run(node: &TestNode, pods: &[Pod], cfg: &LoadConfig) -> LoadReport {
    assert!(!pods.is_empty(), "a load needs sandboxes");
    let shared = Shared {
        completed: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        in_flight: (0..cfg.threads).map(|_| Mutex::new(None)).collect(),
    };
    let started = Instant::now();
    let end = started + cfg.duration;
    let (results, stall) = std::thread::scope(|s| {
        let shared = &shared;
        let clients: Vec<_> = (0..cfg.threads)
            .map(|t| {
                let seed = cfg.seed ^ (t as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                std::thread::Builder::new()
                    .name(format!("load-{t}"))
                    .spawn_scoped(s, move || client_loop(node, pods, t, seed, end, shared))
                    .expect("spawn a load thread")
            })
            .collect();
        let watchdog = std::thread::Builder::new()
            .name("load-watchdog".to_owned())
            .spawn_scoped(s, || watch(node, pods, shared, cfg.stall))
            .expect("spawn the watchdog");
        let results: Vec<_> = clients.into_iter().map(|h| h.join()).collect();
        shared.stop.store(true, Ordering::SeqCst);
        (results, watchdog.join())
    });
    let mut report = LoadReport {
        wall: started.elapsed(),
        stall: stall.unwrap_or_else(|p| std::panic::resume_unwind(p)),
        ..LoadReport::default()
    };
    for result in results {
        report.absorb(result.unwrap_or_else(|p| std::panic::resume_unwind(p)));
    }
    report
}

/// One client thread: random operations on random sandboxes over one connection (a new one
/// after a transport failure) until `end` or the watchdog's stop.
fn client_loop(
    node: &TestNode,
    pods: &[Pod],
    t: usize,
    seed: u64,
    end: Instant,
    shared: &Shared,
) -> Tally {
    let mut rng = Xorshift::new(seed);
    let mut tally = Tally::default();
    let mut client: Option<RuntimeClient> = None;
    while Instant::now() < end && !shared.stop.load(Ordering::SeqCst) {
        let op = Op::pick(&mut rng);
        let index = rng.index(pods.len());
        let pod = &pods[index];
        let slot = &shared.in_flight[t];
        *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some((op, index, Instant::now()));
        let started = Instant::now();
        let outcome = match &client {
            Some(c) => perform(c, op, pod, pods, &mut rng),
            None => match RuntimeClient::connect(node.socket()) {
                Ok(c) => perform(client.insert(c), op, pod, pods, &mut rng),
                Err(e) => Outcome::error(op, &e),
            },
        };
        let took = started.elapsed();
        *slot.lock().unwrap_or_else(|p| p.into_inner()) = None;
        shared.completed.fetch_add(1, Ordering::SeqCst);
        if outcome.is_transport() {
            // A new connection next time; a dead knid must not be hammered in a tight loop.
            client = None;
            std::thread::sleep(Duration::from_millis(10));
        }
        tally.record(op, &pod.id, outcome, took);
    }
    tally
}

/// Calls `op` on `pod` and judges the answer.
fn perform(client: &RuntimeClient, op: Op, pod: &Pod, pods: &[Pod], rng: &mut Xorshift) -> Outcome {
    let judged = |result: Result<Option<String>, ClientError>| match result {
        Ok(problem) => Outcome::ok(problem),
        Err(e) => Outcome::error(op, &e),
    };
    match op {
        Op::Attach => judged(
            client
                .attach(&attach_req(&pod.id, &pod.netns, "eth0"), RPC)
                .map(|sandbox| attached_problem(&pod.id, &sandbox)),
        ),
        Op::Detach => judged(client.detach(&detach_req(&pod.id), RPC).map(|()| None)),
        Op::Inspect => {
            let req = inspect_req(&pod.id);
            judged(
                client
                    .inspect(&req, RPC)
                    .map(|sandbox| inspected_problem(&pod.id, &sandbox)),
            )
        }
        Op::List => judged(
            client
                .list(&pb::ListRequest::default(), RPC)
                .map(|list| listed_problem(&list, pods)),
        ),
        Op::Status => {
            judged(client.status(RPC).map(|status| {
                (!status.ready).then(|| format!("not ready: {:?}", status.conditions))
            }))
        }
        Op::GarbageCollect => {
            // Every sandbox is valid: a collection must find nothing, dry run or not.
            let sweep_only = rng.chance(50);
            let req = pb::GarbageCollectRequest {
                valid_sandbox_ids: if sweep_only {
                    Vec::new()
                } else {
                    pods.iter().map(|p| p.id.clone()).collect()
                },
                sweep_only,
                dry_run: rng.chance(50),
                ..Default::default()
            };
            judged(client.garbage_collect(&req, RPC).map(|gc| {
                let removed: Vec<String> = gc
                    .removed
                    .iter()
                    .map(|f| {
                        let owner = format!("{}/{}", f.sandbox_id, f.ifname);
                        format!("{} {owner} {} ({})", f.what, f.detail, f.reason)
                    })
                    .collect();
                (!removed.is_empty() || !gc.errors.is_empty()).then(|| {
                    format!(
                        "found something to collect with every sandbox valid (sweep_only \
                         {sweep_only}, dry_run {}): removed {removed:?}, errors {:?}",
                        req.dry_run, gc.errors
                    )
                })
            }))
        }
    }
}

/// What is wrong with an Attach answer: it must show `id` attached with one dual-stack `eth0`
/// inside the load's subnets.
fn attached_problem(id: &str, sandbox: &pb::Sandbox) -> Option<String> {
    let iface = match sandbox.interfaces.as_slice() {
        [iface] if sandbox.id == id && sandbox.state == "attached" => iface,
        _ => return Some(format!("not one attached interface: {sandbox:?}")),
    };
    if iface.name != "eth0" || iface.state != "attached" || iface.host_ifname.is_empty() {
        return Some(format!("interface not as requested: {iface:?}"));
    }
    let nets: Vec<IpNet> = SUBNETS.map(|s| s.parse().expect("subnet")).to_vec();
    let inside = |ip: &pb::IpConfig| {
        ip.address
            .parse::<IpNet>()
            .is_ok_and(|a| nets.iter().any(|n| n.contains(&a.addr())))
    };
    (iface.ips.len() != 2 || !iface.ips.iter().all(inside)).then(|| {
        format!(
            "addresses not one per subnet of {SUBNETS:?}: {:?}",
            iface.ips
        )
    })
}

/// What is wrong with an Inspect answer: it must be `id` with at most its one `eth0` (other
/// threads may be between states of it, but never show another sandbox or interface).
fn inspected_problem(id: &str, sandbox: &pb::Sandbox) -> Option<String> {
    let only_eth0 = sandbox.interfaces.iter().all(|i| i.name == "eth0");
    (sandbox.id != id || sandbox.interfaces.len() > 1 || !only_eth0)
        .then(|| format!("not sandbox {id} with at most eth0: {sandbox:?}"))
}

/// What is wrong with a List answer: only the load's sandboxes, each once, each with at most
/// `eth0`.
fn listed_problem(list: &pb::ListResponse, pods: &[Pod]) -> Option<String> {
    let mut seen = HashSet::new();
    for summary in &list.sandboxes {
        if !pods.iter().any(|p| p.id == summary.id) || !seen.insert(summary.id.as_str()) {
            return Some(format!("unknown or repeated sandbox {:?}", summary.id));
        }
        if summary.interfaces.len() > 1 || summary.interfaces.iter().any(|i| i != "eth0") {
            return Some(format!("interfaces other than one eth0: {summary:?}"));
        }
    }
    None
}

/// The watchdog: returns `None` once the run stops, or a report when no operation completed
/// for `stall`, after killing knid.
fn watch(node: &TestNode, pods: &[Pod], shared: &Shared, stall: Duration) -> Option<String> {
    let mut seen = shared.completed.load(Ordering::SeqCst);
    let mut since = Instant::now();
    while !shared.stop.load(Ordering::SeqCst) {
        std::thread::sleep(WATCH_EVERY);
        let now = shared.completed.load(Ordering::SeqCst);
        if now != seen {
            (seen, since) = (now, Instant::now());
            continue;
        }
        if since.elapsed() < stall {
            continue;
        }
        shared.stop.store(true, Ordering::SeqCst);
        let report = stall_report(node, pods, shared, since.elapsed(), seen);
        let _ = nix::sys::signal::kill(node.pid(), nix::sys::signal::Signal::SIGKILL);
        return Some(report);
    }
    None
}

/// What the threads were waiting for, knid's threads grouped by kernel stack, and the tail of
/// its log.
fn stall_report(
    node: &TestNode,
    pods: &[Pod],
    shared: &Shared,
    stalled: Duration,
    completed: u64,
) -> String {
    let mut text = format!(
        "WATCHDOG: no operation completed for {stalled:.1?} ({completed} completed before); \
         knid (pid {}) is killed.\nIn flight:\n",
        node.pid()
    );
    for (t, slot) in shared.in_flight.iter().enumerate() {
        if let Some((op, pod, at)) = *slot.lock().unwrap_or_else(|p| p.into_inner()) {
            text.push_str(&format!(
                "  thread {t}: {op:?} {} for {:.1?}\n",
                pods[pod].id,
                at.elapsed()
            ));
        }
    }
    text.push_str(&thread_stacks(node.pid().as_raw()));
    let log = node.log_text();
    let lines: Vec<&str> = log.lines().collect();
    text.push_str(&format!("Last {LOG_TAIL} lines of knid's log:\n"));
    for line in &lines[lines.len().saturating_sub(LOG_TAIL)..] {
        text.push_str(line);
        text.push('\n');
    }
    text
}

/// knid's threads (name, wait channel, kernel stack) grouped by identical name and stack.
fn thread_stacks(pid: i32) -> String {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return format!("knid's threads: /proc/{pid}/task is not readable\n");
    };
    let mut groups: HashMap<(String, String), usize> = HashMap::new();
    for task in tasks.flatten() {
        let dir = task.path();
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_default();
        let stack = read("stack");
        let stack = if stack.is_empty() {
            format!("    (no kernel stack; wchan {})\n", read("wchan"))
        } else {
            stack.lines().map(|l| format!("    {l}\n")).collect()
        };
        *groups
            .entry((read("comm").trim().to_owned(), stack))
            .or_default() += 1;
    }
    let mut groups: Vec<_> = groups.into_iter().collect();
    groups.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let mut text = format!("knid's threads ({} kinds):\n", groups.len());
    for ((comm, stack), n) in groups {
        text.push_str(&format!("  {n} x {comm}\n{stack}"));
    }
    text
}

/// After the load, with every thread joined: what knid records agrees with the kernel.
/// Every listed sandbox is attached, its host link an up veth port of the bridge and its pod
/// side what Inspect reports; addresses are unique across the node; records and kernel agree
/// ([`leaked_objects`]: host links, bridge ports, IPAM usage, pod netns);
/// unlisted sandboxes have nothing left in their netns. Returns the number of attached
/// sandboxes.
pub fn check_invariants(node: &TestNode, pods: &[Pod]) -> usize {
    let client = node.client();
    let listed: HashSet<String> = node.list_ids().into_iter().collect();
    let unknown: Vec<&String> = listed
        .iter()
        .filter(|id| !pods.iter().any(|p| &p.id == *id))
        .collect();
    assert!(
        unknown.is_empty(),
        "List shows sandboxes nobody attached: {unknown:?}"
    );
    let mut addresses: HashMap<IpAddr, String> = HashMap::new();
    for pod in pods.iter().filter(|p| listed.contains(&p.id)) {
        let req = inspect_req(&pod.id);
        let sandbox = client
            .inspect(&req, RPC)
            .unwrap_or_else(|e| panic!("Inspect {} (listed): {e}", pod.id));
        if let Some(problem) = attached_problem(&pod.id, &sandbox) {
            panic!("listed sandbox {} after the load: {problem}", pod.id);
        }
        let iface = &sandbox.interfaces[0];
        node.assert_host_side(iface);
        assert_pod_side(&pod.netns, iface);
        for ip in &iface.ips {
            let addr = ip.address.parse::<IpNet>().expect("a CIDR").addr();
            if let Some(other) = addresses.insert(addr, pod.id.clone()) {
                panic!("{addr} is held by both {other} and {}", pod.id);
            }
        }
    }
    // Waits for the reaper to delete the links of detached sandboxes.
    let problems = leaked_objects(node);
    assert!(
        problems.is_empty(),
        "records and kernel disagree after the load: {problems:#?}"
    );
    for pod in pods.iter().filter(|p| !listed.contains(&p.id)) {
        wait_only_lo(&pod.netns);
    }
    listed.len()
}

/// What was left after everything was detached.
#[derive(Debug, Default)]
pub struct Leaks {
    /// knid host links (`kn*`, the bridge excepted).
    pub host_links: usize,
    /// Ports of the bridge.
    pub bridge_ports: usize,
    /// Addresses IPAM still counts as used.
    pub addresses: u64,
    /// Sandboxes List still shows.
    pub records: usize,
    /// Links other than `lo` in the pods' netns.
    pub pod_links: usize,
}

impl Leaks {
    /// Objects leaked, of every kind.
    pub fn total(&self) -> u64 {
        (self.host_links + self.bridge_ports + self.records + self.pod_links) as u64
            + self.addresses
    }
}

/// Detaches every sandbox of `pods` (each must succeed) and counts, once the reaper had
/// [`SETTLE`] to finish, what is left: knid host links, bridge ports, reserved addresses,
/// sandbox records and pod-side links.
pub fn detach_all_and_count_leaks(node: &TestNode, pods: &[Pod]) -> Leaks {
    let client = node.client();
    for pod in pods {
        client
            .detach(&detach_req(&pod.id), RPC)
            .unwrap_or_else(|e| panic!("Detach {}: {e}", pod.id));
    }
    let pod_links = || {
        pods.iter()
            .map(|p| link_names(&p.netns).len() - 1)
            .sum::<usize>()
    };
    wait_until(SETTLE, Duration::from_millis(10), || {
        node.host_kn_links().is_empty() && node.capacity_used("default") == 0 && pod_links() == 0
    });
    Leaks {
        host_links: node.host_kn_links().len(),
        bridge_ports: node.bridge_ports(BRIDGE).len(),
        addresses: node.capacity_used("default"),
        records: node.list_ids().len(),
        pod_links: pod_links(),
    }
}
