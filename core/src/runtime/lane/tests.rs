use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use crossbeam_channel::{unbounded, Sender};

use super::*;

/// The test lanes' queue depth.
const DEPTH: usize = 4;

/// What ran on a test lane.
#[derive(Default)]
struct Seen {
    /// (job, name of the thread it ran on).
    ran: Mutex<Vec<(u32, String)>>,
    running: AtomicUsize,
    most_at_once: AtomicUsize,
}

impl Seen {
    fn jobs(&self) -> Vec<u32> {
        self.ran.acquire().iter().map(|(job, _)| *job).collect()
    }

    fn on_worker(&self) -> usize {
        let ran = self.ran.acquire();
        ran.iter().filter(|(_, t)| t == "test-lane").count()
    }
}

/// A lane whose jobs take `job_time` and count how many run at once; its resource counts the
/// jobs it served.
fn lane(idle_exit: Duration, job_time: Duration) -> (Sender<u32>, Arc<Lane<u32, u64>>, Arc<Seen>) {
    let (tx, rx) = unbounded();
    let seen = Arc::new(Seen::default());
    let jobs = Arc::clone(&seen);
    let run: Run<u32, u64> = Box::new(move |served, job| {
        let now = jobs.running.fetch_add(1, Ordering::SeqCst) + 1;
        jobs.most_at_once.fetch_max(now, Ordering::SeqCst);
        std::thread::sleep(job_time);
        *served += 1;
        let thread = std::thread::current().name().unwrap_or_default().to_owned();
        jobs.ran.acquire().push((job, thread));
        jobs.running.fetch_sub(1, Ordering::SeqCst);
    });
    let lane = Lane::new("test-lane".into(), rx, DEPTH, idle_exit, 0, run);
    (tx, lane, seen)
}

/// What a shard's caller does: here if the lane is idle, else queued.
fn submit(tx: &Sender<u32>, lane: &Arc<Lane<u32, u64>>, job: u32) {
    if let Err(job) = lane.run_here(job) {
        lane.queue(tx, job, Duration::from_secs(10)).unwrap();
    }
}

fn wait_until(what: &str, done: impl Fn() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < Duration::from_secs(10), "{what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn worker_running<J: Send + 'static, R: Send + 'static>(lane: &Lane<J, R>) -> bool {
    lane.state.acquire().worker
}

#[test]
fn a_job_on_an_idle_lane_runs_in_its_caller_and_starts_no_thread() {
    let (tx, lane, seen) = lane(Duration::from_millis(20), Duration::ZERO);
    for job in 0..3 {
        submit(&tx, &lane, job);
    }
    assert_eq!(seen.jobs(), [0, 1, 2]);
    assert_eq!(seen.on_worker(), 0);
    assert!(!worker_running(&lane));
    assert_eq!(
        lane.state.acquire().resource,
        Some(3),
        "the resource served all three"
    );
}

#[test]
fn a_queued_job_starts_the_worker_which_ends_when_idle() {
    let (tx, lane, seen) = lane(Duration::from_millis(20), Duration::ZERO);
    lane.queue(&tx, 7, Duration::from_secs(1)).unwrap();
    wait_until("the job ran", || seen.jobs() == [7]);
    assert_eq!(seen.on_worker(), 1);
    wait_until("the idle worker ended", || !worker_running(&lane));
    lane.queue(&tx, 8, Duration::from_secs(1)).unwrap();
    wait_until("the next job ran on a new worker", || seen.on_worker() == 2);
    drop(tx);
    lane.close();
    lane.join();
    assert!(!worker_running(&lane));
}

#[test]
fn jobs_run_one_at_a_time_in_their_senders_order() {
    // Jobs long enough to overlap: callers find the lane busy and queue, the worker ends in the
    // gaps, and jobs run both in callers and on the worker.
    let (tx, lane, seen) = lane(Duration::from_micros(300), Duration::from_micros(50));
    let senders: Vec<_> = (0..4u32)
        .map(|t| {
            let (tx, lane) = (tx.clone(), Arc::clone(&lane));
            std::thread::spawn(move || {
                for i in 0..200 {
                    submit(&tx, &lane, t * 1000 + i);
                    if i % 10 == 0 {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
            })
        })
        .collect();
    for s in senders {
        s.join().unwrap();
    }
    wait_until("every job ran", || seen.jobs().len() == 800);
    drop(tx);
    lane.close();
    lane.join();
    assert_eq!(seen.most_at_once.load(Ordering::SeqCst), 1);
    let on_worker = seen.on_worker();
    assert!(
        on_worker > 0 && on_worker < 800,
        "{on_worker} of 800 jobs on the worker: some should run in their callers"
    );
    let jobs = seen.jobs();
    for t in 0..4 {
        let mine: Vec<u32> = jobs.iter().copied().filter(|j| j / 1000 == t).collect();
        assert!(
            mine.windows(2).all(|w| w[0] < w[1]),
            "sender {t} out of order"
        );
    }
    assert_eq!(lane.state.acquire().resource, Some(800));
}

#[test]
fn a_closed_lane_runs_nothing_in_callers_and_join_waits_for_a_running_job() {
    let (tx, lane, seen) = lane(Duration::from_millis(20), Duration::from_millis(50));
    let running = {
        let (tx, lane) = (tx.clone(), Arc::clone(&lane));
        std::thread::spawn(move || submit(&tx, &lane, 1))
    };
    wait_until("the job started", || {
        seen.running.load(Ordering::SeqCst) == 1
    });
    lane.close();
    assert_eq!(lane.run_here(2), Err(2));
    drop(tx);
    lane.join();
    assert_eq!(
        seen.jobs(),
        [1],
        "join returned before the running job was done"
    );
    running.join().unwrap();
}

#[test]
fn a_panicking_job_gives_the_resource_back_and_the_worker_goes_on() {
    let (tx, rx) = unbounded();
    let run: Run<u32, u64> = Box::new(|served, job| {
        *served += 1;
        assert!(job != 0, "job 0 panics");
    });
    let lane = Lane::new(
        "test-lane".into(),
        rx,
        DEPTH,
        Duration::from_millis(20),
        0,
        run,
    );
    let caught = catch_unwind(AssertUnwindSafe(|| lane.run_here(0)));
    assert!(caught.is_err());
    assert_eq!(lane.state.acquire().resource, Some(1));
    lane.queue(&tx, 0, Duration::from_secs(1)).unwrap();
    lane.queue(&tx, 1, Duration::from_secs(1)).unwrap();
    wait_until("both queued jobs ran", || {
        lane.state.acquire().resource == Some(3)
    });
    assert!(worker_running(&lane), "the worker ended with the panic");
}

#[test]
fn a_full_lane_makes_its_sender_wait_for_room_until_its_time_is_up() {
    // Each job holds the lane for 100 ms: one runs on the worker, DEPTH - 1 wait behind it.
    let (tx, lane, seen) = lane(Duration::from_millis(20), Duration::from_millis(100));
    for job in 0..DEPTH as u32 {
        lane.queue(&tx, job, Duration::from_secs(1)).unwrap();
    }
    assert_eq!(lane.state.acquire().queued, DEPTH);
    match lane.queue(&tx, 99, Duration::from_millis(10)) {
        Err(SendTimeoutError::Timeout(99)) => {}
        other => panic!("a full lane took a job: {other:?}"),
    }
    assert_eq!(
        lane.state.acquire().queued,
        DEPTH,
        "the refused job was counted"
    );
    // Room comes as the running job ends: a sender that may wait long enough gets in.
    lane.queue(&tx, 4, Duration::from_secs(5)).unwrap();
    wait_until("every queued job ran", || seen.jobs().len() == DEPTH + 1);
    assert_eq!(seen.jobs(), [0, 1, 2, 3, 4]);
    assert_eq!(seen.most_at_once.load(Ordering::SeqCst), 1);
    assert!(!seen.jobs().contains(&99));
}
