//! Generates the record types from `proto/store.proto` with the pure-Rust parser (no protoc needed).

fn main() {
    println!("cargo:rerun-if-changed=proto/store.proto");
    protobuf_codegen::Codegen::new()
        .pure()
        .include("proto")
        .input("proto/store.proto")
        .cargo_out_dir("schema")
        .run_from_script();
}
