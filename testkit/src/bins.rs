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

/// What names the `knid-cni` binary to run instead of cargo's: `.ci/run` sets it to the musl
/// build it made, the one the image ships ([`musl_knid_cni`]).
pub const KNID_CNI_BIN: &str = "KNID_CNI_BIN";

/// The CNI plugin, `knid-cni`: the file `KNID_CNI_BIN` names when set, else this build's.
pub fn knid_cni() -> PathBuf {
    match std::env::var_os(KNID_CNI_BIN) {
        Some(path) => {
            let path = PathBuf::from(path);
            assert!(
                path.is_file(),
                "{KNID_CNI_BIN}={} is not a file: build it first (`cargo build --target \
                 x86_64-unknown-linux-musl --bin knid-cni`), or unset it to run cargo's knid-cni",
                path.display()
            );
            path
        }
        None => bin("knid-cni"),
    }
}

/// The Rust target knid-cni ships for: musl, linked statically. glibc's start-up reads the
/// processor's features and caches with `cpuid` dozens of times, each a trap to the hypervisor
/// in a virtual machine: 0.25 ms of every exec of a glibc knid-cni on a 2-vCPU VM
/// (docs/performance-history.md), where musl reads none.
pub const SHIPPED_TARGET: &str = "x86_64-unknown-linux-musl";

/// knid-cni as the image ships it, built now by cargo for [`SHIPPED_TARGET`] with this build's
/// profile (`release` under `cargo bench`), into the workspace's target directory: its path, or
/// why it could not be built (the target or a musl C compiler not installed: `rustup target add
/// x86_64-unknown-linux-musl`, `apt-get install musl-tools`). Cargo rebuilds it only when its
/// sources changed.
pub fn musl_knid_cni() -> Result<PathBuf, String> {
    let profile_dir = profile_dir();
    let profile = profile_dir
        .file_name()
        .and_then(|p| p.to_str())
        .ok_or("the build's profile directory has no name")?
        .to_owned();
    let target_dir = profile_dir.parent().ok_or("no target directory")?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or("testkit is not in a workspace")?;
    let cargo_profile = if profile == "debug" { "dev" } else { &profile };
    let out = std::process::Command::new(&cargo)
        .current_dir(workspace)
        .args([
            "build",
            "--locked",
            "--bin",
            "knid-cni",
            "--target",
            SHIPPED_TARGET,
        ])
        .args(["--profile", cargo_profile])
        .arg("--target-dir")
        .arg(target_dir)
        .output()
        .map_err(|e| format!("run {}: {e}", Path::new(&cargo).display()))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(6).collect();
        return Err(format!(
            "cargo build --target {SHIPPED_TARGET} --bin knid-cni failed ({}): {}",
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
        ));
    }
    let path = target_dir
        .join(SHIPPED_TARGET)
        .join(&profile)
        .join("knid-cni");
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!("cargo built no {}", path.display()))
    }
}
