use super::*;

#[test]
fn families_come_from_the_subnets() {
    let net = |subnets: &[&str]| pb::Network {
        subnets: subnets.iter().map(|s| (*s).to_owned()).collect(),
        ..Default::default()
    };
    let resp = |nets: Vec<pb::Network>| pb::NetworksResponse {
        networks: nets,
        ..Default::default()
    };
    assert_eq!(families(&resp(vec![net(&["10.0.0.0/24"])])), (true, false));
    assert_eq!(
        families(&resp(vec![net(&["10.0.0.0/24"]), net(&["fd00::/64"])])),
        (true, true)
    );
    assert_eq!(families(&resp(vec![net(&[])])), (false, false));
}
