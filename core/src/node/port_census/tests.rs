use super::*;

fn taken(census: &PortCensus, age: Duration, counts: &[(u32, u64)]) {
    let generation = census.generation.load(Ordering::SeqCst);
    *census.taken.acquire() = Some(Taken {
        at: Instant::now() - age,
        generation,
        counts: Arc::new(counts.iter().copied().collect()),
    });
}

#[test]
fn counts_are_reused_while_young_and_unchanged() {
    let census = PortCensus::default();
    assert!(census.kept().is_none(), "nothing taken yet");
    taken(&census, Duration::ZERO, &[(7, 3)]);
    let kept = census.kept().expect("just taken");
    assert_eq!(kept.get(&7), Some(&3));
}

#[test]
fn a_change_of_knids_makes_the_next_answer_look_again() {
    let census = PortCensus::default();
    taken(&census, Duration::ZERO, &[(7, 3)]);
    census.changed();
    assert!(census.kept().is_none());
    // Counts taken after the change are good again.
    taken(&census, Duration::ZERO, &[(7, 4)]);
    assert_eq!(census.kept().expect("taken after").get(&7), Some(&4));
}

#[test]
fn counts_older_than_the_limit_are_not_reused() {
    let census = PortCensus::default();
    taken(&census, MAX_AGE + Duration::from_millis(1), &[(7, 3)]);
    assert!(census.kept().is_none());
    taken(&census, MAX_AGE / 2, &[(7, 3)]);
    assert!(census.kept().is_some());
}

#[test]
fn an_answer_during_a_warm_up_waits_for_its_counts_instead_of_looking_beside_it() {
    let census = Arc::new(PortCensus::default());
    // No look under way: nothing to wait for.
    assert!(census.after_warm_up().is_none());
    census.warming.store(true, Ordering::SeqCst);
    let warm_up = |census: &Arc<PortCensus>, change_first: bool| {
        let census = Arc::clone(census);
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            taken(&census, Duration::ZERO, &[(7, 5)]);
            if change_first {
                census.changed();
            }
            census.warm_up_over();
        })
    };
    let looker = warm_up(&census, false);
    let counts = census.after_warm_up().expect("the warm-up's counts");
    assert_eq!(counts.get(&7), Some(&5));
    looker.join().expect("the warm-up's thread");
    // A look that a change of knid's overtook is no answer: the caller looks itself.
    census.warming.store(true, Ordering::SeqCst);
    let looker = warm_up(&census, true);
    assert!(census.after_warm_up().is_none());
    looker.join().expect("the warm-up's thread");
    assert!(!census.warming.load(Ordering::SeqCst));
}
