//! Replays every fuzz seed through the same function the fuzz target calls, on stable, so CI
//! exercises the corpus. A seed may be valid or invalid; it must never panic, and the known seeds
//! must keep their verdicts.

use std::path::Path;

use knid_core::ErrorKind;

fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut seeds: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.expect("dir entry").path();
            let name = path
                .file_name()
                .expect("name")
                .to_string_lossy()
                .into_owned();
            (name, std::fs::read(&path).expect("read seed"))
        })
        .collect();
    seeds.sort();
    seeds
}

#[test]
fn attach_request_seeds_decode_without_panicking_and_keep_their_verdicts() {
    let seeds = corpus("attach_request");
    assert!(
        seeds.len() >= 8,
        "seed corpus went missing: {} seeds",
        seeds.len()
    );
    for (name, bytes) in seeds {
        let result = knid_transport::decode::attach_request(&bytes);
        let valid = matches!(name.as_str(), "minimal" | "full" | "two_ifaces");
        match result {
            Ok(req) => assert!(valid, "seed {name} should be rejected, got {req:?}"),
            Err(e) => {
                assert!(!valid, "seed {name} should be accepted: {e}");
                assert_eq!(e.kind(), ErrorKind::InvalidArgument, "seed {name}: {e}");
            }
        }
    }
}
