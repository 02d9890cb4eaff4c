use super::*;

#[test]
fn numbered_threads_count_under_one_pattern_most_numerous_first() {
    let mut threads = Threads::new();
    for n in 0..7 {
        threads.insert(format!("sled-io-{n}"), 1);
    }
    threads.insert("knid".into(), 1);
    threads.insert("log flusher".into(), 1);
    threads.insert("knid-api".into(), 2);
    assert_eq!(
        summary(&threads),
        "sled-io-* ×7, knid-api ×2, knid, log flusher"
    );
}

#[test]
fn only_a_number_after_a_dash_makes_a_family() {
    assert_eq!(pattern("sled-io-12"), "sled-io-*");
    assert_eq!(pattern("knid-shard-0"), "knid-shard-*");
    assert_eq!(pattern("knid"), "knid");
    assert_eq!(pattern("log flusher"), "log flusher");
    assert_eq!(pattern("worker3"), "worker3");
}
