use super::*;

#[test]
fn a_missing_netns_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("gone");
    let err = pod_interface(&path, "eth0", None, &[]).expect_err("no netns there");
    assert!(err.contains(&path.display().to_string()), "{err}");
}
