//! A store entry read back (the first byte picks the tree): reading never panics, a record
//! that does not decode or map back is reported as corrupt (never skipped, never a panic), and
//! what is read holds knid's rules; a sandbox survives being written again.
#![no_main]

use knid_core::fuzz::{stored_record, StoredRecord};
use knid_core::records::{sandbox_from_records, sandbox_to_record};
use knid_core::{Error, InterfaceKind, MacAddr};
use knid_fuzz::{is_clean_absolute_path, is_ifname, is_name, is_sandbox_id};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| match stored_record(data) {
    Ok(StoredRecord::Sandbox(sandbox)) => {
        assert!(is_sandbox_id(sandbox.id.as_str()));
        let again = sandbox_from_records(&sandbox_to_record(&sandbox), Vec::new());
        assert_eq!(again.ok(), Some(sandbox));
    }
    Ok(StoredRecord::Attachment(iface)) => {
        assert!(is_ifname(iface.name.as_str()), "{iface:?}");
        let unknown_ok = iface.kind == InterfaceKind::Cni && iface.mac == MacAddr::UNKNOWN;
        assert!(unknown_ok || (iface.mac.0[0] & 1 == 0 && iface.mac.0 != [0; 6]));
    }
    Ok(StoredRecord::Extension(info)) => {
        let spec = &info.spec;
        assert!(is_name(&spec.name));
        assert!(is_clean_absolute_path(&spec.socket_path.to_string_lossy(), 107));
        assert!((1..=60_000).contains(&spec.timeout.as_millis()) && !spec.phases.is_empty());
    }
    Ok(StoredRecord::Reservation(r)) => assert_eq!(r.network, "fuzz"),
    Ok(StoredRecord::Netns(_)) => {}
    Err(Error::Corrupt { .. })
    | Err(Error::Store(knid_store::Error::Decode { .. } | knid_store::Error::Corrupt { .. })) => {}
    Err(e) => panic!("not a corrupt-record error: {e:?}"),
});
