use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use super::*;

#[test]
fn lone_caller_flushes_every_time() {
    let group = GroupFlush::default();
    for _ in 0..3 {
        group.sync(|| Ok::<(), ()>(())).unwrap();
    }
    assert_eq!(group.flushes(), 3);
}

#[test]
fn callers_arriving_during_a_flush_share_the_next_one() {
    const THREADS: usize = 8;
    let group = Arc::new(GroupFlush::default());
    let ran = Arc::new(AtomicU64::new(0));
    let start = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let (group, ran, start) = (group.clone(), ran.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                group
                    .sync(|| {
                        ran.fetch_add(1, Ordering::SeqCst);
                        thread::sleep(Duration::from_millis(100));
                        Ok::<(), ()>(())
                    })
                    .unwrap();
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let flushes = ran.load(Ordering::SeqCst);
    assert_eq!(group.flushes(), flushes);
    assert!(
        flushes < THREADS as u64,
        "{flushes} flushes for {THREADS} callers"
    );
}

#[test]
fn failed_flush_is_reported_and_the_next_caller_flushes_again() {
    let group = GroupFlush::default();
    assert_eq!(group.sync(|| Err("disk")), Err("disk"));
    assert_eq!(group.flushes(), 0);
    let mut ran = false;
    group
        .sync(|| {
            ran = true;
            Ok::<(), &str>(())
        })
        .unwrap();
    assert!(ran);
    assert_eq!(group.flushes(), 1);
}

/// Asks for two soon tickets and hands both back: the first must be alone, the second not.
fn lone_then_beside(group: &GroupFlush, when: &str) {
    let (_, alone) = group.ticket_soon();
    assert!(alone, "a lone request {when}");
    let (_, beside) = group.ticket_soon();
    assert!(!beside, "a request beside an outstanding one {when}");
    group.done_soon();
    group.done_soon();
}

#[test]
fn a_soon_ticket_is_alone_unless_another_is_outstanding_whether_or_not_a_flush_runs() {
    let group = GroupFlush::default();
    lone_then_beside(&group, "with no flush running");
    let ticket = group.ticket();
    group
        .wait(ticket, || -> Result<(), ()> {
            // A lone request still asks for its own flush (it follows this one).
            lone_then_beside(&group, "while a flush runs");
            Ok(())
        })
        .unwrap();
    let (_, alone) = group.ticket_soon();
    assert!(alone, "alone again once every request was handed back");
}
