//! Crash tests (docs/architecture.md#the-attachment-lifecycle-attach--detach--gone,
//! its failpoints, and #start-up-and-crash-recovery): knid is made to abort, or to fail the
//! operation, at every step boundary of attach, rollback, detach and the reaper
//! (`KNID_FAILPOINTS`, cargo feature `failpoints`), or is killed (SIGKILL) right after it
//! answered an Attach, before that Attached was flushed. After a restart it must have
//! converged: an interrupted attach rolled back, or rolled forward when its kernel work was
//! complete and verified (never one that failed, never one whose kernel state recovery finds
//! changed), an answered attach kept with exactly the answered addresses, an interrupted
//! detach finished; no leaked link, address, reservation or record; and the same sandbox can be
//! attached and detached again.
//!
//! Each group of rows is one table-driven test; every row runs on its own node and the group
//! prints its matrix (step × action × RPC outcome × exit status × outcome after recovery). The
//! last test kills knid in the middle of concurrent attaches.

use std::collections::BTreeSet;
use std::os::unix::process::ExitStatusExt;
use std::panic::{self, AssertUnwindSafe};
use std::path::Path;
use std::time::{Duration, Instant};

use ipnet::IpNet;
use knid_store::AttachmentState;
use knid_transport::{pb, ClientError};
use testkit::faults::{stop_and_check_store, StoreSummary};
use testkit::{TestNode, BRIDGE, RPC};

/// The environment variable arming failpoints.
const FAILPOINTS: &str = "KNID_FAILPOINTS";
/// `std::process::abort` raises SIGABRT.
const SIGABRT: i32 = 6;
/// How long knid may take to die once an aborting failpoint is due (the reaper's run after a
/// detach reply included).
const DEATH: Duration = Duration::from_secs(10);
/// How long a failing (not aborting) failpoint is given to kill knid, which it must not do.
const STILL_RUNNING: Duration = Duration::from_millis(300);
/// Widest failure message shown in a matrix cell (the whole message follows the matrix).
const MAX_CELL: usize = 120;

/// The operation a row interrupts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// Attach of a new sandbox, with the failpoints armed from the start.
    Attach,
    /// Attach of a new sandbox, answered; then the test kills knid (SIGKILL) at once, before
    /// the Attached record is flushed (checked in the store the kill left).
    AttachThenKill,
    /// Detach of a sandbox attached before the failpoints were armed.
    Detach,
}

/// What a row changes in the kernel between the fault and the restart, behind knid's back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tamper {
    None,
    /// The pod's IPv4 address deleted: recovery must not roll forward what it cannot verify.
    PodAddress,
    /// The host link's mark set back to the attaching one: as if the last kernel step had not
    /// run.
    Unmarked,
    /// The store rewound to what it held before the detach (its Detaching marks and the sandbox
    /// record's deletion lost), as a crash after the kernel work but before the marks' flush
    /// completed leaves it. A row cannot time that crash itself (the background flush usually
    /// wins), so it is made: recovery must finish the detach from the retired host link.
    MarksLost,
}

/// What the caller of the interrupted RPC sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reply {
    /// No answer at all: knid died before replying (a transport error, not a status).
    Lost,
    /// An Internal error naming the failpoint that fired.
    Failed,
    /// Success: the fault comes after the reply.
    Ok,
}

/// Where the sandbox must end up once knid has recovered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum After {
    /// Nothing of it is left: the attach rolled back, or the detach finished.
    Gone,
    /// Attached, with the addresses already in the kernel: Attached was durable before the fault.
    Attached,
    /// Either, each whole: a detach aborted before its kernel work, whose Detaching marks were
    /// flushing in the background (durable: finished; not: still attached, untouched).
    GoneOrAttached,
}

/// One cell of the matrix.
#[derive(Debug)]
struct Row {
    op: Op,
    /// `KNID_FAILPOINTS` of the faulted run; the last entry is the one that ends the operation.
    failpoints: &'static str,
    reply: Reply,
    after: After,
    tamper: Tamper,
}

impl Row {
    const fn attach(failpoints: &'static str, reply: Reply, after: After) -> Row {
        Row {
            op: Op::Attach,
            failpoints,
            reply,
            after,
            tamper: Tamper::None,
        }
    }

    const fn tampered(failpoints: &'static str, tamper: Tamper) -> Row {
        Row {
            op: Op::Attach,
            failpoints,
            reply: Reply::Lost,
            after: After::Gone,
            tamper,
        }
    }

    const fn detach(failpoints: &'static str, reply: Reply) -> Row {
        Row {
            op: Op::Detach,
            failpoints,
            reply,
            after: After::Gone,
            tamper: Tamper::None,
        }
    }

    /// A detach aborted after its kernel work whose Detaching marks never reached the disk.
    const fn detach_marks_lost(failpoints: &'static str) -> Row {
        Row {
            tamper: Tamper::MarksLost,
            ..Row::detach(failpoints, Reply::Lost)
        }
    }

    /// `(name, action)` of every armed failpoint, in order; none for [`Op::AttachThenKill`].
    fn armed(&self) -> Vec<(&'static str, &'static str)> {
        self.failpoints
            .split(',')
            .filter(|item| !item.is_empty())
            .map(|item| {
                item.split_once('=')
                    .expect("failpoint entry is name=action")
            })
            .collect()
    }

    /// The failpoint that ends the operation and its action.
    fn fired(&self) -> (&'static str, &'static str) {
        *self.armed().last().expect("a row arms a failpoint")
    }

    /// Whether knid dies at the fault (a failpoint's abort, or the test's kill).
    fn aborts(&self) -> bool {
        self.op == Op::AttachThenKill || self.fired().1 == "abort"
    }
}

/// Group 1: Attach, aborted after each step boundary. Up to the completion mark the kernel work
/// is unfinished: rolled back. From it on the work is complete, Provisioning is durable and
/// Attached is not (it waits for the next flush): rolled forward, to what the lost reply said.
const ATTACH_ABORT: &[Row] = &[
    Row::attach("attach.recorded=abort", Reply::Lost, After::Gone),
    Row::attach("attach.pending=abort", Reply::Lost, After::Gone),
    Row::attach("attach.provisioning=abort", Reply::Lost, After::Gone),
    Row::attach("attach.guarded=abort", Reply::Lost, After::Gone),
    Row::attach("attach.veth_created=abort", Reply::Lost, After::Gone),
    Row::attach("attach.routed=abort", Reply::Lost, After::Gone),
    Row::attach("attach.completed=abort", Reply::Lost, After::Attached),
    Row::attach("attach.attached=abort", Reply::Lost, After::Attached),
];

/// Group 2: Attach, failing at each step boundary; a failure is rolled back before its reply,
/// even after the completion mark; the last one fails after Attached is recorded (a lost
/// reply).
const ATTACH_ERROR: &[Row] = &[
    Row::attach("attach.recorded=error", Reply::Failed, After::Gone),
    Row::attach("attach.pending=error", Reply::Failed, After::Gone),
    Row::attach("attach.provisioning=error", Reply::Failed, After::Gone),
    Row::attach("attach.guarded=error", Reply::Failed, After::Gone),
    Row::attach("attach.veth_created=error", Reply::Failed, After::Gone),
    Row::attach("attach.routed=error", Reply::Failed, After::Gone),
    Row::attach("attach.completed=error", Reply::Failed, After::Gone),
    Row::attach("attach.attached=error", Reply::Failed, After::Attached),
];

/// Group 3: The rollback of a failed attach, aborted after each of its steps. A failure after
/// the completion mark is durable before the undo starts: never rolled forward.
const ROLLBACK_ABORT: &[Row] = &[
    Row::attach(
        "attach.recorded=error,rollback.rolling_back=abort",
        Reply::Lost,
        After::Gone,
    ),
    Row::attach(
        "attach.routed=error,rollback.rolling_back=abort",
        Reply::Lost,
        After::Gone,
    ),
    Row::attach(
        "attach.routed=error,rollback.deleted=abort",
        Reply::Lost,
        After::Gone,
    ),
    Row::attach(
        "attach.completed=error,rollback.rolling_back=abort",
        Reply::Lost,
        After::Gone,
    ),
    Row::attach(
        "attach.completed=error,rollback.deleted=abort",
        Reply::Lost,
        After::Gone,
    ),
];

/// Group 6: Attach answered, then knid killed before Attached was flushed (the acknowledged
/// attach comes back by roll-forward, with the answered addresses); and complete attaches whose
/// kernel state changed before the restart (recovery verifies, so they are rolled back).
const ROLL_FORWARD: &[Row] = &[
    Row {
        op: Op::AttachThenKill,
        failpoints: "",
        reply: Reply::Ok,
        after: After::Attached,
        tamper: Tamper::None,
    },
    Row::tampered("attach.completed=abort", Tamper::PodAddress),
    Row::tampered("attach.attached=abort", Tamper::Unmarked),
];

/// Group 4: Detach aborted before its reply, and the reaper aborted after it. A veth's detach
/// flushes its Detaching marks while its kernel work runs: aborted before the kernel work, it
/// ends either way; aborted after it, its marks are durable or not and it is finished either
/// way; the row that loses them makes the second case.
const DETACH_ABORT: &[Row] = &[
    Row {
        after: After::GoneOrAttached,
        ..Row::detach("detach.detaching=abort", Reply::Lost)
    },
    Row::detach("detach.pod_end_found=abort", Reply::Lost),
    Row::detach("detach.retired=abort", Reply::Lost),
    Row::detach_marks_lost("detach.retired=abort"),
    Row::detach("detach.reaping=abort", Reply::Lost),
    Row::detach("reaper.deleted=abort", Reply::Ok),
    Row::detach("reaper.forgotten=abort", Reply::Ok),
];

/// Group 5: Detach failing before its reply.
const DETACH_ERROR: &[Row] = &[
    Row::detach("detach.detaching=error", Reply::Failed),
    Row::detach("detach.pod_end_found=error", Reply::Failed),
    Row::detach("detach.retired=error", Reply::Failed),
    Row::detach("detach.reaping=error", Reply::Failed),
];

const GROUPS: [&[Row]; 6] = [
    ATTACH_ABORT,
    ATTACH_ERROR,
    ROLLBACK_ABORT,
    DETACH_ABORT,
    DETACH_ERROR,
    ROLL_FORWARD,
];

#[test]
fn the_rows_cover_every_step_boundary_but_the_recovery_sweep() {
    let covered: BTreeSet<&str> = GROUPS
        .iter()
        .flat_map(|rows| rows.iter())
        .flat_map(|row| row.armed().into_iter().map(|(name, _)| name))
        .collect();
    let wanted: BTreeSet<&str> = knid_core::failpoint::NAMES
        .iter()
        .copied()
        .filter(|name| *name != "recovery.sweep" && !testkit::KIND_FAILPOINTS.contains(name))
        .collect();
    assert_eq!(covered, wanted, "crash rows vs knid's failpoints");
}

#[test]
fn attach_aborted_at_any_step_is_rolled_back_or_kept_by_recovery() {
    if crash_tests_enabled() {
        run_group("attach × abort", ATTACH_ABORT);
    }
}

#[test]
fn attach_failing_at_any_step_is_rolled_back_or_loses_only_its_reply() {
    if crash_tests_enabled() {
        run_group("attach × error", ATTACH_ERROR);
    }
}

#[test]
fn rollback_aborted_at_any_step_is_finished_by_recovery() {
    if crash_tests_enabled() {
        run_group("rollback × abort", ROLLBACK_ABORT);
    }
}

#[test]
fn detach_aborted_at_any_step_is_finished_by_recovery() {
    if crash_tests_enabled() {
        run_group("detach × abort", DETACH_ABORT);
    }
}

#[test]
fn detach_failing_at_any_step_is_finished_by_recovery() {
    if crash_tests_enabled() {
        run_group("detach × error", DETACH_ERROR);
    }
}

#[test]
fn an_answered_attach_survives_a_kill_and_only_a_verified_one_is_rolled_forward() {
    if crash_tests_enabled() {
        run_group("roll forward", ROLL_FORWARD);
    }
}

/// Clients attaching sandboxes when knid is killed.
const KILL_CLIENTS: usize = 4;
/// Attaches answered before the kill.
const KILL_AFTER: usize = 40;

#[test]
fn a_kill_amid_concurrent_attaches_keeps_every_answered_one_and_leaves_none_half_done() {
    if !crash_tests_enabled() {
        return;
    }
    let mut node = TestNode::start("");
    let answered = std::sync::Mutex::new(Vec::<pb::Sandbox>::new());
    let unanswered = std::sync::Mutex::new(Vec::<(String, std::path::PathBuf)>::new());
    let pid = node.pid();
    std::thread::scope(|scope| {
        for c in 0..KILL_CLIENTS {
            let (node, answered, unanswered) = (&node, &answered, &unanswered);
            scope.spawn(move || {
                let client = node.client();
                for i in 0.. {
                    let id = format!("kill-{c}-{i}");
                    let netns = node.netns(&id);
                    match client.attach(&testkit::attach_req(&id, &netns, "eth0"), RPC) {
                        Ok(sandbox) => answered.lock().expect("answers").push(sandbox),
                        Err(_) => {
                            unanswered.lock().expect("unanswered").push((id, netns));
                            return;
                        }
                    }
                }
            });
        }
        let started = Instant::now();
        while answered.lock().expect("answers").len() < KILL_AFTER {
            assert!(started.elapsed() < RPC, "attaches too slow");
            std::thread::sleep(Duration::from_millis(1));
        }
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).expect("SIGKILL knid");
    });
    node.wait_exit(DEATH);
    let answered = answered.into_inner().expect("answers");
    let unanswered = unanswered.into_inner().expect("unanswered");
    // What the kill left on disk: answered attaches whose Attached was not flushed yet.
    let store = node.open_store();
    let unflushed = answered
        .iter()
        .filter(|s| {
            store
                .attachment(&s.id, "eth0")
                .expect("read")
                .is_some_and(|a| a.state.enum_value_or_default() != AttachmentState::ATTACHED)
        })
        .count();
    drop(store);
    node.restart();
    for sandbox in &answered {
        let req = testkit::inspect_req(&sandbox.id);
        let found = node
            .client()
            .inspect(&req, RPC)
            .unwrap_or_else(|e| panic!("answered attach {} lost by the kill: {e}", sandbox.id));
        assert_eq!(found.state, "attached", "{}", sandbox.id);
        assert_eq!(found.interfaces, sandbox.interfaces, "{}", sandbox.id);
        testkit::assert_pod_side(Path::new(&sandbox.netns_path), &found.interfaces[0]);
        node.assert_host_side(&found.interfaces[0]);
    }
    // An unanswered attach is attached as recorded (rolled forward, a lost reply), or gone.
    let listed: BTreeSet<String> = node.list_ids().into_iter().collect();
    let mut kept = 0;
    for (id, netns) in &unanswered {
        if listed.contains(id) {
            kept += 1;
            let found = node.inspect(id);
            testkit::assert_pod_side(netns, &found.interfaces[0]);
            node.assert_host_side(&found.interfaces[0]);
        } else {
            testkit::wait_only_lo(netns);
        }
    }
    assert_eq!(
        listed.len(),
        answered.len() + kept,
        "List after recovery: {listed:?}"
    );
    let store = stop_and_check_store(&mut node);
    assert!(
        store
            .attachments
            .iter()
            .all(|(_, state)| *state == AttachmentState::ATTACHED),
        "{store:?}"
    );
    println!(
        "killed after {} answered attaches ({unflushed} of them not yet flushed: rolled \
         forward); {} unanswered: {kept} rolled forward, {} rolled back",
        answered.len(),
        unanswered.len(),
        unanswered.len() - kept
    );
    node.restart();
    for id in &listed {
        node.client()
            .detach(&testkit::detach_req(id), RPC)
            .expect("Detach after recovery");
    }
    node.assert_host_clean();
    node.wait_capacity_used("default", 0);
}

/// A detach writes its Detaching marks and its sandbox record's change one key at a time, then
/// flushes once: another thread's flush between two keys, then a crash, leaves the marks durable
/// and the sandbox record as it was. Made here in a stopped knid's store (the kernel untouched,
/// as before the detach's first kernel call): recovery must finish the detach, the sandbox
/// record's deletion included, and leave nothing.
#[test]
fn a_detach_crashed_with_only_its_marks_durable_is_finished_by_recovery() {
    if !testkit::privileged() {
        return;
    }
    let (mut node, netns, sandbox) = attached_node("prefix-0");
    let id = sandbox.id.as_str();
    stop_gracefully(&mut node);
    mark_detaching(&node, id, "eth0");
    // Still attached in the kernel: what recovery finds is a detach before its kernel work.
    testkit::assert_pod_side(&netns, &sandbox.interfaces[0]);
    node.restart();
    assert_gone(&node, id, &netns);
    assert_eq!(
        stop_and_check_store(&mut node),
        StoreSummary::default(),
        "store after recovery"
    );
}

/// The mark that makes start-up look for detaches ahead of their Detaching marks: durable once
/// a veth's detach ran (a kill after it finds it), removed by a clean stop (the next start-up,
/// the start-up budget's case, looks at nothing).
#[test]
fn a_veths_detach_leaves_the_overlap_mark_until_a_clean_stop() {
    if !testkit::privileged() {
        return;
    }
    let (mut node, netns, sandbox) = attached_node("overlap-mark");
    let id = sandbox.id.as_str();
    node.client()
        .detach(&testkit::detach_req(id), RPC)
        .expect("Detach");
    assert_gone(&node, id, &netns);
    nix::sys::signal::kill(node.pid(), nix::sys::signal::Signal::SIGKILL).expect("SIGKILL knid");
    node.wait_exit(DEATH);
    assert!(node.open_store().detach_overlap(), "the mark after a kill");
    node.restart();
    stop_gracefully(&mut node);
    assert!(
        !node.open_store().detach_overlap(),
        "the mark after a clean stop"
    );
}

/// The same prefix with two interfaces: a detach of the whole sandbox writes eth0's mark, then
/// eth1's, then the sandbox record's deletion, so the shortest prefix a crash can keep is eth0
/// Detaching with eth1 still Attached. Recovery must finish eth0 (its links and addresses gone)
/// and leave eth1 attached and whole, in the kernel and in Inspect; the Detach the caller
/// retries then finishes the sandbox.
#[test]
fn a_detach_crashed_with_one_of_two_marks_durable_finishes_that_interface_only() {
    if !testkit::privileged() {
        return;
    }
    let mut node = TestNode::start("");
    let id = "prefix-two";
    let netns = node.netns(id);
    let mut req = testkit::attach_req(id, &netns, "eth0");
    let mut second = req.interfaces[0].clone();
    "eth1".clone_into(&mut second.name);
    req.interfaces.push(second);
    let sandbox = node.client().attach(&req, RPC).expect("Attach");
    let [eth0, eth1] = sandbox.interfaces.as_slice() else {
        panic!("two interfaces: {:?}", sandbox.interfaces);
    };
    assert_eq!((eth0.name.as_str(), eth1.name.as_str()), ("eth0", "eth1"));
    assert_eq!(node.capacity_used("default"), 4);
    stop_gracefully(&mut node);
    mark_detaching(&node, id, "eth0");
    node.restart();
    testkit::wait_for("eth0 gone from the pod", testkit::SETTLE, || {
        testkit::link_in(&netns, "eth0").is_none()
    });
    node.wait_capacity_used("default", 2);
    let inspected = node.inspect(id);
    assert_eq!(inspected.interfaces.as_slice(), std::slice::from_ref(eth1));
    assert_eq!(node.list_ids(), [id]);
    // eth1 is untouched: its link with its addresses in the pod, its host end on the bridge.
    let pod = testkit::link_in(&netns, "eth1").expect("eth1 in the pod");
    assert!(pod.up, "{pod:?}");
    let addresses = pod_addresses(&netns, "eth1");
    assert_eq!(
        addresses.len(),
        2,
        "eth1's addresses in the pod: {addresses:?}"
    );
    assert_eq!(
        addresses,
        reported_addresses(eth1),
        "eth1's addresses in the pod"
    );
    node.assert_host_side(eth1);
    let host: Vec<String> = node.host_kn_links().into_iter().map(|l| l.name).collect();
    assert_eq!(
        host,
        [eth1.host_ifname.as_str()],
        "host links after recovery"
    );

    node.client()
        .detach(&testkit::detach_req(id), RPC)
        .expect("the Detach the caller retries");
    assert_gone(&node, id, &netns);
    assert_eq!(
        stop_and_check_store(&mut node),
        StoreSummary::default(),
        "store after the retried Detach"
    );
}

/// True when the crash tests may run: root (see [`testkit::privileged`]) and a knid built with
/// failpoints. Without the feature they skip loudly, or fail with `CI=true`.
fn crash_tests_enabled() -> bool {
    if !testkit::privileged() {
        return false;
    }
    if !testkit::failpoints_built() {
        return false;
    }
    no_core_dumps();
    true
}

/// Every row aborts knid at least once: keep the kernel from writing a core file per row into
/// the working directory (`core_pattern` is often plain `core`). Children inherit the limit.
fn no_core_dumps() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (_, hard) = getrlimit(Resource::RLIMIT_CORE).expect("getrlimit(RLIMIT_CORE)");
    setrlimit(Resource::RLIMIT_CORE, 0, hard).expect("setrlimit(RLIMIT_CORE)");
}

/// What one row did, for the matrix; filled as the row goes, so a failing row shows how far it
/// got.
#[derive(Debug, Default)]
struct Outcome {
    reply: String,
    exit: String,
    after: String,
}

/// Runs every row of a group (each on its own node), prints the matrix, and fails with the
/// matrix and every failure if any row failed.
fn run_group(group: &str, rows: &[Row]) {
    let started = Instant::now();
    let mut outcomes = Vec::with_capacity(rows.len());
    let mut failures = Vec::new();
    for (n, row) in rows.iter().enumerate() {
        let mut outcome = Outcome::default();
        let id = format!("crash-{n}");
        if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| {
            run_row(row, &id, &mut outcome);
        })) {
            let message = testkit::panic_message(payload.as_ref());
            let first_line: String = message
                .lines()
                .next()
                .unwrap_or_default()
                .chars()
                .take(MAX_CELL)
                .collect();
            outcome.after = format!("FAILED: {first_line}");
            failures.push(format!("{} ({id}): {message}", row.failpoints));
        }
        outcomes.push(outcome);
    }
    let table = matrix(group, rows, &outcomes, started.elapsed());
    println!("{table}");
    assert!(
        failures.is_empty(),
        "{table}\n{} row(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Runs one row on a fresh node: the faulted operation, then recovery, its convergence, the
/// store's invariants, and a retry that attaches and detaches the sandbox cleanly.
fn run_row(row: &Row, id: &str, outcome: &mut Outcome) {
    let mut answered = None;
    // The records a Tamper::MarksLost row rewinds the store to.
    let mut before_detach = None;
    let (mut node, netns) = match row.op {
        Op::Attach => {
            let node = TestNode::start_with("", &[(FAILPOINTS, row.failpoints)], &[]);
            let netns = node.netns(id);
            let result = node
                .client()
                .attach(&testkit::attach_req(id, &netns, "eth0"), RPC);
            outcome.reply = check_reply(row, result);
            (node, netns)
        }
        Op::AttachThenKill => {
            let (node, netns, sandbox) = attach_then_kill(id);
            outcome.reply = "ok; SIGKILL at once, Attached not yet flushed".to_owned();
            answered = Some(sandbox);
            (node, netns)
        }
        Op::Detach => {
            let mut node = TestNode::start("");
            let netns = node.netns(id);
            node.client()
                .attach(&testkit::attach_req(id, &netns, "eth0"), RPC)
                .expect("Attach before the failpoints are armed");
            stop_gracefully(&mut node);
            if row.tamper == Tamper::MarksLost {
                before_detach = Some(records_of(&node, id));
            }
            node.set_env(FAILPOINTS, Some(row.failpoints));
            node.restart();
            let result = node.client().detach(&testkit::detach_req(id), RPC);
            outcome.reply = check_reply(row, result);
            (node, netns)
        }
    };
    outcome.exit = check_fault_exit(&mut node, row);
    tamper(&node, id, &netns, row.tamper, before_detach.as_ref());
    // The kernel outlives knid: what the pod has now is what recovery must keep.
    let kernel_addresses = match row.after {
        After::Attached | After::GoneOrAttached => pod_addresses(&netns, "eth0"),
        After::Gone => Vec::new(),
    };
    node.set_env(FAILPOINTS, None);
    // A failed attach is rolled back before its reply, so it is checked on the daemon that failed
    // (still armed); everything else must converge by the restart's recovery.
    if row.aborts() {
        node.restart();
    } else if row.op == Op::Detach {
        stop_gracefully(&mut node);
        node.restart();
    }
    // Which way an operation that may end either way went: by List, then checked in full.
    let after = match row.after {
        After::GoneOrAttached if node.list_ids().is_empty() => After::Gone,
        After::GoneOrAttached => After::Attached,
        settled => settled,
    };
    let recovered = check_converged(&node, id, &netns, after, &kernel_addresses);
    if let (Some(answered), Some(recovered)) = (&answered, &recovered) {
        assert_eq!(
            recovered.interfaces, answered.interfaces,
            "the recovered attach differs from the answered one"
        );
    }
    let store = stop_and_check_store(&mut node);
    let want_records = match after {
        After::Gone | After::GoneOrAttached => StoreSummary::default(),
        After::Attached => StoreSummary {
            attachments: vec![(format!("{id}/eth0"), AttachmentState::ATTACHED)],
            sandboxes: 1,
            reservations: 2,
        },
    };
    assert_eq!(store, want_records, "store after recovery");
    node.restart();
    outcome.after = match (row.op, after, row.tamper) {
        (Op::Attach, After::Gone, Tamper::None) => "rolled back",
        (Op::Attach, After::Gone, Tamper::PodAddress) => {
            "pod address deleted before the restart: not verified, rolled back"
        }
        (Op::Attach, After::Gone, Tamper::Unmarked) => {
            "completion mark taken back before the restart: rolled back"
        }
        (Op::Attach, After::Attached, _) => "attached, same addresses",
        (Op::AttachThenKill, _, _) => "rolled forward: attached as answered",
        (Op::Detach, _, Tamper::MarksLost) => "attached on disk, links retired: detach finished",
        (Op::Detach, After::Attached, _) => "marks not flushed, kernel untouched: still attached",
        (Op::Detach, _, _) => "detach finished",
        (Op::Attach, After::Gone, Tamper::MarksLost) | (Op::Attach, After::GoneOrAttached, _) => {
            unreachable!("a detach's row")
        }
    }
    .to_owned();

    let req = testkit::attach_req(id, &netns, "eth0");
    let retried = node.client().attach(&req, RPC).expect("Attach retried");
    if let Some(recovered) = recovered {
        assert_eq!(retried, recovered, "retried Attach differs from Inspect");
    }
    let iface = &retried.interfaces[0];
    testkit::assert_pod_side(&netns, iface);
    node.assert_host_side(iface);
    assert_eq!(
        node.guards(),
        [(iface.host_ifname.clone(), iface.host_ifname.clone())],
        "the retry's guard"
    );
    assert_eq!(node.capacity_used("default"), 2, "addresses of the retry");
    node.client()
        .detach(&testkit::detach_req(id), RPC)
        .expect("Detach after the retry");
    assert_gone(&node, id, &netns);
    outcome.after.push_str("; retry ok, detach clean");
}

/// Tries that many times to kill knid between an Attach's reply and the next flush; a try that
/// finds Attached durable at the kill (sled's own periodic flush came first) is repeated.
const KILL_TRIES: usize = 3;

/// Attaches sandbox `id` on a new node and kills knid (SIGKILL) as soon as the answer is in;
/// checks in the store the kill left that Attached was not durable yet (else tries again on a
/// new node), so the row exercises the roll-forward. Returns the node (knid dead), the netns
/// and the answer.
fn attach_then_kill(id: &str) -> (TestNode, std::path::PathBuf, pb::Sandbox) {
    for _ in 0..KILL_TRIES {
        let (mut node, netns, sandbox) = attached_node(id);
        nix::sys::signal::kill(node.pid(), nix::sys::signal::Signal::SIGKILL)
            .expect("SIGKILL knid");
        node.wait_exit(DEATH);
        let store = node.open_store();
        let state = store
            .attachment(id, "eth0")
            .expect("read the attachment")
            .expect("the intent was durable before the answer")
            .state
            .enum_value_or_default();
        drop(store);
        match state {
            AttachmentState::PROVISIONING => return (node, netns, sandbox),
            AttachmentState::ATTACHED => {
                println!("{id}: Attached was flushed before the kill; trying again");
            }
            other => panic!("{id}: {other:?} in the store after an answered attach"),
        }
    }
    panic!("{KILL_TRIES} kills all came after Attached was flushed");
}

/// A new node with sandbox `id` attached (`eth0`): the node, the sandbox's netns and the answer.
fn attached_node(id: &str) -> (TestNode, std::path::PathBuf, pb::Sandbox) {
    let node = TestNode::start("");
    let netns = node.netns(id);
    let sandbox = node
        .client()
        .attach(&testkit::attach_req(id, &netns, "eth0"), RPC)
        .expect("Attach");
    (node, netns, sandbox)
}

/// Writes what a detach's first key leaves in the store of a stopped knid: attachment
/// `ifname` of sandbox `id` marked Detaching (it must be Attached), the sandbox record as it
/// was.
fn mark_detaching(node: &TestNode, id: &str, ifname: &str) {
    let store = node.open_store();
    let mut rec = store
        .attachment(id, ifname)
        .expect("read the attachment")
        .unwrap_or_else(|| panic!("{id}/{ifname} is recorded"));
    assert_eq!(rec.state.enum_value_or_default(), AttachmentState::ATTACHED);
    rec.state = protobuf::EnumOrUnknown::new(AttachmentState::DETACHING);
    let mut batch = knid_store::Batch::new();
    batch.put_attachment(rec);
    store.commit(&batch).expect("write the Detaching mark");
    assert!(
        store.sandbox(id).expect("read the sandbox").is_some(),
        "the sandbox record stays, as the crash left it"
    );
}

/// The attachment (`eth0`) and sandbox records of sandbox `id` in a stopped knid's store.
fn records_of(
    node: &TestNode,
    id: &str,
) -> (knid_store::AttachmentRecord, knid_store::SandboxRecord) {
    let store = node.open_store();
    let att = store
        .attachment(id, "eth0")
        .expect("read the attachment")
        .unwrap_or_else(|| panic!("{id}/eth0 is recorded"));
    let sandbox = store
        .sandbox(id)
        .expect("read the sandbox")
        .unwrap_or_else(|| panic!("{id} is recorded"));
    (att, sandbox)
}

/// Changes the kernel (or the store) behind knid's back, between the fault and the restart.
/// `before` is what the store held before a detach, for [`Tamper::MarksLost`].
fn tamper(
    node: &TestNode,
    id: &str,
    netns: &Path,
    how: Tamper,
    before: Option<&(knid_store::AttachmentRecord, knid_store::SandboxRecord)>,
) {
    match how {
        Tamper::None => {}
        Tamper::MarksLost => {
            let (att, sandbox) = before.expect("the records before the detach");
            // The kernel work is done: the host end off its bridge in the reaper's group, the
            // pod end down, the guard still on the retired link (the reaper removes it with the
            // link).
            let host = node.host_kn_links();
            let [link] = host.as_slice() else {
                panic!("{id}: host links {host:?}");
            };
            assert_eq!(link.name, att.host_ifname);
            assert!(
                link.group != 0 && link.controller.is_none(),
                "{id}: host link not retired: {link:?}"
            );
            let pod = testkit::link_in(netns, "eth0").expect("the pod end stays until reaped");
            assert!(!pod.up, "{id}: pod end still up: {pod:?}");
            assert_eq!(
                node.guards(),
                [(att.host_ifname.clone(), att.host_ifname.clone())],
                "{id}: the retired link's guard"
            );
            let store = node.open_store();
            assert!(
                store.detach_overlap(),
                "the store must say a detach may have run ahead of its marks"
            );
            let mut batch = knid_store::Batch::new();
            batch.put_attachment(att.clone());
            batch.put_sandbox(sandbox.clone());
            store.commit(&batch).expect("rewind the store");
        }
        Tamper::PodAddress => {
            let mut pod = testkit::rtnl_in(netns);
            let eth0 = pod
                .link_by_name("eth0")
                .expect("look up eth0")
                .expect("eth0 in the pod");
            let v4 = pod_addresses(netns, "eth0")
                .into_iter()
                .find(|a| a.addr().is_ipv4())
                .expect("the pod's IPv4 address");
            pod.delete_address(eth0.index, v4)
                .expect("delete the pod's IPv4 address");
        }
        Tamper::Unmarked => {
            let host = node.host_kn_links();
            let [link] = host.as_slice() else {
                panic!("{id}: host links {host:?}");
            };
            node.set_host_link_alias(&link.name, &format!("{}:attaching", node_mark(node)));
        }
    }
}

/// The link mark of a node whose knid is not running: read from its store.
fn node_mark(node: &TestNode) -> String {
    let store = node.open_store();
    format!("knid:{}", store.id())
}

/// Checks the reply of the faulted RPC against the row; returns it for the matrix.
fn check_reply<T: std::fmt::Debug>(row: &Row, result: Result<T, ClientError>) -> String {
    let (name, _) = row.fired();
    match (row.reply, result) {
        (Reply::Lost, Err(ClientError::Transport(e))) => format!("no reply ({e})"),
        (Reply::Failed, Err(ClientError::Rpc { code, message }))
            if code == ttrpc::Code::INTERNAL && message.contains(&format!("failpoint {name}")) =>
        {
            format!("Internal: {message}")
        }
        (Reply::Ok, Ok(_)) => "ok".to_owned(),
        (want, got) => panic!("{}: expected reply {want:?}, got {got:?}", row.failpoints),
    }
}

/// Checks knid's fate at the fault: SIGABRT after logging the aborting failpoint, or still
/// running after logging the failing one(s). Returns it for the matrix.
fn check_fault_exit(node: &mut TestNode, row: &Row) -> String {
    if row.op == Op::AttachThenKill {
        // Killed and waited for by attach_then_kill.
        return "SIGKILL".to_owned();
    }
    let status = if row.aborts() {
        let status = node.wait_exit(DEATH);
        assert_eq!(
            status.signal(),
            Some(SIGABRT),
            "{}: knid exit status {status}",
            row.failpoints
        );
        format!("{status}")
    } else {
        std::thread::sleep(STILL_RUNNING);
        assert!(
            node.is_running(),
            "{}: knid died at a failing failpoint",
            row.failpoints
        );
        "kept running".to_owned()
    };
    let log = node.log_text();
    for (name, action) in row.armed() {
        let line = match action {
            "abort" => format!("failpoint {name}: aborting"),
            _ => format!("failpoint {name}: failing the operation"),
        };
        assert!(log.contains(&line), "knid's log lacks {line:?}");
    }
    status
}

/// Checks the sandbox converged to `after`. For an attached sandbox it must carry the addresses
/// the pod had in the kernel, be correct on both sides, hold two addresses, and a repeated
/// Attach must return it unchanged; it is returned.
fn check_converged(
    node: &TestNode,
    id: &str,
    netns: &Path,
    after: After,
    kernel_addresses: &[IpNet],
) -> Option<pb::Sandbox> {
    match after {
        After::Gone => {
            assert_gone(node, id, netns);
            None
        }
        After::Attached | After::GoneOrAttached => {
            let sandbox = node.inspect(id);
            assert_eq!(sandbox.state, "attached", "{sandbox:?}");
            assert_eq!(sandbox.interfaces.len(), 1, "{sandbox:?}");
            let iface = &sandbox.interfaces[0];
            assert_eq!(iface.state, "attached", "{iface:?}");
            assert_eq!(
                reported_addresses(iface),
                kernel_addresses,
                "addresses after recovery"
            );
            testkit::assert_pod_side(netns, iface);
            node.assert_host_side(iface);
            // Never an attached pod without its source guard.
            assert_eq!(
                node.guards(),
                [(iface.host_ifname.clone(), iface.host_ifname.clone())],
                "the guards after recovery"
            );
            assert_eq!(node.capacity_used("default"), 2);
            assert_eq!(node.list_ids(), [id]);
            let again = node
                .client()
                .attach(&testkit::attach_req(id, netns, "eth0"), RPC)
                .expect("Attach repeated after the fault");
            assert_eq!(again, sandbox, "repeated Attach differs from Inspect");
            Some(sandbox)
        }
    }
}

/// Nothing of sandbox `id` is left: unknown to Inspect and List, no host link, no bridge port,
/// no address reserved, only `lo` in its netns.
fn assert_gone(node: &TestNode, id: &str, netns: &Path) {
    node.assert_not_found(id);
    assert!(node.list_ids().is_empty(), "List: {:?}", node.list_ids());
    node.assert_host_clean();
    assert!(node.bridge_ports(BRIDGE).is_empty());
    node.wait_capacity_used("default", 0);
    // The reaper removes a detached link's guard right after it forgot the record.
    testkit::wait_for("the guards to go", Duration::from_secs(10), || {
        node.guards().is_empty()
    });
    testkit::wait_only_lo(netns);
}

/// The global addresses of the pod's `ifname` in the kernel, sorted.
fn pod_addresses(netns: &Path, ifname: &str) -> Vec<IpNet> {
    let mut addresses: Vec<IpNet> = testkit::addresses_in(netns, ifname)
        .into_iter()
        .filter(|a| !testkit::is_link_local(a.addr()))
        .collect();
    addresses.sort();
    addresses
}

/// The addresses knid reports for an interface, sorted.
fn reported_addresses(iface: &pb::InterfaceResult) -> Vec<IpNet> {
    let mut recorded: Vec<IpNet> = iface
        .ips
        .iter()
        .map(|ip| ip.address.parse().expect("address is a CIDR"))
        .collect();
    recorded.sort();
    recorded
}

fn stop_gracefully(node: &mut TestNode) {
    let status = node.stop();
    assert_eq!(status.code(), Some(0), "knid exit status {status}");
}

/// The group's matrix as an aligned text table.
fn matrix(group: &str, rows: &[Row], outcomes: &[Outcome], took: Duration) -> String {
    let mut lines = vec![[
        "step".to_owned(),
        "action".to_owned(),
        "RPC outcome".to_owned(),
        "knid".to_owned(),
        "after recovery".to_owned(),
    ]];
    for (row, outcome) in rows.iter().zip(outcomes) {
        let armed = row.armed();
        let op = match row.op {
            Op::Attach | Op::AttachThenKill => "attach",
            Op::Detach => "detach",
        };
        let mut steps: Vec<&str> = armed.iter().map(|(name, _)| *name).collect();
        let mut actions: Vec<&str> = armed.iter().map(|(_, action)| *action).collect();
        if row.op == Op::AttachThenKill {
            steps.push("answered");
            actions.push("kill");
        }
        match row.tamper {
            Tamper::None => {}
            Tamper::PodAddress => steps.push("pod address deleted"),
            Tamper::Unmarked => steps.push("mark set back to attaching"),
            Tamper::MarksLost => steps.push("Detaching marks lost"),
        }
        lines.push([
            steps.join(" → "),
            format!("{op}: {}", actions.join(" → ")),
            outcome.reply.clone(),
            outcome.exit.clone(),
            outcome.after.clone(),
        ]);
    }
    let mut widths = [0; 5];
    for line in &lines {
        for (width, cell) in widths.iter_mut().zip(line) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = format!("\n==== crash matrix: {group} ({took:.1?}) ====\n");
    for (i, line) in lines.iter().enumerate() {
        let cells: Vec<String> = line
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        out.push_str(cells.join(" | ").trim_end());
        out.push('\n');
        if i == 0 {
            let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
            out.push_str(&rule.join("-+-"));
            out.push('\n');
        }
    }
    out
}
