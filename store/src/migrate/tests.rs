use super::subnet_of;

#[test]
fn an_interface_address_gives_its_subnet_and_a_host_prefix_none() {
    assert_eq!(
        subnet_of("10.244.1.7/24"),
        Some(("10.244.1.0/24".to_owned(), false))
    );
    assert_eq!(
        subnet_of("fd00:10:244:1::7/64"),
        Some(("fd00:10:244:1::/64".to_owned(), true))
    );
    assert_eq!(
        subnet_of("10.0.0.1/0"),
        Some(("0.0.0.0/0".to_owned(), false))
    );
    assert_eq!(subnet_of("10.9.0.2/32"), None);
    assert_eq!(subnet_of("fd00::2/128"), None);
    assert_eq!(subnet_of("10.9.0.2/33"), None);
    assert_eq!(subnet_of("10.9.0.2"), None);
    assert_eq!(subnet_of("pods/24"), None);
}
