use knid_netops::nft::Protocol;

use super::super::Level;
use super::*;

fn element(port: u16) -> PortMap {
    PortMap {
        protocol: Protocol::Tcp,
        host_ip: None,
        host_port: port,
        target: "10.88.0.5".parse().expect("address"),
        target_port: 80,
    }
}

fn full_table(port_maps: Vec<PortMap>) -> TableContents {
    TableContents {
        chains: [
            "postrouting",
            "prerouting",
            "output",
            "hostports",
            "masq-default",
        ]
        .map(str::to_owned)
        .to_vec(),
        port_maps,
    }
}

#[test]
fn a_table_holding_every_element_passes() {
    let expected = vec![("web".to_owned(), element(8080))];
    let f = judge(Ok(Some(full_table(vec![element(8080)]))), &expected);
    assert_eq!(f.level, Level::Ok, "{}", f.message);
}

#[test]
fn a_missing_element_fails_naming_it_and_its_sandbox_with_the_rebuild_as_fix() {
    let expected = vec![
        ("web".to_owned(), element(8080)),
        ("api".to_owned(), element(9090)),
    ];
    let f = judge(Ok(Some(full_table(vec![element(8080)]))), &expected);
    assert_eq!(f.level, Level::Fail);
    assert!(
        f.message.contains("tcp/9090 -> 10.88.0.5:80 (sandbox api)"),
        "{}",
        f.message
    );
    assert!(
        f.fixes[0].contains("knictl setup-node-network"),
        "{:?}",
        f.fixes
    );
}

#[test]
fn a_table_gone_or_without_its_chains_fails() {
    let f = judge(Ok(None), &[]);
    assert_eq!(f.level, Level::Fail);
    assert!(f.message.contains("does not exist"), "{}", f.message);
    let mut table = full_table(Vec::new());
    table.chains.retain(|c| c != "hostports");
    let f = judge(Ok(Some(table)), &[]);
    assert_eq!(f.level, Level::Fail);
    assert!(f.message.contains("hostports"), "{}", f.message);
}
