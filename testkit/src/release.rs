//! The previous release of knid, built from its git tag for the upgrade tests: the tag and its
//! commit are named in `.ci/previous-release`; the source is `git archive`d out of this clone
//! (the tag if the clone has it, else the commit) and built once, as CI builds, into
//! `target/previous-release/<tag>/`, under a lock so concurrent tests build it once.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use nix::fcntl::{Flock, FlockArg};

/// A release: its tag, and the knid binary built from it.
#[derive(Debug, Clone)]
pub struct Release {
    /// The git tag (`v0.x.y`).
    pub tag: String,
    /// Its `knid` binary.
    pub knid: PathBuf,
    /// The store schema it writes (`knid_store::SCHEMA_VERSION` in its source).
    pub schema: u32,
}

/// The store schema of the release whose source is in `src`.
fn schema_of(src: &Path) -> u32 {
    let path = src.join("store/src/lib.rs");
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    text.lines()
        .find_map(|l| l.trim().strip_prefix("pub const SCHEMA_VERSION: u32 = "))
        .and_then(|v| v.trim_end_matches(';').trim().parse().ok())
        .unwrap_or_else(|| panic!("no SCHEMA_VERSION in {}", path.display()))
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("testkit sits in the workspace")
        .to_owned()
}

/// The tag and commit `.ci/previous-release` names.
pub fn previous_tag() -> (String, String) {
    let path = workspace().join(".ci/previous-release");
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .unwrap_or_else(|| panic!("{} names no release", path.display()));
    let mut words = line.split_whitespace();
    match (words.next(), words.next()) {
        (Some(tag), Some(commit)) => (tag.to_owned(), commit.to_owned()),
        _ => panic!("{}: {line:?} is not `<tag> <commit>`", path.display()),
    }
}

/// The previous release, built if it is not yet. Panics (with the build's output) when it
/// cannot be built: a clone without the release's commit cannot test the upgrade.
pub fn previous() -> Release {
    let (tag, commit) = previous_tag();
    let root = workspace();
    let dir = root.join("target/previous-release").join(&tag);
    std::fs::create_dir_all(&dir).expect("create target/previous-release");
    let lock = File::create(dir.join(".lock")).expect("create the build lock");
    let _held = Flock::lock(lock, FlockArg::LockExclusive).expect("lock the build");
    let knid = dir.join("knid");
    let src = dir.join("src");
    if knid.exists() && src.join("store/src/lib.rs").exists() {
        let schema = schema_of(&src);
        return Release { tag, knid, schema };
    }
    let git_ref = if git(
        &root,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{tag}^{{commit}}"),
        ],
    )
    .is_some_and(|sha| sha == commit)
    {
        tag.clone()
    } else {
        commit.clone()
    };
    let _ = std::fs::remove_dir_all(&src);
    std::fs::create_dir_all(&src).expect("create the source dir");
    let archive = Command::new("sh")
        .arg("-c")
        .arg(r#"git -C "$1" archive --format=tar "$2" | tar -x -C "$3""#)
        .args([
            "sh",
            &root.display().to_string(),
            &git_ref,
            &src.display().to_string(),
        ])
        .status()
        .expect("run git archive");
    assert!(
        archive.success(),
        "git archive {git_ref} ({tag}) failed: this clone lacks the previous release's commit \
         (a shallow clone?); the upgrade test needs it"
    );
    eprintln!("testkit: building knid {tag} ({git_ref}) for the upgrade tests");
    let out = Command::new(env!("CARGO"))
        .current_dir(&src)
        .args(["build", "--locked", "--bin", "knid", "--target-dir"])
        .arg(dir.join("target"))
        .env("CARGO_INCREMENTAL", "0")
        .env("CARGO_PROFILE_DEV_DEBUG", "line-tables-only")
        .env_remove("RUSTFLAGS")
        .stdin(Stdio::null())
        .output()
        .expect("run cargo build");
    assert!(
        out.status.success(),
        "building knid {tag} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::copy(dir.join("target/debug/knid"), &knid).expect("keep the built knid");
    // The build tree is 1-2 GiB; only the binary is needed from now on.
    let _ = std::fs::remove_dir_all(dir.join("target"));
    let schema = schema_of(&src);
    Release { tag, knid, schema }
}

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}
