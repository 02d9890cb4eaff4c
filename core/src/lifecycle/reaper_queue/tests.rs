use std::time::Duration;

use super::*;

/// Parks like the gathering reaper until a message that is not more links is queued, and
/// returns what the queue held each time it woke.
fn gather(queue: &Queue, rx: &Receiver<Msg>) -> Vec<Vec<&'static str>> {
    let mut wakes = Vec::new();
    queue.gathering(true);
    loop {
        std::thread::park_timeout(Duration::from_secs(30));
        let held: Vec<&'static str> = rx
            .try_iter()
            .map(|msg| match msg {
                Msg::Reap(_) => "reap",
                Msg::Flush(_) => "flush",
                Msg::Stop => "stop",
            })
            .collect();
        let done = held.iter().any(|m| *m != "reap");
        wakes.push(held);
        if done {
            break;
        }
    }
    queue.gathering(false);
    wakes
}

#[test]
fn links_queued_do_not_wake_a_gathering_reaper_a_flush_does() {
    let host = Rtnl::open().expect("a netlink socket");
    let queue = Arc::new(Queue::new(host));
    // Unbound: no thread starts; this test takes the reaper's part.
    let rx = queue.state.acquire().parked.take().expect("parked").rx;
    let gatherer = {
        let queue = Arc::clone(&queue);
        std::thread::spawn(move || gather(&queue, &rx))
    };
    while queue.state.acquire().gatherer.is_none() {
        std::thread::sleep(Duration::from_millis(1));
    }
    for _ in 0..3 {
        assert!(queue.send(Msg::Reap(Vec::new())).is_ok());
        // Time for a wake-up to happen, if one did.
        std::thread::sleep(Duration::from_millis(50));
    }
    let (tx, _rx) = crossbeam_channel::bounded(1);
    assert!(queue.send(Msg::Flush(tx)).is_ok());
    let wakes = gatherer.join().expect("gatherer");
    assert_eq!(
        wakes,
        [vec!["reap", "reap", "reap", "flush"]],
        "woken only by the flush"
    );
}

#[test]
fn a_full_batch_of_links_wakes_a_gathering_reaper() {
    let host = Rtnl::open().expect("a netlink socket");
    let queue = Queue::new(host);
    let rx = queue.state.acquire().parked.take().expect("parked").rx;
    queue.gathering(true);
    for _ in 0..GATHER_BATCH - 1 {
        assert!(queue.send(Msg::Reap(Vec::new())).is_ok());
    }
    // Nothing woke it yet: no token waits, so a short park runs out.
    assert!(!unparked_within(Duration::from_millis(20)));
    assert!(queue.send(Msg::Reap(Vec::new())).is_ok());
    assert!(unparked_within(Duration::from_secs(30)), "not woken");
    assert_eq!(rx.len(), GATHER_BATCH);
}

/// Whether a park returned before `limit` (woken, not timed out).
fn unparked_within(limit: Duration) -> bool {
    let started = std::time::Instant::now();
    std::thread::park_timeout(limit);
    started.elapsed() < limit
}
