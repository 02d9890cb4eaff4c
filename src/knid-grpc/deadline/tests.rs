use super::*;

#[test]
fn every_unit_of_grpc_timeout_is_read() {
    assert_eq!(parse("2H"), Some(Duration::from_secs(7200)));
    assert_eq!(parse("3M"), Some(Duration::from_secs(180)));
    assert_eq!(parse("5S"), Some(Duration::from_secs(5)));
    assert_eq!(parse("250m"), Some(Duration::from_millis(250)));
    assert_eq!(parse("99999999u"), Some(Duration::from_micros(99_999_999)));
    assert_eq!(parse("7n"), Some(Duration::from_nanos(7)));
}

#[test]
fn a_malformed_grpc_timeout_is_no_deadline() {
    for bad in ["", "S", "123456789S", "5s", "-5S", "5 S", "5"] {
        assert_eq!(parse(bad), None, "{bad:?}");
    }
}
