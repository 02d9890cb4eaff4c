use super::*;

#[test]
fn quantities_take_decimal_and_binary_suffixes() {
    assert_eq!(parse_quantity("10M"), Ok(10_000_000));
    assert_eq!(parse_quantity("100k"), Ok(100_000));
    assert_eq!(parse_quantity("1G"), Ok(1_000_000_000));
    assert_eq!(parse_quantity("2T"), Ok(2_000_000_000_000));
    assert_eq!(parse_quantity("1P"), Ok(1_000_000_000_000_000));
    assert_eq!(parse_quantity("1E"), Ok(1_000_000_000_000_000_000));
    assert_eq!(parse_quantity("1Ki"), Ok(1024));
    assert_eq!(parse_quantity("1Mi"), Ok(1_048_576));
    assert_eq!(parse_quantity("3Gi"), Ok(3 << 30));
    assert_eq!(parse_quantity("1Ti"), Ok(1 << 40));
    assert_eq!(parse_quantity("1Pi"), Ok(1 << 50));
    assert_eq!(parse_quantity("1Ei"), Ok(1 << 60));
    assert_eq!(parse_quantity("1500000"), Ok(1_500_000));
    assert_eq!(parse_quantity("1e6"), Ok(1_000_000));
}

#[test]
fn quantity_fractions_round_up_like_the_kubelet() {
    assert_eq!(parse_quantity("1.5M"), Ok(1_500_000));
    assert_eq!(parse_quantity("0.5k"), Ok(500));
    assert_eq!(parse_quantity("1.0001k"), Ok(1001));
    assert_eq!(parse_quantity(".5M"), Ok(500_000));
}

#[test]
fn quantities_refuse_garbage() {
    for bad in [
        "",
        "M",
        "10m",
        "10 M",
        "10Mb",
        "-1M",
        "1.2.3",
        "10MiB",
        "99999999999999999999E",
        "1e30",
        "+5",
    ] {
        let err = parse_quantity(bad).expect_err(bad);
        assert!(err.rule.contains("quantity"), "{bad}: {}", err.rule);
    }
}

#[test]
fn a_rate_without_a_burst_gets_the_default_burst() {
    let bw = Bandwidth::from_bits(10_000_000, 0, 0, 0)
        .expect("valid")
        .expect("limited");
    assert_eq!(
        bw.ingress,
        Some(RateLimit {
            rate: 10_000_000,
            burst: 1_000_000
        })
    );
    assert_eq!(bw.egress, None);
    assert_eq!(RateLimit::default_burst(1_000), 64 * 1024 * 8);
}

#[test]
fn no_rate_is_no_limit() {
    assert_eq!(Bandwidth::from_bits(0, 0, 0, 0), Ok(None));
}

#[test]
fn bad_limits_name_their_field() {
    let field = |r: Result<Option<Bandwidth>, (&'static str, Invalid)>| r.expect_err("bad").0;
    assert_eq!(field(Bandwidth::from_bits(0, 5, 0, 0)), "ingress_burst");
    assert_eq!(field(Bandwidth::from_bits(999, 0, 0, 0)), "ingress_rate");
    assert_eq!(
        field(Bandwidth::from_bits(0, 0, MAX_RATE + 1, 0)),
        "egress_rate"
    );
    assert_eq!(
        field(Bandwidth::from_bits(0, 0, 1_000_000, MAX_BURST + 1)),
        "egress_burst"
    );
}

#[test]
fn annotations_give_rates_with_the_dockershim_burst() {
    let annotations = [(INGRESS_ANNOTATION, "10M"), (EGRESS_ANNOTATION, "1Mi")];
    let lookup = |key: &str| annotations.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
    let bw = Bandwidth::from_annotations(lookup)
        .expect("valid")
        .expect("limited");
    assert_eq!(
        bw.ingress,
        Some(RateLimit {
            rate: 10_000_000,
            burst: ANNOTATION_BURST
        })
    );
    assert_eq!(bw.egress.map(|l| l.rate), Some(1_048_576));
    assert_eq!(Bandwidth::from_annotations(|_| None), Ok(None));
}

#[test]
fn bad_annotations_name_the_annotation() {
    let err = Bandwidth::from_annotations(|k| (k == EGRESS_ANNOTATION).then_some("fast"))
        .expect_err("bad");
    assert_eq!(err.0, EGRESS_ANNOTATION);
    let err = Bandwidth::from_annotations(|k| (k == INGRESS_ANNOTATION).then_some("10"))
        .expect_err("too small");
    assert_eq!(err.0, INGRESS_ANNOTATION);
    assert!(err.1.rule.contains("1k-1P"), "{}", err.1.rule);
}
