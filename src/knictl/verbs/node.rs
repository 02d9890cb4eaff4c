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
    output::print(format, Json::Message(&resp), || {
        print_networks(&resp, format);
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
}

/// The devices a network's pods hang off: its bridge, or its parent and mode.
fn device(n: &pb::Network) -> String {
    [n.bridge.as_str(), n.parent.as_str(), n.mode.as_str()]
        .into_iter()
        .filter(|d| !d.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
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
        let mut row = vec![
            n.name.clone(),
            n.kind.clone(),
            ready,
            device(n),
            n.subnets.join(","),
        ];
        if wide {
            row.push(dash(&n.gateways.join(",")));
            row.push(n.mtu.to_string());
            row.push(family_capacity(n, "ipv4"));
            row.push(family_capacity(n, "ipv6"));
        } else {
            let capacity: Vec<String> = n
                .capacity
                .iter()
                .map(|c| format!("{} {}/{} used", c.family, c.used, c.total))
                .collect();
            row.push(n.mtu.to_string());
            row.push(capacity.join(", "));
        }
        table.row(row);
    }
    table.print();
}
