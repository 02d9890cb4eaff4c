//! Generates, for the end-to-end tests only, the messages of `tests/kni/kni_beta.proto`: the KNI
//! beta API as its upstream publishes it, kept apart from knid's own copy so that tests/kni.rs
//! talks to knid the way an unmodified KNI client does. Pure-Rust parser, no protoc needed; the
//! binaries never include the output.

fn main() {
    println!("cargo:rerun-if-changed=tests/kni/kni_beta.proto");
    protobuf_codegen::Codegen::new()
        .pure()
        .include("tests/kni")
        .input("tests/kni/kni_beta.proto")
        .cargo_out_dir("kni_beta")
        .run_from_script();
}
