use super::*;

fn tree() -> tempfile::TempDir {
    let root = tempfile::tempdir().expect("tempdir");
    let dev = |pci: &str| root.path().join("bus/pci/devices").join(pci);
    fs::create_dir_all(dev("0000:3b:00.1").join("net/ens1f1")).expect("one netdev");
    fs::create_dir_all(dev("0000:3b:00.2")).expect("no net dir");
    fs::create_dir_all(dev("0000:3b:00.3").join("net")).expect("empty net dir");
    fs::create_dir_all(dev("0000:5e:00.0").join("net/p0")).expect("two netdevs");
    fs::create_dir_all(dev("0000:5e:00.0").join("net/p1")).expect("two netdevs");
    root
}

#[test]
fn pci_function_with_one_netdev_names_it() {
    let root = tree();
    assert_eq!(
        pci_netdev(root.path(), "0000:3b:00.1").expect("lookup"),
        Some("ens1f1".to_owned())
    );
}

#[test]
fn pci_function_without_netdev_is_none() {
    let root = tree();
    assert_eq!(
        pci_netdev(root.path(), "0000:3b:00.2").expect("no net/"),
        None
    );
    assert_eq!(
        pci_netdev(root.path(), "0000:3b:00.3").expect("empty"),
        None
    );
}

#[test]
fn missing_pci_device_is_an_error_not_none() {
    let root = tree();
    let err = pci_netdev(root.path(), "0000:3b:00.4").expect_err("no such device");
    assert_eq!(err.errno(), Some(libc::ENOENT));
    assert!(err.to_string().contains("0000:3b:00.4"), "{err}");
}

#[test]
fn pci_function_with_two_netdevs_is_an_error_naming_them() {
    let root = tree();
    let err = pci_netdev(root.path(), "0000:5e:00.0").expect_err("ambiguous");
    let cause = std::error::Error::source(&err).map(ToString::to_string);
    assert_eq!(
        cause.as_deref(),
        Some("carries 2 netdevs (p0, p1), not one")
    );
}

#[test]
fn malformed_pci_addresses_are_refused_with_the_rule() {
    let root = tree();
    for bad in [
        "",
        "3b:00.1",
        "0000:3B:00.1",
        "0000:3b:00.8",
        "0000:3b:20.0",
        "0000:3b:00.1/",
        "0000:3b:00.1 ",
        "00000:3b:00.1",
        "0000-3b-00.1",
        "../../../..x",
        "0000:3g:00.1",
    ] {
        let err = pci_netdev(root.path(), bad).expect_err(bad);
        let cause = std::error::Error::source(&err).map(ToString::to_string);
        assert_eq!(cause.as_deref(), Some(PCI_ADDRESS_RULE), "{bad:?}");
    }
}

#[test]
fn well_formed_pci_addresses_pass_the_check() {
    for good in [
        "0000:00:00.0",
        "ffff:ff:1f.7",
        "0000:3b:00.1",
        "000a:0b:1c.3",
    ] {
        assert!(is_pci_address(good), "{good}");
    }
}
