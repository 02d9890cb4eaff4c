//! The node as knid reports it, and setting it up again: `status`, `networks`,
//! `setup-node-network`.

use std::time::Duration;

use knid_transport::{pb, ClientError, RuntimeClient};

use crate::exit::Exit;
use crate::output::{self, dash, percent, time, Format, Json, Table};

/// Runs `knictl status`.
pub fn run_status(
    client: &RuntimeClient,
    format: Format,
    timeout: Duration,
) -> Result<Exit, ClientError> {
    let resp = client.status(timeout)?;
    output::print(format, Json::Message(&resp), || print_status(&resp, format));
    Ok(Exit::Success)
}

/// Runs `knictl networks`.
pub fn run_networks(
    client: &RuntimeClient,
    format: Format,
    timeout: Duration,
) -> Result<Exit, ClientError> {
    let resp = client.networks(timeout)?;
    // In cluster mode the routes to the other nodes belong with the networks.
    let cluster = client
        .status(timeout)
        .ok()
        .and_then(|s| s.cluster.into_option());
    output::print(format, Json::Message(&resp), || {
        print_networks(&resp, format);
        if let Some(c) = &cluster {
            print_cluster(c);
        }
    });
    Ok(Exit::Success)
}

/// Runs `knictl setup-node-network`.
pub fn run_setup_node_network(
    client: &RuntimeClient,
    format: Format,
    timeout: Duration,
) -> Result<Exit, ClientError> {
    client.setup_node_network(timeout)?;
    output::print(format, Json::Empty, || println!("node network set up"));
    Ok(Exit::Success)
}

/// The readiness line and the conditions table; wide adds when each condition last changed.
fn print_status(resp: &pb::StatusResponse, format: Format) {
    println!(
        "ready: {}   version: {}   boot id: {}   link mark: {}",
        resp.ready, resp.version, resp.boot_id, resp.link_mark
    );
    let mut header = vec!["CONDITION", "STATUS", "REASON", "MESSAGE"];
    if format.is_wide() {
        header.push("SINCE");
    }
    let mut table = Table::new(&header);
    for c in &resp.conditions {
        let mut row = vec![
            c.type_.clone(),
            c.status.to_string(),
            c.reason.clone(),
            c.message.clone(),
        ];
        if format.is_wide() {
            row.push(time(c.since));
        }
        table.row(row);
    }
    table.print();
    if let Some(c) = resp.cluster.as_ref() {
        print_cluster(c);
    }
}

/// Cluster mode: the API server, this node's pod CIDR and the routes to the other nodes.
fn print_cluster(c: &pb::Cluster) {
    println!();
    let api = if c.api_reachable {
        format!("reachable (last answer {})", time(c.last_contact_ms))
    } else {
        format!("unreachable: {}", c.api_message)
    };
    println!("cluster: node {}   api {} {api}", c.node_name, c.api_server);
    println!(
        "pod CIDR: {} (Node {} spec.podCIDRs{})   nodes: {}   cluster CIDRs: {} (from {})",
        dash(&c.pod_cidrs.join(",")),
        c.node_name,
        if c.pod_cidr_network.is_empty() {
            String::new()
        } else {
            format!(", network {}", c.pod_cidr_network)
        },
        c.nodes,
        dash(&c.cluster_cidrs.join(",")),
        dash(&c.cluster_cidrs_from)
    );
    if let Some(p) = c.published.as_ref() {
        print_published(&c.node_name, p);
    }
    if let Some(v) = c.vtep.as_ref() {
        println!(
            "backend: {}   VXLAN endpoint: VNI {} port {} mac {} ({})   devices: {}",
            c.backend,
            v.vni,
            v.port,
            v.mac,
            if v.on_node {
                "on the Node"
            } else {
                "not on the Node yet"
            },
            dash(&v.devices.join("; "))
        );
    } else if !c.backend.is_empty() {
        println!("backend: {}", c.backend);
    }
    let mut table = Table::new(&[
        "NODE", "POD CIDR", "BACKEND", "VIA", "OVERLAY", "ROUTE", "MESSAGE",
    ]);
    for r in &c.routes {
        table.row(vec![
            r.node.clone(),
            r.dst.clone(),
            dash(&r.backend),
            dash(&r.via),
            overlay_path(r),
            r.state.clone(),
            r.message.clone(),
        ]);
    }
    table.print();
}

/// A VXLAN route's device, VTEP MAC, InternalIP and whether its FDB entry and neighbour were
/// in the kernel; `-` for host-gw.
fn overlay_path(r: &pb::NodeRoute) -> String {
    if r.device.is_empty() {
        return "-".to_owned();
    }
    let yes = |b: bool| if b { "yes" } else { "no" };
    format!(
        "{} {} -> {} (fdb {}, neighbour {})",
        r.device,
        r.vtep_mac,
        r.underlay,
        yes(r.fdb),
        yes(r.neighbour)
    )
}

/// What knid wrote on its Node, and when.
fn print_published(node: &str, p: &pb::NodePublication) {
    let condition = if p.network_unavailable.is_empty() {
        "not written yet".to_owned()
    } else {
        format!(
            "NetworkUnavailable={} {} ({})",
            p.network_unavailable,
            p.condition_reason,
            time(p.condition_ms)
        )
    };
    let taint = match (p.taint_ms, p.tainted) {
        (0, _) => "not checked yet".to_owned(),
        (at, true) => format!("knid.io/pod-network-full:NoSchedule ({})", time(at)),
        (at, false) => format!("none of knid's ({})", time(at)),
    };
    let annotation = match p.annotation_ms {
        0 => "not written yet".to_owned(),
        at => format!("knid.io/node-networks ({})", time(at)),
    };
    println!("published on Node {node}: {condition}   taint: {taint}   annotation: {annotation}");
    if !p.error.is_empty() {
        println!("last write failed: {}", p.error);
    }
}

/// The devices a network's pods hang off: its bridge, or its parent and mode.
fn device(n: &pb::Network) -> String {
    [n.bridge.as_str(), n.parent.as_str(), n.mode.as_str()]
        .into_iter()
        .filter(|d| !d.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The subnets, and where they come from when not the configuration.
fn subnets(n: &pb::Network) -> String {
    match (n.subnets.is_empty(), n.subnets_from.is_empty()) {
        (_, true) => n.subnets.join(","),
        (true, false) => format!("waiting for {}", n.subnets_from),
        (false, false) => format!("{} (from {})", n.subnets.join(","), n.subnets_from),
    }
}

/// `used/total` with the percentage, for one family of a network; `-` when it has none.
fn family_capacity(n: &pb::Network, family: &str) -> String {
    n.capacity
        .iter()
        .find(|c| c.family == family)
        .map_or("-".to_owned(), |c| {
            format!("{}/{} ({}%)", c.used, c.total, percent(c.used, c.total))
        })
}

/// The networks table; wide adds gateways and capacity per family with the share used.
fn print_networks(resp: &pb::NetworksResponse, format: Format) {
    let wide = format.is_wide();
    let mut table = if wide {
        Table::new(&[
            "NAME", "KIND", "READY", "DEVICE", "SUBNETS", "GATEWAYS", "MTU", "IPV4", "IPV6",
            "PORTS",
        ])
    } else {
        Table::new(&[
            "NAME", "KIND", "READY", "DEVICE", "SUBNETS", "MTU", "CAPACITY",
        ])
    };
    for n in &resp.networks {
        let ready = if n.ready {
            "yes".to_owned()
        } else {
            format!("no: {}", n.reason)
        };
        let mut row = vec![n.name.clone(), n.kind.clone(), ready, device(n), subnets(n)];
        if wide {
            row.push(dash(&n.gateways.join(",")));
            row.push(n.mtu.to_string());
            row.push(family_capacity(n, "ipv4"));
            row.push(family_capacity(n, "ipv6"));
            row.push(n.bridge_ports.as_ref().map_or("-".to_owned(), |p| {
                format!("{}/{} ({}%)", p.used, p.total, percent(p.used, p.total))
            }));
        } else {
            let mut capacity: Vec<String> = n
                .capacity
                .iter()
                .map(|c| format!("{} {}/{} used", c.family, c.used, c.total))
                .collect();
            if let Some(p) = n.bridge_ports.as_ref() {
                capacity.push(format!("ports {}/{} used", p.used, p.total));
            }
            row.push(n.mtu.to_string());
            row.push(capacity.join(", "));
        }
        table.row(row);
    }
    table.print();
}
