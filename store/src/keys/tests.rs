use super::*;

#[test]
fn addr_keys_round_trip_both_families() {
    for addr in ["10.88.0.5", "fd00::1", "::ffff:10.0.0.1"] {
        let addr: IpAddr = addr.parse().unwrap();
        assert_eq!(addr_from_key(&addr_key(addr)), Some(addr));
    }
    assert_eq!(addr_key("10.0.0.1".parse().unwrap()).len(), 4);
    assert_eq!(addr_from_key(&[1, 2, 3]), None);
}

#[test]
fn v4_keys_sort_numerically() {
    let low = addr_key("10.0.0.9".parse().unwrap());
    let high = addr_key("10.0.0.10".parse().unwrap());
    assert!(low < high);
}

#[test]
fn ids_with_separator_or_empty_are_refused() {
    assert!(check_id("sandbox id", "a/b").is_err());
    assert!(check_id("sandbox id", "").is_err());
    assert!(check_id("sandbox id", "abc").is_ok());
}

#[test]
fn attachment_key_is_recognised_only_for_its_own_parts() {
    let key = attachment_key("pod-a", "eth0");
    assert!(is_attachment_key(key.as_bytes(), "pod-a", "eth0"));
    assert!(!is_attachment_key(key.as_bytes(), "pod-b", "eth0"));
    assert!(!is_attachment_key(key.as_bytes(), "pod-a", "eth1"));
    assert!(!is_attachment_key(key.as_bytes(), "pod", "a/eth0"));
    assert!(!is_attachment_key(b"pod-a-eth0", "pod-a", "eth0"));
    // An id with the separator: the prefix scan of "pod" would find it too.
    assert!(!is_attachment_key(b"pod/a/eth0", "pod/a", "eth0"));
}
