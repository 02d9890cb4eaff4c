use super::*;

#[test]
fn a_writable_directory_passes_and_the_probe_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    probe(&store).unwrap();
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    assert_eq!(probe_path(&store), dir.path().join("store.write-probe"));
}

#[test]
fn a_missing_directory_fails_naming_it() {
    let err = probe(Path::new("/nonexistent-knid-dir/store")).unwrap_err();
    assert!(err.contains("/nonexistent-knid-dir"), "{err}");
}
