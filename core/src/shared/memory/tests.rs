use super::*;

#[test]
fn a_few_changes_never_want_the_code_released() {
    let start = Instant::now();
    let mut release = AfterBigChange::new(100);
    for i in 0..99 {
        release.applied(1, start + Duration::from_secs(i));
    }
    assert_eq!(release.due(), None);
}

#[test]
fn a_big_change_wants_the_code_released_once_its_passes_are_over() {
    let start = Instant::now();
    let mut release = AfterBigChange::new(100);
    release.applied(60, start);
    assert_eq!(release.due(), None);
    release.applied(40, start);
    assert_eq!(release.due(), Some(start + SETTLED_AFTER));
    // Another pass, however small, puts the release after it.
    let later = start + Duration::from_secs(3);
    release.applied(0, later);
    assert_eq!(release.due(), Some(later + SETTLED_AFTER));
}

#[test]
fn nothing_is_released_before_it_is_due() {
    let start = Instant::now();
    let mut release = AfterBigChange::new(1);
    release.applied(1, start);
    release.run_due(start, "changes");
    assert_eq!(release.due(), Some(start + SETTLED_AFTER));
}

#[test]
fn a_release_due_soon_after_another_is_put_off() {
    give_back_code_unless_recent("a test");
    let now = Instant::now();
    let next = give_back_code_unless_recent("a test").expect("put off");
    assert!(next > now && next <= now + RELEASE_EVERY, "{next:?}");

    let mut release = AfterBigChange::new(1);
    release.applied(1, now);
    release.run_due(now + SETTLED_AFTER, "changes");
    // Still wanted, once the last release is old enough.
    assert!(release.due().is_some_and(|due| due > now));
}
