use super::*;

const SMAPS: &str = "\
555555554000-555555560000 r--p 00000000 fd:01 4242 /usr/bin/knid
Size:                 48 kB
Rss:                  44 kB
Anonymous:             0 kB
555555560000-5555555a0000 r-xp 0000c000 fd:01 4242 /usr/bin/knid
Size:                256 kB
Rss:                 200 kB
Anonymous:             0 kB
5555555a0000-5555555a4000 r--p 0004c000 fd:01 4242 /usr/bin/knid
Size:                 16 kB
Rss:                  16 kB
Anonymous:            16 kB
5555555a4000-5555555a5000 rw-p 00050000 fd:01 4242 /usr/bin/knid
Size:                  4 kB
Rss:                   4 kB
Anonymous:             4 kB
7ffff7fc1000-7ffff7fc5000 r--p 00000000 00:00 0 [vvar]
Size:                 16 kB
Rss:                   0 kB
";

#[test]
fn only_the_mappings_read_straight_from_the_file_are_released() {
    let all = mappings(SMAPS);
    assert_eq!(all.len(), 5);
    assert_eq!(
        (all[1].start, all[1].end, all[1].rss_kib, all[1].inode),
        (0x5555_5556_0000, 0x5555_555a_0000, 200, 4242)
    );
    assert_eq!(
        (all[1].name.as_str(), all[4].name.as_str()),
        ("/usr/bin/knid", "[vvar]")
    );
    let released: Vec<&str> = all
        .iter()
        .filter(|m| m.inode == 4242 && m.is_file_backed_unwritten())
        .map(|m| m.perms.as_str())
        .collect();
    // The headers and constants, and the code; not the relocated RELRO copy, nor the data.
    assert_eq!(released, ["r--p", "r-xp"]);
}

#[test]
fn a_mapping_whose_anonymous_size_cannot_be_read_is_left_alone() {
    let text = SMAPS.replace(
        "Anonymous:             0 kB\n555555560000",
        "Anonymous: ? kB\n555555560000",
    );
    let all = mappings(&text);
    assert!(!all[0].is_file_backed_unwritten());
    assert!(all[1].is_file_backed_unwritten());
}

/// The test binary's own code, released, then run again: the calls after it work, and what
/// was mapped is no longer, until used.
#[test]
fn released_code_runs_again_from_the_file() {
    let text_rss = || {
        let exe = std::fs::metadata("/proc/self/exe").expect("exe").ino();
        mappings(&std::fs::read_to_string("/proc/self/smaps").expect("smaps"))
            .iter()
            .filter(|m| m.inode == exe && m.perms == "r-xp")
            .map(|m| m.rss_kib)
            .sum::<u64>()
    };
    // The other tests of this binary run code meanwhile and map its pages back in: the drop is
    // looked for over a few rounds, not in one.
    let mut seen = Vec::new();
    for _ in 0..5 {
        let before = text_rss();
        let released = release();
        assert!(released.mappings >= 2 && released.kib > 0, "{released:?}");
        // Code that ran before runs again (and maps its pages back).
        let again = mappings(SMAPS);
        assert_eq!(again.len(), 5);
        let after = text_rss();
        if after < before {
            return;
        }
        seen.push((before, after));
    }
    panic!("code RSS (KiB before, after) never fell in a round: {seen:?}");
}
