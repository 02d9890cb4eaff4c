//! Whether a test may run here: root for the privileged tests, a daemon built with failpoints
//! for the crash tests. A test that cannot run prints a loud skip notice, or fails under
//! `CI=true`, so CI can never pass by skipping.

/// True when the tests were built with the `failpoints` feature (knid's `failpoints` turns on
/// testkit's, and both the daemon's). Without it, a loud skip notice, or a panic under
/// `CI=true`, so CI cannot pass by skipping.
pub fn failpoints_built() -> bool {
    cfg!(feature = "failpoints")
        || skip_unless_ci("needs --features failpoints (cargo test --features failpoints)")
}

/// True when the test may run. Without root it prints a loud skip notice and returns false;
/// with `CI=true` it panics instead, so a CI run can never pass by skipping.
pub fn privileged() -> bool {
    nix::unistd::Uid::effective().is_root()
        || skip_unless_ci(
            "needs root (network namespaces, veth, bridges). Run as root, or with CI=true to \
             turn this skip into a failure",
        )
}

/// A test that cannot run: panics under `CI=true` (CI must never pass by skipping), else prints
/// a loud skip notice naming `why` and returns false.
pub fn skip_unless_ci(why: &str) -> bool {
    let test = std::thread::current()
        .name()
        .unwrap_or("this test")
        .to_owned();
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{test}: {why}; CI=true forbids skipping it");
    }
    // Straight to fd 2: the test harness captures eprintln! of passing tests, and a skip must
    // be seen.
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!("\n!!!!!!!! SKIPPED {test}: {why}. !!!!!!!!\n").as_bytes(),
    );
    false
}
