//! `knid_store::reclaim_retired` frees what a thread retired before it ends, and what ended
//! threads left. One test in its own binary: no other test's thread may hold the epoch back
//! meanwhile.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Retires `n` objects whose destruction counts in `freed`, from the calling thread.
fn retire(n: usize, freed: &Arc<AtomicUsize>) {
    let guard = crossbeam_epoch::pin();
    for _ in 0..n {
        let freed = Arc::clone(freed);
        guard.defer(move || {
            freed.fetch_add(1, Ordering::SeqCst);
        });
    }
}

#[test]
fn reclaim_frees_what_was_retired() {
    what_the_thread_retired();
    what_ended_threads_left();
}

fn what_the_thread_retired() {
    let freed = Arc::new(AtomicUsize::new(0));
    let thread_freed = Arc::clone(&freed);
    // Fewer than a bag: without a flush they would wait in the thread's bag.
    std::thread::spawn(move || {
        retire(10, &thread_freed);
        knid_store::reclaim_retired();
        assert_eq!(
            thread_freed.load(Ordering::SeqCst),
            10,
            "retired objects not freed by the thread's reclaim"
        );
    })
    .join()
    .expect("the retiring thread");
}

fn what_ended_threads_left() {
    let freed = Arc::new(AtomicUsize::new(0));
    // 128 bags (of 64), from threads that end without reclaiming: their bags go to the global
    // queue, where only a collection frees them, eight bags at a time.
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let freed = Arc::clone(&freed);
            std::thread::spawn(move || retire(2000, &freed))
        })
        .collect();
    for t in threads {
        t.join().expect("a retiring thread");
    }
    knid_store::reclaim_retired();
    assert_eq!(freed.load(Ordering::SeqCst), 8000);
}
