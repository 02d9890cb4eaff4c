//! knid-cni: the CNI plugin binary (`"type": "knid"`). Reads the CNI environment and stdin,
//! forwards the verb to knid over its socket, prints the result or the CNI error object and
//! exits with the code; everything else lives in `knid_transport::cni_plugin`.

#![forbid(unsafe_code)]

use std::io::{Read, Write};

fn main() {
    let mut stdin = Vec::new();
    // An unreadable stdin is reported as the spec's I/O failure, in the CNI error format.
    if let Err(e) = std::io::stdin().read_to_end(&mut stdin) {
        let err = knid_core::cni::CniError::new(
            knid_core::cni::error::IO_FAILURE,
            format!("read stdin: {e}"),
        );
        println!("{}", err.to_json(knid_core::cni::Version::LATEST.as_str()));
        std::process::exit(knid_core::cni::error::IO_FAILURE as i32);
    }
    let outcome = knid_transport::cni_plugin::run(&|key: &str| std::env::var(key).ok(), &stdin);
    let mut stdout = std::io::stdout().lock();
    // Nothing else can be reported if stdout itself is gone: the exit code still tells.
    let _ = stdout.write_all(outcome.stdout.as_bytes());
    let _ = stdout.flush();
    std::process::exit(outcome.exit_code);
}
