use super::*;

#[test]
fn embedded_default_has_one_dual_stack_bridge_network() {
    let config = Config::embedded_default().expect("default parses");
    let nets = config.networks().expect("valid");
    assert_eq!(nets.len(), 1);
    let net = &nets[0];
    assert_eq!(net.name, "default");
    assert_eq!(net.bridge(), Some("knid0"));
    assert_eq!(net.subnets[0].0.to_string(), "10.88.0.0/16");
    assert_eq!(net.subnets[0].1.to_string(), "10.88.0.1");
    assert_eq!(net.subnets[1].0.to_string(), "fd00:88::/64");
    assert_eq!(net.subnets[1].1.to_string(), "fd00:88::1");
    assert_eq!(config.socket, PathBuf::from(DEFAULT_SOCKET));
    assert_eq!(config.socket_mode, 0o660);
}

#[test]
fn config_errors_name_the_key() {
    let cases = [
        ("[networks.n]\nbridge = \"b\"\nsubnets = [\"10.0.0.1/24\"]", "networks.n.subnets[0]"),
        ("[networks.n]\nbridge = \"b\"\nsubnets = [\"10.0.0.0/24\", \"10.1.0.0/24\"]", "networks.n.subnets[1]"),
        ("[networks.n]\nbridge = \"b/c\"\nsubnets = [\"10.0.0.0/24\"]", "networks.n.bridge"),
        ("[networks.n]\nbridge = \"b\"\nmtu = 9\nsubnets = [\"10.0.0.0/24\"]", "networks.n.mtu"),
        ("[networks.n]\nbridge = \"b\"\nsubnets = [\"10.0.0.0/24\"]\ngateways = [\"10.0.1.1\"]", "networks.n.gateways[0]"),
        ("[networks.n]\nbridge = \"b\"\nsubnets = [\"10.0.0.0/24\"]\ngateways = [\"10.0.0.255\"]", "networks.n.gateways[0]"),
        ("[networks.n]\nkind = \"vxlan\"\nbridge = \"b\"\nsubnets = [\"10.0.0.0/24\"]", "networks.n.kind"),
        ("[networks.n]\nbridge = \"b\"\nsubnets = [\"10.0.0.0/31\"]", "networks.n.subnets[0]"),
        ("[networks.a]\nbridge = \"b\"\nsubnets = [\"10.0.0.0/24\"]\n[networks.c]\nbridge = \"b\"\nsubnets = [\"10.1.0.0/24\"]", "networks.c.bridge"),
        ("bogus = 1", "bogus"),
        ("gc_interval = \"60\"", "gc_interval"),
        ("gc_interval = \"1d\"", "gc_interval"),
        ("gc_interval = \"-5s\"", "gc_interval"),
        ("gc_interval = \"99999999999999999h\"", "gc_interval"),
        ("reaper_group = 0", "reaper_group"),
        ("dan_dir = \"dans\"", "dan_dir"),
        ("netns_dir = \"/srv/netns\"", "netns_dir"),
        ("netns_dir = \"netns\"", "netns_dir"),
        ("[networks.n]\nsubnets = [\"10.0.0.0/24\"]", "networks.n.bridge"),
        ("[networks.n]\nkind = \"routed\"\nbridge = \"b\"\nsubnets = [\"10.0.0.0/24\"]", "networks.n.bridge"),
        ("[networks.n]\nkind = \"routed\"\nsubnets = [\"10.0.0.0/24\"]\ngateways = [\"10.0.0.1\"]", "networks.n.gateways"),
        ("[networks.n]\nkind = \"routed\"", "networks.n.subnets"),
        ("[networks.n]\nkind = \"macvlan\"\nsubnets = [\"10.0.0.0/24\"]", "networks.n.parent"),
        ("[networks.n]\nkind = \"macvlan\"\nparent = \"eth/1\"\nsubnets = [\"10.0.0.0/24\"]", "networks.n.parent"),
        ("[networks.n]\nkind = \"macvlan\"\nparent = \"p\"\nmode = \"l3\"\nsubnets = [\"10.0.0.0/24\"]", "networks.n.mode"),
        ("[networks.n]\nkind = \"ipvlan\"\nparent = \"p\"\nmode = \"bridge\"\nsubnets = [\"10.0.0.0/24\"]", "networks.n.mode"),
        ("[networks.n]\nkind = \"bridge\"\nbridge = \"b\"\nmode = \"l2\"\nsubnets = [\"10.0.0.0/24\"]", "networks.n.mode"),
        ("[networks.n]\nkind = \"cni\"", "networks.n.conflist"),
        ("[networks.n]\nkind = \"cni\"\nconflist = \"/nonexistent/x.conflist\"", "networks.n.conflist"),
        ("[networks.n]\nkind = \"cni\"\nconflist_inline = \"{}\"", "networks.n.conflist_inline"),
        ("[networks.n]\nkind = \"cni\"\nconflist_inline = '{\"cniVersion\":\"1.0.0\",\"name\":\"n\",\"plugins\":[{\"type\":\"a/b\"}]}'", "plugins[0].type"),
        ("[networks.n]\nkind = \"cni\"\nsubnets = [\"10.0.0.0/24\"]\nconflist_inline = '{\"cniVersion\":\"1.0.0\",\"name\":\"n\",\"type\":\"x\"}'", "networks.n.subnets"),
        ("[networks.n]\nkind = \"cni\"\nbridge = \"b\"\nconflist_inline = '{\"cniVersion\":\"1.0.0\",\"name\":\"n\",\"type\":\"x\"}'", "networks.n.bridge"),
        ("[networks.n]\nbridge = \"b\"\nsubnets = [\"10.0.0.0/24\"]\nconflist = \"/x\"", "networks.n.conflist"),
        ("cni_path = [\"relative\"]\n[networks.n]\nbridge = \"b\"\nsubnets = [\"10.0.0.0/24\"]", "cni_path"),
        ("cni_timeout = \"0s\"\n[networks.n]\nbridge = \"b\"\nsubnets = [\"10.0.0.0/24\"]", "cni_timeout"),
        ("[networks.n]\nkind = \"host-device\"\nparent = \"p\"", "networks.n.parent"),
        ("extension_health_interval = \"10\"", "extension_health_interval"),
        ("required_extensions = [\"mesh/1\"]", "required_extensions[0]"),
        ("required_extensions = [\"mesh\", \"\"]", "required_extensions[1]"),
        ("required_extensions = [\"mesh\", \"mesh\"]", "required_extensions[1]"),
    ];
    for (text, key) in cases {
        let err = Config::from_toml(text).expect_err(text).to_string();
        assert!(err.contains(key), "{err:?} does not name {key}");
    }
}

#[test]
fn gc_interval_takes_units_and_zero_turns_it_off() {
    let interval = |text: &str| {
        Config::from_toml(&format!("gc_interval = \"{text}\""))
            .expect(text)
            .gc_interval()
            .expect(text)
    };
    assert_eq!(interval("250ms"), Some(Duration::from_millis(250)));
    assert_eq!(interval("60s"), Some(Duration::from_secs(60)));
    assert_eq!(interval("5m"), Some(Duration::from_secs(300)));
    assert_eq!(interval("1h"), Some(Duration::from_secs(3600)));
    assert_eq!(interval("0s"), None);
    let default = Config::embedded_default().expect("default");
    assert_eq!(
        default.gc_interval().expect("valid"),
        Some(Duration::from_secs(60))
    );
    assert_eq!(default.reaper_group, DEFAULT_REAPER_GROUP);
}

#[test]
fn extension_settings_default_to_a_10s_poll_and_nothing_required() {
    let default = Config::embedded_default().expect("default");
    assert_eq!(
        default.extension_health_interval().expect("valid"),
        Some(Duration::from_secs(10))
    );
    assert!(default.required_extensions().expect("valid").is_empty());
    let config = Config::from_toml(
        "extension_health_interval = \"0s\"\nrequired_extensions = [\"mesh\", \"policy.v2\"]",
    )
    .expect("valid");
    assert_eq!(config.extension_health_interval().expect("valid"), None);
    assert_eq!(
        config.required_extensions().expect("valid"),
        ["mesh", "policy.v2"]
    );
}
