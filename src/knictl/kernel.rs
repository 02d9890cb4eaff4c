//! The live kernel view of a sandbox for `knictl inspect`: what the kernel has now, compared
//! with what knid recorded. knictl runs as root on the node, in the node's (host) netns, so it
//! opens the sandbox's netns itself; nothing here changes the kernel.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::Path;

use knid_core::model::PortMapping;
use knid_core::node::{host_ports, nat};
use knid_netops::nft::{Nft, PortMap, TableContents};
use knid_netops::{Link, NetnsHandle, Rtnl};
use knid_transport::pb;
use serde_json::{json, Value};

/// One link as the kernel has it, or its absence.
#[derive(Debug, Clone)]
pub struct LinkView {
    /// The name looked up.
    pub name: String,
    /// The link, when it exists.
    pub found: Option<Found>,
}

/// What the kernel reports about an existing link.
#[derive(Debug, Clone)]
pub struct Found {
    /// Interface index.
    pub index: u32,
    /// MAC address, lower-case.
    pub mac: String,
    /// Administratively up.
    pub up: bool,
    /// The bridge it is a port of, by name.
    pub master: Option<String>,
    /// Its addresses as `ip/prefix`.
    pub addresses: Vec<String>,
}

/// The live view of one interface.
#[derive(Debug, Clone, Default)]
pub struct LiveInterface {
    /// Pod-side interface name.
    pub name: String,
    /// The pod-side link, when the kind has one in the sandbox netns.
    pub pod_link: Option<LinkView>,
    /// The host-side link (veth host end, DAN tap, macvlan/ipvlan parent), when the kind has one.
    pub host_link: Option<LinkView>,
    /// The tap beside the pod link (kind tap without DAN).
    pub tap: Option<LinkView>,
    /// Differences from the record, each starting with a flag word (MISSING, DOWN, ...).
    pub problems: Vec<String>,
}

/// The live view of a sandbox.
#[derive(Debug, Clone, Default)]
pub struct LiveSandbox {
    /// Why the sandbox's netns could not be looked at, if it could not (MISSING ...).
    pub netns_problem: Option<String>,
    /// Why the host netns could not be looked at, if it could not.
    pub host_problem: Option<String>,
    /// One per recorded interface, in the record's order.
    pub interfaces: Vec<LiveInterface>,
    /// Why knid's nf_tables table could not be looked at, or that it does not exist, when the
    /// sandbox has host ports.
    pub nft_problem: Option<String>,
    /// The host-port elements the sandbox's mappings call for, each with whether the kernel
    /// has it.
    pub host_ports: Vec<LiveHostPort>,
}

/// One host-port element (a mapping towards one pod address) and whether knid's table has it.
#[derive(Debug, Clone)]
pub struct LiveHostPort {
    /// The element.
    pub element: PortMap,
    /// Whether it is in the kernel.
    pub present: bool,
}

impl LiveSandbox {
    /// Whether every object is where knid recorded it.
    pub fn ok(&self) -> bool {
        self.netns_problem.is_none()
            && self.host_problem.is_none()
            && self.nft_problem.is_none()
            && self.interfaces.iter().all(|i| i.problems.is_empty())
            && self.host_ports.iter().all(|p| p.present)
    }
}

/// Looks at the kernel for every interface of `sandbox` and its host ports; `bridges` maps
/// network names to their bridge (the master a host end must have), `kinds` to their kind.
pub fn probe(
    sandbox: &pb::Sandbox,
    bridges: &HashMap<String, String>,
    kinds: &HashMap<String, String>,
) -> LiveSandbox {
    let mut live = LiveSandbox::default();
    let expected = expected_host_ports(sandbox, kinds);
    if !expected.is_empty() {
        let table = match read_table() {
            Ok(Some(table)) => Some(table),
            Ok(None) => {
                live.nft_problem = Some(format!("MISSING nf_tables table inet {}", nat::TABLE));
                None
            }
            Err(problem) => {
                live.nft_problem = Some(problem);
                None
            }
        };
        live.host_ports = expected
            .into_iter()
            .map(|element| LiveHostPort {
                present: table
                    .as_ref()
                    .is_some_and(|t| t.port_maps.contains(&element)),
                element,
            })
            .collect();
    }
    let mut pod =
        match NetnsHandle::open(Path::new(&sandbox.netns_path)).and_then(|ns| Rtnl::open_in(&ns)) {
            Ok(rtnl) => Some(rtnl),
            Err(e) => {
                live.netns_problem = Some(format!("MISSING netns {}: {e}", sandbox.netns_path));
                None
            }
        };
    let mut host = match Rtnl::open() {
        Ok(rtnl) => Some(rtnl),
        Err(e) => {
            live.host_problem = Some(format!("host netns unreadable: {e}"));
            None
        }
    };
    for iface in &sandbox.interfaces {
        live.interfaces.push(probe_interface(
            iface,
            pod.as_mut(),
            host.as_mut(),
            bridges.get(&iface.network).map(String::as_str),
        ));
    }
    live
}

/// knid's table as the kernel has it (`None`: it does not exist), or why it could not be read.
pub fn read_table() -> Result<Option<TableContents>, String> {
    Nft::open()
        .and_then(|mut nft| nft.table(nat::TABLE))
        .map_err(|e| format!("nf_tables table inet {} unreadable: {e}", nat::TABLE))
}

/// The host-port elements knid keeps for `sandbox` while it is attached: its mappings towards
/// the addresses of its first interface, when that is attached on a `bridge` or `routed`
/// network (`kinds` maps network names to their kind).
pub fn expected_host_ports(sandbox: &pb::Sandbox, kinds: &HashMap<String, String>) -> Vec<PortMap> {
    let Some(first) = sandbox.interfaces.first().filter(|i| i.state == "attached") else {
        return Vec::new();
    };
    if !matches!(
        kinds.get(&first.network).map(String::as_str),
        Some("bridge" | "routed")
    ) {
        return Vec::new();
    }
    let mappings: Vec<PortMapping> = sandbox
        .port_mappings
        .iter()
        .map(|p| PortMapping {
            host_port: u16::try_from(p.host_port).unwrap_or_default(),
            container_port: u16::try_from(p.container_port).unwrap_or_default(),
            protocol: p.protocol.clone(),
            host_ip: p.host_ip.parse().ok(),
        })
        .collect();
    let addrs: Vec<IpAddr> = first
        .ips
        .iter()
        .filter_map(|c| cidr(&c.address))
        .map(|(ip, _)| ip)
        .collect();
    host_ports::elements(&mappings, &addrs)
}

/// Whether `iface` is a Kata DAN tap: it lives in the host netns and nothing is created in the
/// sandbox's.
pub(crate) fn is_dan(iface: &pb::InterfaceResult) -> bool {
    !iface.dan_path.is_empty()
}

fn probe_interface(
    iface: &pb::InterfaceResult,
    pod: Option<&mut Rtnl>,
    host: Option<&mut Rtnl>,
    bridge: Option<&str>,
) -> LiveInterface {
    let mut live = LiveInterface {
        name: iface.name.clone(),
        ..LiveInterface::default()
    };
    // Before "attached" (or once detaching) objects come and go by design: shown, not flagged.
    let judge = iface.state == "attached";
    let mut problems = Vec::new();
    if pod.is_none() && !is_dan(iface) {
        problems.push(format!("MISSING netns: {} not visible", iface.name));
    }
    if let (false, Some(pod)) = (is_dan(iface), pod) {
        let view = look(pod, &iface.name);
        if let Some(found) = &view.found {
            check_pod_link(iface, found, &mut problems);
            check_routes(iface, pod, found.index, &mut problems);
        } else {
            problems.push(format!("MISSING pod link {}", iface.name));
        }
        live.pod_link = Some(view);
        if let Some(tap) = iface.tap.as_ref() {
            let view = look(pod, &tap.name);
            if view.found.is_none() {
                problems.push(format!("MISSING tap {}", tap.name));
            }
            live.tap = Some(view);
        }
    }
    let has_host = !iface.host_ifname.is_empty() && iface.kind != "host-device";
    if let (true, Some(host)) = (has_host, host) {
        let view = look(host, &iface.host_ifname);
        match &view.found {
            None => problems.push(format!("MISSING host link {}", iface.host_ifname)),
            Some(found) => {
                if !found.up {
                    problems.push(format!("DOWN host link {}", iface.host_ifname));
                }
                // A macvlan/ipvlan parent is never a port; a veth end or DAN tap of a bridge
                // network must be one of its bridge.
                let enslaved = matches!(iface.kind.as_str(), "veth" | "tap");
                match (bridge.filter(|_| enslaved), &found.master) {
                    (Some(want), None) => problems.push(format!(
                        "NOT ENSLAVED host link {} (want master {want})",
                        iface.host_ifname
                    )),
                    (Some(want), Some(got)) if got != want => problems.push(format!(
                        "WRONG MASTER host link {}: {got}, want {want}",
                        iface.host_ifname
                    )),
                    _ => {}
                }
            }
        }
        live.host_link = Some(view);
    }
    if judge {
        live.problems = problems;
    }
    live
}

/// A link by name with its master's name and its addresses. A failed lookup reads as absence:
/// the view is advisory, and `knictl check` is the authoritative comparison.
fn look(rtnl: &mut Rtnl, name: &str) -> LinkView {
    let found = rtnl.link_by_name(name).ok().flatten().map(|link| {
        let master = link
            .controller
            .and_then(|i| rtnl.link_by_index(i).ok().flatten())
            .map(|m| m.name);
        let addresses = rtnl
            .addresses(Some(link.index))
            .map(|list| list.iter().map(|a| a.net.to_string()).collect())
            .unwrap_or_default();
        found_of(&link, master, addresses)
    });
    LinkView {
        name: name.to_owned(),
        found,
    }
}

fn found_of(link: &Link, master: Option<String>, addresses: Vec<String>) -> Found {
    Found {
        index: link.index,
        mac: link.mac.map(|m| mac_text(&m)).unwrap_or_default(),
        up: link.up,
        master,
        addresses,
    }
}

/// `aa:bb:cc:dd:ee:ff`.
fn mac_text(mac: &[u8; 6]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// `ip/prefix` parsed, so `fd00::5/64` and `fd00:0::5/64` compare equal.
fn cidr(text: &str) -> Option<(IpAddr, u8)> {
    let (ip, len) = text.split_once('/')?;
    Some((ip.parse().ok()?, len.parse().ok()?))
}

fn check_pod_link(iface: &pb::InterfaceResult, found: &Found, problems: &mut Vec<String>) {
    if !found.up {
        problems.push(format!("DOWN pod link {}", iface.name));
    }
    // A cni interface whose plugins reported no MAC is recorded with the zero address.
    let recorded = !iface.mac.is_empty() && iface.mac != "00:00:00:00:00:00";
    if recorded && !found.mac.eq_ignore_ascii_case(&iface.mac) {
        problems.push(format!(
            "MAC MISMATCH pod link {}: kernel {}, recorded {}",
            iface.name, found.mac, iface.mac
        ));
    }
    let live: Vec<_> = found.addresses.iter().filter_map(|a| cidr(a)).collect();
    for ip in &iface.ips {
        if cidr(&ip.address).is_some_and(|want| !live.contains(&want)) {
            problems.push(format!("MISSING address {} on {}", ip.address, iface.name));
        }
    }
}

fn check_routes(iface: &pb::InterfaceResult, pod: &mut Rtnl, index: u32, out: &mut Vec<String>) {
    for ipv6 in [false, true] {
        let wanted: Vec<&pb::Route> = iface
            .routes
            .iter()
            .filter(|r| cidr(&r.dst).is_some_and(|(ip, _)| ip.is_ipv6() == ipv6))
            .collect();
        if wanted.is_empty() {
            continue;
        }
        let Ok(routes) = pod.routes(ipv6) else {
            continue;
        };
        for r in wanted {
            let gateway: Option<IpAddr> = r.gateway.parse().ok();
            let present = routes.iter().any(|k| {
                cidr(&k.dst.to_string()) == cidr(&r.dst)
                    && k.gateway == gateway
                    && k.oif.is_none_or(|o| o == index)
            });
            if !present {
                let via = gateway.map_or(String::new(), |g| format!(" via {g}"));
                out.push(format!("MISSING route {}{via} on {}", r.dst, iface.name));
            }
        }
    }
}

fn link_json(view: &LinkView) -> Value {
    match &view.found {
        None => json!({ "name": view.name, "present": false }),
        Some(f) => json!({
            "name": view.name,
            "present": true,
            "index": f.index,
            "mac": f.mac,
            "up": f.up,
            "master": f.master,
            "addresses": f.addresses,
        }),
    }
}

/// The live view as JSON: `ok`, the netns and host problems, and per interface its links and
/// problems.
pub fn to_json(live: &LiveSandbox) -> Value {
    let interfaces: Vec<Value> = live
        .interfaces
        .iter()
        .map(|i| {
            json!({
                "name": i.name,
                "ok": i.problems.is_empty(),
                "problems": i.problems,
                "pod_link": i.pod_link.as_ref().map(link_json),
                "host_link": i.host_link.as_ref().map(link_json),
                "tap": i.tap.as_ref().map(link_json),
            })
        })
        .collect();
    let host_ports: Vec<Value> = live
        .host_ports
        .iter()
        .map(|p| {
            json!({
                "protocol": p.element.protocol.to_string(),
                "host_ip": p.element.host_ip.map(|ip| ip.to_string()),
                "host_port": p.element.host_port,
                "target": p.element.target.to_string(),
                "target_port": p.element.target_port,
                "present": p.present,
            })
        })
        .collect();
    json!({
        "ok": live.ok(),
        "netns_problem": live.netns_problem,
        "host_problem": live.host_problem,
        "nft_problem": live.nft_problem,
        "interfaces": interfaces,
        "host_ports": host_ports,
    })
}

#[cfg(test)]
mod tests;
