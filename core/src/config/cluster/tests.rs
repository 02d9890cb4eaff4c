use super::*;
use crate::config::Config;

fn parse(text: &str, node_name: Option<&str>) -> Result<Option<Cluster>> {
    let config: Config = toml::from_str(text).expect("toml");
    config.cluster.parse(|key| {
        (key == "NODE_NAME")
            .then(|| node_name.map(String::from))
            .flatten()
    })
}

#[test]
fn cluster_mode_is_off_by_default() {
    assert_eq!(parse("", Some("a")).expect("parse"), None);
}

#[test]
fn node_name_comes_from_the_environment_and_the_service_account_by_default() {
    let cluster = parse("[cluster]\nenabled = true\n", Some("node-a"))
        .expect("parse")
        .expect("on");
    assert_eq!(cluster.node_name, "node-a");
    assert_eq!(
        cluster.credentials,
        Credentials::InCluster(SERVICE_ACCOUNT_DIR.into())
    );
    assert!(cluster.routes);
    assert_eq!(cluster.route_resync, Duration::from_secs(30));
    assert_eq!(cluster.publish_interval, Duration::from_secs(1));
    assert_eq!(cluster.annotation_interval, Duration::from_secs(10));
    assert_eq!(cluster.full_taint, Some(WaterMarks { low: 0, high: 1 }));
}

#[test]
fn the_full_taint_can_be_turned_off_and_its_water_marks_set() {
    let off = parse("[cluster]\nenabled = true\nfull_taint = false\n", Some("a"))
        .expect("parse")
        .expect("on");
    assert_eq!(off.full_taint, None);
    let marks = parse(
        "[cluster]\nenabled = true\nfull_taint_low_water = 2\nfull_taint_high_water = 5\n",
        Some("a"),
    )
    .expect("parse")
    .expect("on");
    assert_eq!(marks.full_taint, Some(WaterMarks { low: 2, high: 5 }));
}

#[test]
fn a_missing_node_name_is_refused_naming_the_key_and_the_variable() {
    let err = parse("[cluster]\nenabled = true\n", None).expect_err("no name");
    let text = err.to_string();
    assert!(
        text.contains("cluster.node_name") && text.contains("NODE_NAME"),
        "{text}"
    );
}

#[test]
fn bad_values_name_their_key() {
    for (body, key) in [
        ("node_name = \"Node_A\"", "cluster.node_name"),
        ("kubeconfig = \"kube.yaml\"", "cluster.kubeconfig"),
        (
            "cluster_cidrs = [\"10.244.0.1/16\"]",
            "cluster.cluster_cidrs[0]",
        ),
        ("route_resync = \"0s\"", "cluster.route_resync"),
        ("route_resync = \"soon\"", "cluster.route_resync"),
        ("publish_interval = \"0s\"", "cluster.publish_interval"),
        ("full_taint_high_water = 0", "cluster.full_taint_high_water"),
        (
            "full_taint_low_water = 3\nfull_taint_high_water = 3",
            "cluster.full_taint_high_water",
        ),
    ] {
        let text = format!("[cluster]\nenabled = true\n{body}\n");
        let err = parse(&text, Some("a")).expect_err(body).to_string();
        assert!(err.contains(key), "{body}: {err}");
    }
}

#[test]
fn pod_cidr_from_node_needs_cluster_mode_and_no_subnets() {
    let net = "[networks.pods]\nkind = \"bridge\"\nbridge = \"kn0\"\npod_cidr_from_node = true\n";
    let err = Config::from_toml(net)
        .expect_err("no cluster mode")
        .to_string();
    assert!(err.contains("networks.pods.pod_cidr_from_node"), "{err}");
    let with_subnets =
        format!("[cluster]\nenabled = true\nnode_name = \"a\"\n{net}subnets = [\"10.1.0.0/16\"]\n");
    let err = Config::from_toml(&with_subnets)
        .expect_err("subnets")
        .to_string();
    assert!(err.contains("networks.pods.subnets"), "{err}");
    let ok = format!("[cluster]\nenabled = true\nnode_name = \"a\"\n{net}");
    let networks = Config::from_toml(&ok)
        .expect("valid")
        .networks()
        .expect("networks");
    assert!(networks[0].awaits_pod_cidr());
    let cidrs: Vec<IpNet> = vec![
        "fd00:10:244:1::/64".parse().expect("v6"),
        "10.244.1.0/24".parse().expect("v4"),
    ];
    let filled = networks[0].with_pod_cidrs(&cidrs).expect("fill");
    assert_eq!(filled.subnets[0].1.to_string(), "10.244.1.1");
    assert_eq!(filled.subnets[1].1.to_string(), "fd00:10:244:1::1");
    let err = networks[0]
        .with_pod_cidrs(&["10.244.1.0/30".parse().expect("v4")])
        .expect_err("too small");
    assert!(err.contains("10.244.1.0/30"), "{err}");
}

#[test]
fn only_one_network_takes_the_pod_cidr() {
    let text = "[cluster]\nenabled = true\nnode_name = \"a\"\n\
        [networks.a]\nkind = \"routed\"\npod_cidr_from_node = true\n\
        [networks.b]\nkind = \"routed\"\npod_cidr_from_node = true\n";
    let err = Config::from_toml(text).expect_err("two").to_string();
    assert!(
        err.contains("networks.b.pod_cidr_from_node") && err.contains("network a"),
        "{err}"
    );
}

#[test]
fn the_backend_is_auto_over_vxlan_port_8472_vni_1_by_default_and_each_setting_is_checked() {
    let on = parse("[cluster]\nenabled = true\n", Some("a"))
        .expect("parse")
        .expect("on");
    assert_eq!(on.backend, Backend::Auto);
    assert_eq!(
        on.vxlan,
        VxlanSettings {
            vni: 1,
            port: 8472,
            device: None
        }
    );
    let set = parse(
        "[cluster]\nenabled = true\nbackend = \"vxlan\"\nvxlan_vni = 42\nvxlan_port = 4789\n\
         vxlan_device = \"eth1\"\n",
        Some("a"),
    )
    .expect("parse")
    .expect("on");
    assert_eq!(set.backend, Backend::Vxlan);
    assert_eq!(set.vxlan.vni, 42);
    assert_eq!(set.vxlan.port, 4789);
    assert_eq!(set.vxlan.device.as_deref(), Some("eth1"));
    for (line, field) in [
        ("backend = \"ipip\"", "cluster.backend"),
        ("vxlan_vni = 0", "cluster.vxlan_vni"),
        ("vxlan_vni = 16777216", "cluster.vxlan_vni"),
        ("vxlan_port = 0", "cluster.vxlan_port"),
        ("vxlan_device = \"a/b\"", "cluster.vxlan_device"),
    ] {
        let err = parse(&format!("[cluster]\nenabled = true\n{line}\n"), Some("a"))
            .expect_err(line)
            .to_string();
        assert!(err.contains(field), "{line}: {err}");
    }
}
