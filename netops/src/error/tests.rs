use super::*;

#[test]
fn netlink_error_keeps_errno_and_classifies_it() {
    let e = Error::netlink("create bridge", "br0", libc::EEXIST, None);
    assert_eq!(e.errno(), Some(libc::EEXIST));
    assert!(e.is_exists());
    assert!(!e.is_not_found());
    assert_eq!(e.to_string(), "create bridge br0");
    let src = std::error::Error::source(&e).map(ToString::to_string);
    assert_eq!(src.as_deref(), Some("File exists (os error 17)"));
}

#[test]
fn not_found_covers_enoent_enodev_esrch() {
    for errno in [libc::ENOENT, libc::ENODEV, libc::ESRCH] {
        assert!(
            Error::netlink("x", "y", errno, None).is_not_found(),
            "{errno}"
        );
    }
    assert!(!Error::netlink("x", "y", libc::EINVAL, None).is_not_found());
    assert!(!Error::NetnsMissing { path: "/x".into() }.is_not_found());
}

#[test]
fn extack_text_is_part_of_the_message() {
    let e = Error::netlink(
        "set mtu",
        "index 3",
        libc::EINVAL,
        Some("mtu less than device minimum".into()),
    );
    assert_eq!(
        e.to_string(),
        "set mtu index 3: mtu less than device minimum"
    );
}
