use super::*;
use crate::config::Config;

fn configured() -> Vec<Network> {
    Config::from_toml(
        "[cluster]\nenabled = true\nnode_name = \"a\"\n\
         [networks.pods]\nkind = \"bridge\"\nbridge = \"kn0\"\npod_cidr_from_node = true\n\
         [networks.local]\nkind = \"routed\"\nsubnets = [\"10.99.0.0/24\"]\n\
         [networks.flat]\nkind = \"routed\"\nsubnets = [\"10.98.0.0/24\"]\nmasquerade = false\n",
    )
    .expect("config")
    .networks()
    .expect("networks")
}

fn net(text: &str) -> IpNet {
    text.parse().expect("net")
}

fn find<'a>(networks: &'a [Network], name: &str) -> &'a Network {
    networks.iter().find(|n| n.name == name).expect("network")
}

#[test]
fn the_pod_cidr_network_waits_then_takes_the_node_cidrs() {
    let mut plan = Plan {
        configured: configured(),
        ..Plan::default()
    };
    assert!(find(&plan.networks(), "pods").awaits_pod_cidr());
    plan.pod_cidrs = Some(vec![net("10.244.1.0/24")]);
    let networks = plan.networks();
    let pods = find(&networks, "pods");
    assert_eq!(
        pods.subnets,
        [(net("10.244.1.0/24"), "10.244.1.1".parse().expect("ip"))]
    );
    assert_eq!(plan.unusable, None);
    assert_eq!(
        find(&networks, "local").subnets[0].0,
        net("10.99.0.0/24"),
        "others untouched"
    );
}

#[test]
fn every_masquerade_leaves_the_cluster_cidrs_alone() {
    let mut plan = Plan {
        configured: configured(),
        pod_cidrs: Some(vec![net("10.244.1.0/24")]),
        cluster_cidrs: vec![net("10.244.0.0/16"), net("fd00:10:244::/56")],
        unusable: None,
    };
    let networks = plan.networks();
    for name in ["pods", "local"] {
        let except = find(&networks, name)
            .masquerade
            .as_ref()
            .expect("masquerades");
        assert!(except.contains(&net("10.244.0.0/16")), "{name}: {except:?}");
        assert!(
            except.contains(&net("fd00:10:244::/56")),
            "{name}: {except:?}"
        );
    }
    assert_eq!(
        find(&networks, "flat").masquerade,
        None,
        "masquerade off stays off"
    );
}

#[test]
fn pod_cidrs_the_network_cannot_use_are_reported_and_not_applied() {
    let mut plan = Plan {
        configured: configured(),
        pod_cidrs: Some(vec![net("10.244.1.0/30")]),
        ..Plan::default()
    };
    let networks = plan.networks();
    assert!(find(&networks, "pods").awaits_pod_cidr());
    let why = plan.unusable.clone().expect("unusable");
    assert!(
        why.contains("network pods") && why.contains("10.244.1.0/30"),
        "{why}"
    );
}
