//! The seed corpora of the fuzz targets (`fuzz/corpus/<target>/`), for the replay tests that run
//! them on stable through the very functions the targets fuzz. Each crate's
//! `tests/fuzz_seeds.rs` reads its corpora here, so the corpus rules live once: at least five
//! seeds per target, each named `<verdict>_<what it is>`.

use std::path::Path;

/// One seed of a corpus.
pub struct Seed {
    /// The verdict its name starts with (`valid`, `invalid`, ...).
    pub verdict: &'static str,
    /// Its file name.
    pub name: String,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

/// Every seed of `target`, sorted by name. Panics when there are fewer than five, or a name
/// does not start with one of `verdicts` and `_`.
pub fn corpus(target: &str, verdicts: &[&'static str]) -> Vec<Seed> {
    // testkit/ sits beside fuzz/ at the workspace root.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut seeds: Vec<Seed> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.expect("dir entry").path();
            let name = path
                .file_name()
                .expect("name")
                .to_string_lossy()
                .into_owned();
            let verdict = verdicts
                .iter()
                .find(|v| name.strip_prefix(**v).is_some_and(|r| r.starts_with('_')))
                .unwrap_or_else(|| panic!("{target}/{name}: name it <{}>_...", verdicts.join("|")));
            Seed {
                verdict,
                bytes: std::fs::read(&path).expect("read seed"),
                name,
            }
        })
        .collect();
    seeds.sort_by(|a, b| a.name.cmp(&b.name));
    assert!(
        seeds.len() >= 5,
        "{target}: the seed corpus went missing: {} seeds",
        seeds.len()
    );
    for verdict in verdicts {
        assert!(
            seeds.iter().any(|s| s.verdict == *verdict),
            "{target}: no {verdict} seed"
        );
    }
    seeds
}

/// Replays `target`'s corpus through `decode`, holding each result to its seed's verdict.
pub fn replay<T: std::fmt::Debug, E: std::fmt::Display>(
    target: &str,
    decode: impl Fn(&[u8]) -> Result<T, E>,
    refused_as_bad_input: impl Fn(&E) -> bool,
) {
    for seed in corpus(target, &["valid", "invalid"]) {
        match (seed.verdict, decode(&seed.bytes)) {
            ("valid", Ok(_)) => {}
            ("valid", Err(e)) => panic!("{target}/{} should be accepted: {e}", seed.name),
            (_, Ok(got)) => panic!("{target}/{} should be refused, got {got:?}", seed.name),
            (_, Err(e)) => assert!(
                refused_as_bad_input(&e),
                "{target}/{}: not refused as bad input: {e}",
                seed.name
            ),
        }
    }
}
