use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use crossbeam_channel::{bounded, Sender};

use super::*;
use crate::error::Error;

/// What the workers of a test lane saw.
#[derive(Default)]
struct Seen {
    jobs: Mutex<Vec<u32>>,
    started: AtomicUsize,
    running: AtomicUsize,
    most_at_once: AtomicUsize,
}

fn lane(idle_exit: Duration, capacity: usize) -> (Sender<u32>, Arc<Lane<u32>>, Arc<Seen>) {
    let (tx, rx) = bounded(capacity);
    let seen = Arc::new(Seen::default());
    let workers = Arc::clone(&seen);
    let start: StartWorker<u32> = Box::new(move |lane| {
        let seen = Arc::clone(&workers);
        seen.started.fetch_add(1, Ordering::SeqCst);
        Ok(std::thread::spawn(move || {
            let now = seen.running.fetch_add(1, Ordering::SeqCst) + 1;
            seen.most_at_once.fetch_max(now, Ordering::SeqCst);
            while let Some(job) = lane.next_job() {
                seen.jobs.acquire().push(job);
            }
            seen.running.fetch_sub(1, Ordering::SeqCst);
        }))
    });
    (tx, Lane::new(rx, idle_exit, start), seen)
}

fn send(tx: &Sender<u32>, lane: &Arc<Lane<u32>>, job: u32) {
    tx.send(job).unwrap();
    lane.ensure_worker();
}

fn wait_until(what: &str, done: impl Fn() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < Duration::from_secs(10), "{what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn no_worker_until_a_job_and_none_after_the_idle_time() {
    let (tx, lane, seen) = lane(Duration::from_millis(20), 8);
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(seen.started.load(Ordering::SeqCst), 0);
    send(&tx, &lane, 1);
    wait_until("the job ran", || seen.jobs.acquire().len() == 1);
    wait_until("the idle worker ended", || {
        seen.running.load(Ordering::SeqCst) == 0
    });
    send(&tx, &lane, 2);
    wait_until("the second job ran", || seen.jobs.acquire().len() == 2);
    assert_eq!(seen.started.load(Ordering::SeqCst), 2);
    drop(tx);
    lane.join();
    assert_eq!(seen.running.load(Ordering::SeqCst), 0);
}

#[test]
fn jobs_run_in_order_by_one_worker_at_a_time_across_idle_exits() {
    // An idle time about as long as the gaps between jobs: workers end while jobs keep coming.
    let (tx, lane, seen) = lane(Duration::from_micros(200), 4);
    let senders: Vec<_> = (0..4u32)
        .map(|t| {
            let (tx, lane) = (tx.clone(), Arc::clone(&lane));
            std::thread::spawn(move || {
                for i in 0..300 {
                    send(&tx, &lane, t * 1000 + i);
                    if i % 7 == 0 {
                        std::thread::sleep(Duration::from_micros(300));
                    }
                }
            })
        })
        .collect();
    for s in senders {
        s.join().unwrap();
    }
    // And one sender with gaps past the idle time: the worker ends between its jobs.
    for i in 0..5 {
        send(&tx, &lane, 4000 + i);
        std::thread::sleep(Duration::from_millis(2));
    }
    drop(tx);
    wait_until("every job ran", || seen.jobs.acquire().len() == 1205);
    lane.join();
    assert_eq!(seen.most_at_once.load(Ordering::SeqCst), 1);
    assert!(
        seen.started.load(Ordering::SeqCst) > 1,
        "no worker ever ended"
    );
    // Each sender's jobs in the order it sent them.
    let jobs = seen.jobs.acquire();
    for t in 0..5 {
        let mine: Vec<u32> = jobs.iter().copied().filter(|j| j / 1000 == t).collect();
        assert!(
            mine.windows(2).all(|w| w[0] < w[1]),
            "sender {t} out of order"
        );
    }
}

#[test]
fn jobs_no_worker_can_take_are_dropped() {
    let (tx, rx) = bounded::<Sender<()>>(4);
    let start: StartWorker<Sender<()>> = Box::new(|_| Err(Error::Unavailable("no threads".into())));
    let lane = Lane::new(rx, Duration::from_millis(20), start);
    let (reply, replied) = bounded::<()>(1);
    tx.send(reply).unwrap();
    lane.ensure_worker();
    // The job, holding its reply channel, is gone: whoever waits on it is told at once.
    assert!(replied.recv_timeout(Duration::from_secs(1)).is_err());
    assert!(rx_is_empty(&lane));
}

fn rx_is_empty<J>(lane: &Lane<J>) -> bool {
    lane.jobs.is_empty()
}
