use super::*;

#[test]
fn os_error_recovers_the_errno_from_sleds_copy_of_an_io_error() {
    let original = std::io::Error::from_raw_os_error(ENOSPC);
    // What sled 0.34's `impl Clone for Error` makes of it.
    let copy = std::io::Error::new(original.kind(), format!("{original:?}"));
    assert_eq!(copy.raw_os_error(), None);
    let recovered = os_error(copy);
    assert_eq!(recovered.raw_os_error(), Some(ENOSPC));
    assert_eq!(recovered.to_string(), original.to_string());
    let custom = std::io::Error::other("disk on fire");
    assert_eq!(os_error(custom).to_string(), "disk on fire");
}

/// ENOSPC on Linux (the store crate has no libc dependency).
const ENOSPC: i32 = 28;
