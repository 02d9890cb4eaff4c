use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::*;

#[test]
fn rounds_run_until_stop_and_stop_wakes_a_long_sleep() {
    let rounds = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&rounds);
    let periodic = Periodic::every("knid-test-rounds", Duration::from_millis(1), move |_| {
        counted.fetch_add(1, Ordering::SeqCst);
    })
    .unwrap();
    while rounds.load(Ordering::SeqCst) < 3 {
        std::thread::sleep(Duration::from_millis(1));
    }
    periodic.stop();
    let after = rounds.load(Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(
        rounds.load(Ordering::SeqCst),
        after,
        "a round ran after stop"
    );

    // A thread asleep for an hour stops at once (without the wake-up this test hangs).
    Periodic::every("knid-test-sleeper", Duration::from_secs(3600), |_| {})
        .unwrap()
        .stop();
}

#[test]
fn a_body_sees_the_stop() {
    let (seen_tx, seen) = bounded(1);
    let periodic = Periodic::run("knid-test-body", move |stop| {
        while !stop.asked() {
            std::thread::sleep(Duration::from_millis(1));
        }
        seen_tx.send(()).unwrap();
    })
    .unwrap();
    periodic.stop();
    assert!(seen.try_recv().is_ok(), "the body did not see the stop");
}
