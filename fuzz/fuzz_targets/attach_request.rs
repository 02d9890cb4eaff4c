//! Decoding + validating an Attach request must never panic, and whatever it accepts must hold
//! every rule again.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(req) = knid_transport::decode::attach_request(data) {
        assert!(knid_core::SandboxId::parse(req.sandbox_id.as_str()).is_ok());
        assert!(!req.interfaces.is_empty());
        assert!(req.interfaces.len() <= knid_core::validate::MAX_INTERFACES);
        for iface in &req.interfaces {
            assert!(knid_core::IfName::parse(iface.name.as_str()).is_ok());
            if let Some(mtu) = iface.mtu {
                assert!(knid_core::validate::mtu(mtu).is_ok());
            }
        }
    }
});
