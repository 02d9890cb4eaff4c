use super::*;

#[test]
fn keys_resolve_under_proc_sys() {
    let p = path_of("net/ipv4/ip_forward").expect("valid key");
    assert_eq!(p, Path::new("/proc/sys/net/ipv4/ip_forward"));
}

#[test]
fn escaping_or_absolute_keys_are_rejected() {
    for key in ["", "/etc/passwd", "net/../../etc/passwd", "..", "a..b"] {
        let err = path_of(key).expect_err(key);
        assert_eq!(err.errno(), None, "{key}");
        assert!(err.to_string().contains("sysctl key"), "{err}");
    }
}

#[test]
fn read_of_an_existing_key_is_trimmed() {
    let v = read("kernel/ostype").expect("readable");
    assert_eq!(v, "Linux");
}

#[test]
fn read_of_a_missing_key_keeps_the_errno() {
    let e = read("net/ipv4/no_such_knob").expect_err("missing");
    assert_eq!(e.errno(), Some(libc::ENOENT));
}
