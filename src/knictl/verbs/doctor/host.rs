//! doctor's checks of the node's own kernel state, read with netlink and /proc/sys in
//! knictl's netns (the node's): bridges and parent devices, forwarding sysctls.

use knid_netops::{sysctl, Rtnl};
use knid_transport::pb;

use super::Finding;

/// The fix for anything `SetupNodeNetwork` repairs (bridge, gateways, up, forwarding).
const SETUP: &str = "knictl setup-node-network";

/// Each bridge network's bridge exists, is a bridge, is up and holds its gateways; each
/// macvlan/ipvlan network's parent exists and is up.
pub fn devices(networks: &pb::NetworksResponse, out: &mut Vec<Finding>) {
    let mut rtnl = match Rtnl::open() {
        Ok(rtnl) => rtnl,
        Err(e) => {
            out.push(Finding::warn(
                "bridge",
                format!("cannot open a netlink socket: {e}"),
                vec!["run knictl as root on the node".to_owned()],
            ));
            return;
        }
    };
    for n in &networks.networks {
        if !n.bridge.is_empty() {
            out.push(bridge(&mut rtnl, n));
        } else if !n.parent.is_empty() {
            out.push(parent(&mut rtnl, n));
        }
    }
}

fn bridge(rtnl: &mut Rtnl, n: &pb::Network) -> Finding {
    const CHECK: &str = "bridge";
    let name = &n.bridge;
    let link = match rtnl.link_by_name(name) {
        Ok(Some(link)) => link,
        Ok(None) => {
            return Finding::fail(
                CHECK,
                format!(
                    "network {}: bridge {name} is missing; attaches to it fail",
                    n.name
                ),
                vec![format!(
                    "{SETUP} (re-creates {name} with its gateways and puts the attached pods' \
                     host ends back on it)"
                )],
            )
        }
        Err(e) => {
            return Finding::warn(
                CHECK,
                format!("network {}: cannot look up {name}: {e}", n.name),
                Vec::new(),
            )
        }
    };
    if link.kind.as_deref() != Some("bridge") {
        return Finding::fail(
            CHECK,
            format!(
                "network {}: {name} is a {} device, not a bridge",
                n.name,
                link.kind.as_deref().unwrap_or("plain")
            ),
            vec![
                format!("remove or rename it: `ip link delete {name}`"),
                SETUP.to_owned(),
            ],
        );
    }
    if !link.up {
        return Finding::fail(
            CHECK,
            format!("network {}: bridge {name} is down", n.name),
            vec![format!("{SETUP} (or `ip link set {name} up`)")],
        );
    }
    let addresses: Vec<String> = rtnl
        .addresses(Some(link.index))
        .map(|list| list.iter().map(|a| a.net.addr().to_string()).collect())
        .unwrap_or_default();
    let missing: Vec<&String> = n
        .gateways
        .iter()
        .filter(|g| !g.is_empty() && !addresses.contains(g))
        .collect();
    if !missing.is_empty() {
        return Finding::fail(
            CHECK,
            format!(
                "network {}: bridge {name} lacks gateway {}",
                n.name,
                missing
                    .iter()
                    .map(|g| g.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            vec![SETUP.to_owned()],
        );
    }
    Finding::ok(
        CHECK,
        format!("network {}: bridge {name} is up with its gateways", n.name),
    )
}

fn parent(rtnl: &mut Rtnl, n: &pb::Network) -> Finding {
    const CHECK: &str = "parent";
    let name = &n.parent;
    match rtnl.link_by_name(name) {
        Ok(Some(link)) if link.up => {
            Finding::ok(CHECK, format!("network {}: parent {name} is up", n.name))
        }
        Ok(Some(_)) => Finding::fail(
            CHECK,
            format!("network {}: parent device {name} is down", n.name),
            vec![format!("`ip link set {name} up`")],
        ),
        Ok(None) => Finding::fail(
            CHECK,
            format!("network {}: parent device {name} is missing", n.name),
            vec![format!(
                "bring {name} back, or set network {}'s `parent` in /etc/knid/knid.toml to an \
                 existing device and reload knid (SIGHUP)",
                n.name
            )],
        ),
        Err(e) => Finding::warn(
            CHECK,
            format!("network {}: cannot look up {name}: {e}", n.name),
            Vec::new(),
        ),
    }
}

/// The families the networks have subnets in: (IPv4, IPv6).
fn families(networks: &pb::NetworksResponse) -> (bool, bool) {
    let subnets = networks.networks.iter().flat_map(|n| &n.subnets);
    let v6 = |s: &&String| s.contains(':');
    (
        subnets.clone().any(|s| !v6(&s)),
        subnets.clone().any(|s| v6(&s)),
    )
}

/// Forwarding is on for every family the networks route. knid turns both on at start-up, on
/// reload and on SetupNodeNetwork, but does not watch them: something else (a sysctl.d file
/// applied later, a firewall manager) can turn them off.
pub fn forwarding(networks: &pb::NetworksResponse, out: &mut Vec<Finding>) {
    const CHECK: &str = "forwarding";
    let (v4, v6) = families(networks);
    let keys = [
        (v4, "net/ipv4/ip_forward", "net.ipv4.ip_forward"),
        (
            v6,
            "net/ipv6/conf/all/forwarding",
            "net.ipv6.conf.all.forwarding",
        ),
    ];
    for (_, key, name) in keys.into_iter().filter(|(used, ..)| *used) {
        out.push(match sysctl::read(key) {
            Ok(value) if value == "1" => Finding::ok(CHECK, format!("{name} = 1")),
            Ok(value) => Finding::fail(
                CHECK,
                format!(
                    "{name} = {value}: pods cannot reach beyond the node (knid turns it on at \
                     start-up, on reload and on setup-node-network; something turned it off \
                     since)"
                ),
                vec![
                    format!("`sysctl -w {name}=1` (or {SETUP})"),
                    format!(
                        "keep it on across reboots and `sysctl --system`: \
                         `echo '{name} = 1' > /etc/sysctl.d/90-knid.conf`, and remove any \
                         sysctl.d file that sets it to 0"
                    ),
                ],
            ),
            Err(e) => Finding::warn(CHECK, format!("cannot read {name}: {e}"), Vec::new()),
        });
    }
}

#[cfg(test)]
mod tests;
