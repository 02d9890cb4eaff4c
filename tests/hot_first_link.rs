//! `.cargo/hot-first-link.sh`, the linker knid links with: the functions its list names come
//! first in `.text`, in the list's order, whether the list names them as they are (C), without
//! their v0 crate disambiguators and back-references (written from a build whose crate hash had
//! another length) and LLVM's copy numbers, or without their legacy hash; a function it does
//! not name comes after them; without lld it links as plain `cc` would. A small C program stands in for knid:
//! its functions carry Rust-mangled names, so the script sees what it sees in knid's objects.

use std::path::{Path, PathBuf};
use std::process::Command;

const PROGRAM: &str = r#"
int _ZN4demo4cold17h0123456789abcdefE(void) { return 1; }
int _RNvCsAbCdEf123_4demo3hot(void) { return 2; }
int _RNvMs_NtCsAbCdEf123_4demo4implNtB4_5Thing4warm(void) { return 5; }
int local_copy(void) __asm__("_RNvCsAbCdEf123_4demo5local.1334");
int local_copy(void) { return 6; }
int c_cold(void) { return 3; }
int c_hot(void) { return 4; }
int main(void) {
    return _ZN4demo4cold17h0123456789abcdefE() + _RNvCsAbCdEf123_4demo3hot() + c_cold() + c_hot()
        + _RNvMs_NtCsAbCdEf123_4demo4implNtB4_5Thing4warm() + local_copy();
}
"#;

/// The list as `.cargo/knid-hot.sh` writes it: comments, then names without their hashes.
const LIST: &str = "# hot first\nc_hot\n_RNvMs_NtCs_4demo4implNtB_5Thing4warm\n_RNvCs_4demo3hot\n\
                    _RNvCs_4demo5local\n_ZN4demo4coldE\ngone_since\n";

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// rustc's own lld, as rustc hands it to `cc`: `-B` this directory and `-fuse-ld=lld`.
fn gcc_ld() -> PathBuf {
    let libdir = run(Command::new("rustc").args(["--print", "target-libdir"]));
    let dir = Path::new(libdir.trim()).join("../bin/gcc-ld");
    assert!(
        dir.is_dir(),
        "{} missing: rustc's self-contained lld",
        dir.display()
    );
    dir
}

/// The demo program's functions, in address order.
fn order(binary: &Path) -> Vec<String> {
    let names = [
        "c_hot",
        "c_cold",
        "_RNvCsAbCdEf123_4demo3hot",
        "_RNvMs_NtCsAbCdEf123_4demo4implNtB4_5Thing4warm",
        "_RNvCsAbCdEf123_4demo5local.1334",
        "_ZN4demo4cold17h0123456789abcdefE",
    ];
    run(Command::new("nm").arg("-n").arg(binary))
        .lines()
        .filter_map(|line| line.split_whitespace().nth(2))
        .filter(|name| names.contains(name))
        .map(str::to_owned)
        .collect()
}

/// Compiles the program (one section per function) and links it with the script.
fn link(dir: &Path, out: &str, extra: &[&str]) -> PathBuf {
    let src = dir.join("demo.c");
    let obj = dir.join("demo.o");
    std::fs::write(&src, PROGRAM).expect("write demo.c");
    std::fs::write(dir.join("knid.hot"), LIST).expect("write the list");
    run(Command::new("cc")
        .args(["-c", "-ffunction-sections", "-o"])
        .arg(&obj)
        .arg(&src));
    let binary = dir.join(out);
    run(Command::new("sh")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(".cargo/hot-first-link.sh"))
        .arg(&obj)
        .arg("-o")
        .arg(&binary)
        .args(extra)
        .env("KNID_HOT_LIST", dir.join("knid.hot")));
    binary
}

#[test]
fn listed_functions_come_first_in_the_lists_order() {
    let dir = tempfile::tempdir().expect("temp dir");
    let gcc_ld = format!("-B{}", gcc_ld().display());
    let binary = link(dir.path(), "ordered", &[&gcc_ld, "-fuse-ld=lld"]);
    assert_eq!(
        order(&binary),
        [
            "c_hot",
            "_RNvMs_NtCsAbCdEf123_4demo4implNtB4_5Thing4warm",
            "_RNvCsAbCdEf123_4demo3hot",
            "_RNvCsAbCdEf123_4demo5local.1334",
            "_ZN4demo4cold17h0123456789abcdefE",
            "c_cold"
        ],
        "listed first, in the list's order (a name without its disambiguator, back-references, \
         LLVM copy number or hash still matches), the unlisted one after"
    );
    let ran = Command::new(&binary)
        .status()
        .expect("run the linked program");
    assert_eq!(ran.code(), Some(21), "the ordered program still runs");
}

#[test]
fn without_lld_the_list_is_left_out() {
    let dir = tempfile::tempdir().expect("temp dir");
    // The system's default linker (GNU ld here) knows no --symbol-ordering-file: the script
    // must not pass it, and the functions stay in the order they were written.
    let binary = link(dir.path(), "plain", &[]);
    assert_eq!(
        order(&binary),
        [
            "_ZN4demo4cold17h0123456789abcdefE",
            "_RNvCsAbCdEf123_4demo3hot",
            "_RNvMs_NtCsAbCdEf123_4demo4implNtB4_5Thing4warm",
            "_RNvCsAbCdEf123_4demo5local.1334",
            "c_cold",
            "c_hot"
        ]
    );
}
