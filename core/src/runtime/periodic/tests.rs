use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::*;

fn counter() -> (Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let rounds = Arc::new(AtomicUsize::new(0));
    (Arc::clone(&rounds), rounds)
}

fn wait_for(rounds: &AtomicUsize, at_least: usize) {
    let started = Instant::now();
    while rounds.load(Ordering::SeqCst) < at_least {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{} round(s) after 10 s, {at_least} expected",
            rounds.load(Ordering::SeqCst)
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn jobs_share_one_thread_and_run_until_stop() {
    let periodic = Periodic::start("knid-test-jobs").unwrap();
    let (fast, fast_seen) = counter();
    let (slow, slow_seen) = counter();
    periodic.every("fast", Duration::from_millis(1), move |_| {
        fast.fetch_add(1, Ordering::SeqCst);
    });
    periodic.every("slow", Duration::from_millis(20), move |_| {
        slow.fetch_add(1, Ordering::SeqCst);
    });
    wait_for(&fast_seen, 5);
    wait_for(&slow_seen, 2);
    periodic.stop();
    let after = (
        fast_seen.load(Ordering::SeqCst),
        slow_seen.load(Ordering::SeqCst),
    );
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(
        (
            fast_seen.load(Ordering::SeqCst),
            slow_seen.load(Ordering::SeqCst)
        ),
        after,
        "a round ran after stop"
    );
}

#[test]
fn stop_wakes_a_long_sleep_and_a_round_sees_it() {
    // Asleep for an hour, or for good with no job due: both stop at once (else this hangs).
    let periodic = Periodic::start("knid-test-sleeper").unwrap();
    periodic.every("hourly", Duration::from_secs(3600), |_| {});
    periodic.stop();
    Periodic::start("knid-test-idle").unwrap().stop();

    let periodic = Periodic::start("knid-test-round").unwrap();
    let (started, started_seen) = counter();
    let (saw_stop, saw_stop_seen) = counter();
    periodic.every("long", Duration::from_millis(1), move |stop| {
        started.fetch_add(1, Ordering::SeqCst);
        while !stop.asked() {
            std::thread::sleep(Duration::from_millis(1));
        }
        saw_stop.fetch_add(1, Ordering::SeqCst);
    });
    wait_for(&started_seen, 1);
    periodic.stop();
    assert_eq!(saw_stop_seen.load(Ordering::SeqCst), 1);
}

#[test]
fn a_woken_job_runs_while_it_asks_again_then_sleeps_until_woken() {
    let periodic = Periodic::start("knid-test-woken").unwrap();
    let (rounds, seen) = counter();
    let wake = periodic.when_woken("woken", Duration::from_millis(1), move |_| {
        // Three rounds in a row, then asleep.
        if rounds.fetch_add(1, Ordering::SeqCst) % 3 == 2 {
            Then::Sleep
        } else {
            Then::Again
        }
    });
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(seen.load(Ordering::SeqCst), 0, "ran before it was woken");
    wake.wake();
    wait_for(&seen, 3);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(seen.load(Ordering::SeqCst), 3, "ran on after Sleep");
    wake.wake();
    wait_for(&seen, 6);
    periodic.stop();
}

#[test]
fn a_panicking_job_stops_alone() {
    let periodic = Periodic::start("knid-test-panic").unwrap();
    let (rounds, seen) = counter();
    periodic.every("panicky", Duration::from_millis(1), |_| panic!("round"));
    periodic.every("steady", Duration::from_millis(1), move |_| {
        rounds.fetch_add(1, Ordering::SeqCst);
    });
    wait_for(&seen, 10);
    periodic.stop();
}

/// `run_due`'s caller: waits on the read end of a socket pair for the time `run_due` gave, as
/// knid's API server does in its epoll wait, runs the due rounds, and counts its waits. Returns
/// once `run_due` says the jobs stopped and the bell rang.
fn run_due_on_a_socket(
    periodic: Arc<Periodic>,
    waits: Arc<AtomicUsize>,
) -> std::thread::JoinHandle<()> {
    use std::io::Read;
    use std::os::fd::AsFd;
    let (mut read, write) = std::os::unix::net::UnixStream::pair().unwrap();
    read.set_nonblocking(true).unwrap();
    periodic.ring_on(write.into());
    std::thread::spawn(move || loop {
        let next = periodic.run_due();
        if next.is_none() && periodic.shared.stop.asked() {
            return;
        }
        waits.fetch_add(1, Ordering::SeqCst);
        let timeout = match next {
            Some(next) => nix::poll::PollTimeout::try_from(
                next.saturating_duration_since(Instant::now()).as_millis() as u64 + 1,
            )
            .unwrap(),
            None => nix::poll::PollTimeout::NONE,
        };
        let mut fds = [nix::poll::PollFd::new(
            read.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        nix::poll::poll(&mut fds, timeout).unwrap();
        let mut drained = [0u8; 64];
        while read.read(&mut drained).is_ok_and(|n| n > 0) {}
    })
}

#[test]
fn run_due_runs_the_jobs_on_its_caller_and_a_wake_rings_the_callers_bell() {
    let periodic = Arc::new(Periodic::new());
    let (rounds, seen) = counter();
    let (waits, waits_seen) = counter();
    let caller = std::thread::current().id();
    let ran_on = Arc::new(Mutex::new(None));
    let wake = periodic.when_woken("woken", Duration::from_secs(3600), {
        let ran_on = Arc::clone(&ran_on);
        move |_| {
            *ran_on.lock().unwrap() = Some(std::thread::current().id());
            rounds.fetch_add(1, Ordering::SeqCst);
            Then::Sleep
        }
    });
    periodic.every("hourly", Duration::from_secs(3600), |_| {});
    let runner = run_due_on_a_socket(Arc::clone(&periodic), waits);
    // Asleep for an hour: only the wake-up's byte can end the wait.
    wait_for(&waits_seen, 1);
    assert_eq!(seen.load(Ordering::SeqCst), 0, "ran before it was woken");
    wake.wake();
    wait_for(&seen, 1);
    let ran = ran_on.lock().unwrap().expect("ran");
    assert_ne!(ran, caller, "the round ran on the test thread");
    assert_eq!(
        Some(ran),
        Some(runner.thread().id()),
        "not on run_due's caller"
    );
    wake.wake();
    wait_for(&seen, 2);
    // stop() returns at once (no thread to join) and rings the bell: run_due's caller learns
    // of it at once.
    periodic.stop();
    runner.join().unwrap();
}
