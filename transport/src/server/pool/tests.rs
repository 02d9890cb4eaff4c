use super::*;

#[test]
fn a_request_runs_under_its_deadline_capped_by_the_configured_one() {
    let cap = Duration::from_secs(120);
    assert_eq!(timeout(0, cap), cap);
    assert_eq!(timeout(-1, cap), cap);
    assert_eq!(timeout(2_000_000_000, cap), Duration::from_secs(2));
    assert_eq!(timeout(i64::MAX, cap), cap);
}

#[test]
fn zero_or_negative_timeout_means_no_deadline() {
    let now = Instant::now();
    assert_eq!(deadline(0, now), None);
    assert_eq!(deadline(-5, now), None);
}

#[test]
fn timeout_becomes_a_deadline_from_receipt() {
    let now = Instant::now();
    assert_eq!(
        deadline(2_500_000_000, now),
        Some(now + Duration::from_millis(2500))
    );
}
