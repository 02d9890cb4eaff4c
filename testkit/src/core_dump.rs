//! What a crashed knid leaves for the failing test to show: [`crate::node::TestNode`] starts
//! knid with core dumps allowed (`prlimit --core=unlimited`) and its tempdir as working
//! directory, so a knid that dies of a signal (a heap corruption's abort, a segfault) leaves its
//! core there, with the kernel's default `core_pattern` ("core"). The test's panic then prints
//! every thread's backtrace from that core ([`print_backtraces`]), and the tempdir goes with
//! the core. A knid whose faults are injected ([`knid_core::failpoint::VAR`] set: its aborts
//! are meant) is started without: each of its intended aborts would write a core for nothing.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The command that execs knid with core dumps allowed; knid keeps its pid.
pub const ALLOW_CORE: [&str; 3] = ["prlimit", "--core=unlimited", "--"];

/// How many frames of each thread's stack are printed at most: every frame of knid's deepest
/// stacks (a handler's, ~60 from the thread's start in a debug build), not a stack overflow's
/// endless ones.
const FRAMES: u32 = 200;

/// The core files in `dir`: `core`, or `core.<pid>` when the kernel adds the pid.
fn cores_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut cores: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name == "core"
                || name
                    .strip_prefix("core.")
                    .is_some_and(|pid| pid.parse::<u32>().is_ok())
        })
        .map(|e| e.path())
        .collect();
    cores.sort();
    cores
}

/// For every core a crashed `bin` left in `dir`: the core's path and each thread's backtrace as
/// gdb reads it, or why gdb could not run.
pub fn backtraces(dir: &Path, bin: &Path) -> Vec<(PathBuf, String)> {
    cores_in(dir)
        .into_iter()
        .map(|core| {
            let gdb = Command::new("gdb")
                .args(["-batch", "-nx", "-q"])
                .args(["-ex", "set pagination off"])
                .args(["-ex", &format!("set backtrace limit {FRAMES}")])
                .args(["-ex", "info threads"])
                .args(["-ex", "thread apply all bt"])
                .arg(bin)
                .arg(&core)
                .output();
            let text = match gdb {
                Ok(out) => format!(
                    "{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ),
                Err(e) => format!("gdb: {e} (install gdb to read the core)\n"),
            };
            (core, text)
        })
        .collect()
}

/// Prints [`backtraces`]; nothing when `dir` holds no core.
pub fn print_backtraces(dir: &Path, bin: &Path) {
    for (core, text) in backtraces(dir, bin) {
        eprintln!(
            "---- knid crashed: backtraces from {} ({}) ----\n{text}---- end of backtraces ----",
            core.display(),
            bin.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_core_files_are_taken_for_cores() {
        let dir = tempfile::tempdir().expect("tempdir");
        for name in ["core", "core.1234", "core.x", "cores", "knid.log"] {
            std::fs::write(dir.path().join(name), b"").expect("write");
        }
        let names: Vec<String> = cores_in(dir.path())
            .iter()
            .map(|p| p.file_name().expect("name").to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["core", "core.1234"]);
    }
}
