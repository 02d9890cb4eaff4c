//! Generates, for the end-to-end tests only, the messages of `tests/kni/kni_beta.proto`: the KNI
//! beta API as its upstream publishes it, kept apart from knid's own copy so that tests/kni.rs
//! talks to knid the way an unmodified KNI client does. Pure-Rust parser, no protoc needed; the
//! binaries never include the output.
//!
//! Also links `knid-cni` without debug info: it is exec'd, never debugged in place, and the line
//! tables of its dependencies made it 47 MB on every node (3 MB without). Nothing it loads at
//! exec changes.
//!
//! And relinks knid when .cargo/knid.hot, the functions its link puts first, changes.

fn main() {
    println!("cargo:rustc-link-arg-bin=knid-cni=-Wl,--strip-debug");
    println!("cargo:rerun-if-changed=tests/kni/kni_beta.proto");
    // knid's link puts these functions first (.cargo/hot-first-link.sh): a new list, or new keys
    // to match it by, relink it.
    println!("cargo:rerun-if-changed=.cargo/knid.hot");
    println!("cargo:rerun-if-changed=.cargo/hot-key.awk");
    protobuf_codegen::Codegen::new()
        .pure()
        .include("tests/kni")
        .input("tests/kni/kni_beta.proto")
        .cargo_out_dir("kni_beta")
        .run_from_script();
}
