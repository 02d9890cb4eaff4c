use super::*;

/// This process's parts add up to its VmRSS (read a moment later: within a tenth).
#[test]
fn memory_parts_add_up_to_the_resident_size() {
    let pid = std::process::id();
    let parts = memory_parts(pid).expect("own smaps");
    let sum = parts.code_kib
        + parts.rodata_kib
        + parts.data_kib
        + parts.heap_kib
        + parts.stack_kib
        + parts.other_anon_kib
        + parts.other_kib;
    let rss = proc_status(pid, "VmRSS").expect("VmRSS");
    assert!(parts.code_kib > 0, "{parts:?}");
    assert!(
        sum.abs_diff(rss) <= rss / 10,
        "parts {sum} KiB, VmRSS {rss} KiB: {parts:?}"
    );
}

#[test]
fn a_spread_is_the_least_the_median_and_the_most_without_nans() {
    let s = |v: &[f64]| spread(v.iter().copied()).map(|s| (s.least, s.median, s.most));
    assert_eq!(s(&[3.0, 1.0, 2.0]), Some((1.0, 2.0, 3.0)));
    // An even count: the mean of the middle two.
    assert_eq!(s(&[4.0, 1.0, 3.0, 2.0]), Some((1.0, 2.5, 4.0)));
    assert_eq!(s(&[f64::NAN, 5.0]), Some((5.0, 5.0, 5.0)));
    assert_eq!(s(&[f64::NAN]), None);
    assert_eq!(s(&[]), None);
}
