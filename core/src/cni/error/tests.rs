use super::*;

#[test]
fn error_objects_round_trip_and_details_are_optional() {
    let e = CniError::new(INVALID_CONFIG, "bad").with_details("key x");
    let text = e.to_json("1.0.0").to_string();
    assert_eq!(CniError::from_json(text.as_bytes()), Some(e));
    let bare = CniError::new(TRY_AGAIN, "busy").to_json("0.4.0");
    assert!(bare.get("details").is_none());
    assert_eq!(bare["cniVersion"], "0.4.0");
    assert_eq!(CniError::from_json(b"{\"cniVersion\":\"1.0.0\"}"), None);
    assert_eq!(CniError::from_json(b"not json"), None);
}
