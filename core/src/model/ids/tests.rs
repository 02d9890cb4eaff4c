use super::*;

#[test]
fn random_bytes_differ_between_calls() {
    assert_ne!(random_bytes::<6>(), random_bytes::<6>());
}

#[test]
fn a_random_local_mac_is_unicast_and_locally_administered() {
    for _ in 0..64 {
        let mac = MacAddr::random_local();
        assert_eq!(mac.0[0] & 0x03, 0x02, "{mac}");
    }
}
