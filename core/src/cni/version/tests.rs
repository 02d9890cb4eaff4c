use super::*;

#[test]
fn versions_parse_order_and_refuse_unknown_ones() {
    for v in SUPPORTED {
        assert_eq!(Version::parse(v.as_str()).ok(), Some(v));
    }
    assert!(Version::V0_3_1 < Version::V0_4_0 && Version::V1_0_0 < Version::V1_1_0);
    assert!(!Version::V0_3_1.has_check() && Version::V0_4_0.has_check());
    assert!(!Version::V1_0_0.has_status_and_gc() && Version::V1_1_0.has_status_and_gc());
    for bad in ["0.2.0", "1.2.0", "", "1.0"] {
        let err = Version::parse(bad).unwrap_err();
        assert_eq!(err.code, INCOMPATIBLE_VERSION, "{bad}");
        assert!(err.msg.contains(&format!("{bad:?}")), "{}", err.msg);
    }
}
