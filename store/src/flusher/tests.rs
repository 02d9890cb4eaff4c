use std::time::Instant;

use super::*;

/// The thread's idle time in these tests.
const TEST_IDLE_EXIT: Duration = Duration::from_millis(200);

fn until(what: &str, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(
            started.elapsed() < TEST_IDLE_EXIT + Duration::from_secs(10),
            "{what}: not after {:?}",
            started.elapsed()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn thread_runs(flusher: &Flusher) -> bool {
    lock(&flusher.state).rx.is_none()
}

#[test]
fn the_thread_starts_on_a_request_ends_when_idle_and_starts_again() {
    let db = sled::Config::new().temporary(true).open().unwrap();
    let group = Arc::new(GroupFlush::default());
    let flusher = Flusher::ending_after(db.clone(), Arc::clone(&group), TEST_IDLE_EXIT);
    assert!(!thread_runs(&flusher), "a thread before any request");

    db.insert(b"a", b"1").unwrap();
    flusher.request(group.ticket());
    assert!(thread_runs(&flusher), "no thread after a request");
    until("the first background flush", || group.flushes() >= 1);
    until("the idle thread's end", || !thread_runs(&flusher));

    db.insert(b"b", b"2").unwrap();
    let ticket = group.ticket();
    flusher.request(ticket);
    until("the second background flush", || group.flushes() >= 2);
    // Covered already: the waiter does not flush again.
    group
        .wait(ticket, || -> Result<(), ()> { panic!("flushed twice") })
        .unwrap();
    flusher.stop();
    assert!(lock(&flusher.state).thread.is_none());
    // Stopped: a request starts nothing, its waiter flushes itself.
    flusher.request(group.ticket());
    assert!(lock(&flusher.state).thread.is_none(), "a thread after stop");
}
