//! Where the binaries under test are: `knid`, `knictl` and `knid-cni`, as cargo built them for
//! the test or bench that is running.
//!
//! `env!("CARGO_BIN_EXE_<name>")` exists only while cargo compiles the root package's own tests
//! and benches, not while it compiles this library, so the binaries are found where cargo puts
//! them instead: a test or bench executable is `target/<profile>/deps/<name>-<hash>`, and the
//! binaries it runs are `target/<profile>/<bin>`, built by cargo with the same profile and
//! features before any of the package's tests or benches runs (`target/debug/` under
//! `cargo test`, `target/release/` under `cargo bench`). A call-site macro expanding `env!` in
//! the test would need every caller of [`crate::node::TestNode`] to pass the path in; looking
//! next to the running executable keeps the harness's signatures as they are.

use std::path::{Path, PathBuf};

/// The directory the binaries of this build live in: `target/<profile>/`, the parent of the
/// `deps/` directory holding the running test or bench.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("path of the running test binary");
    exe.parent()
        .and_then(Path::parent)
        .unwrap_or_else(|| {
            panic!(
                "{} is not in target/<profile>/deps/, where cargo puts tests and benches",
                exe.display()
            )
        })
        .to_owned()
}

/// The binary `name` of this build, `target/<profile>/<name>`; panics naming the path when it is
/// not there.
pub fn bin(name: &str) -> PathBuf {
    let path = profile_dir().join(name);
    assert!(
        path.is_file(),
        "{} is missing: cargo builds knid's binaries for the tests and benches of the knid \
         package (cargo test / cargo bench at the workspace root); run `cargo build --bins` with \
         the same profile and --features first when running a test binary by hand",
        path.display()
    );
    path
}

/// The daemon, `knid`.
pub fn knid() -> PathBuf {
    bin("knid")
}

/// The operator's CLI, `knictl`.
pub fn knictl() -> PathBuf {
    bin("knictl")
}

/// The CNI plugin, `knid-cni`.
pub fn knid_cni() -> PathBuf {
    bin("knid-cni")
}
