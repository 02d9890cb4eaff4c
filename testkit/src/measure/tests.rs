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
