//! A CNI result as a plugin prints it (and a plugin's error object): parsing never panics, a
//! refused result is code 6, and an accepted one round-trips through every supported version's
//! format, losing exactly what that version cannot carry.
#![no_main]

use knid_core::cni::error::DECODE;
use knid_core::cni::version::{Version, SUPPORTED};
use knid_core::cni::{CniError, CniResult};
use libfuzzer_sys::fuzz_target;

/// `result` without what `version` cannot carry (interface and route extras before 1.1.0).
fn carried(result: &CniResult, version: Version) -> CniResult {
    let mut out = result.clone();
    if version < Version::V1_1_0 {
        for i in &mut out.interfaces {
            (i.mtu, i.socket_path, i.pci_id) = (None, String::new(), String::new());
        }
        for r in &mut out.routes {
            (r.mtu, r.advmss, r.priority, r.table, r.scope) = (None, None, None, None, None);
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    if let Some(err) = CniError::from_json(data) {
        let again = serde_json::to_vec(&err.to_json("1.1.0")).expect("encodes");
        assert_eq!(CniError::from_json(&again), Some(err));
    }
    let result = match knid_core::fuzz::cni_result(data) {
        Ok(result) => result,
        Err(e) => {
            assert_eq!(e.code, DECODE, "{e}");
            return;
        }
    };
    for version in SUPPORTED {
        let json = result.to_json(version);
        assert_eq!(json["cniVersion"], version.as_str());
        let back = CniResult::parse(&json).expect("knid reads what it writes");
        assert_eq!(back, carried(&result, version), "{version}: {json}");
    }
});
