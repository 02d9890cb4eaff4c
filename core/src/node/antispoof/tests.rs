use knid_netops::nft::{Guard, GuardChain};

use super::difference;

fn guard() -> Guard {
    Guard {
        device: "kn0000000001".into(),
        mac: [0x02, 0, 0, 0, 0, 1],
        addresses: vec!["10.88.0.5".parse().expect("ip")],
    }
}

fn chain(summary: &str) -> GuardChain {
    GuardChain {
        name: "kn0000000001".into(),
        device: "kn0000000001".into(),
        summary: summary.into(),
    }
}

#[test]
fn a_guard_differs_when_missing_hooked_elsewhere_or_built_for_other_addresses() {
    let want = guard();
    assert_eq!(difference(&want, Some(&[chain(&want.summary())])), None);
    assert_eq!(
        difference(&want, None).as_deref(),
        Some("kn0000000001 has no source guard")
    );
    assert!(difference(&want, Some(&[])).is_some());
    let mut elsewhere = chain(&want.summary());
    elsewhere.device = "eth0".into();
    assert!(difference(&want, Some(&[elsewhere])).is_some_and(|d| d.contains("hooks \"eth0\"")));
    let stale = difference(&want, Some(&[chain("02:00:00:00:00:01 10.88.0.9")]));
    assert!(stale.is_some_and(|d| d.contains("10.88.0.9")));
}
