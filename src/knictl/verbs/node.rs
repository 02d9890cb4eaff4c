//! Views of the node as knid reports it: `status`, `networks`, `extensions`.

use knid_transport::pb;

use crate::output::{dash, percent, time, Format, Table};

/// `knictl status`.
pub fn print_status(resp: &pb::StatusResponse, format: Format) {
    println!(
        "ready: {}   version: {}   boot id: {}",
        resp.ready, resp.version, resp.boot_id
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

/// `knictl networks`; wide adds gateways and capacity per family with the share used.
pub fn print_networks(resp: &pb::NetworksResponse, format: Format) {
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

/// `knictl extensions`; wide adds registration and last-call times.
pub fn print_extensions(resp: &pb::ListExtensionsResponse, format: Format) {
    if resp.extensions.is_empty() {
        println!("no extensions registered");
        return;
    }
    let mut header = vec![
        "NAME",
        "ORDER",
        "PHASES",
        "REQUIRED",
        "TIMEOUT",
        "SOCKET",
        "LAST CALL",
    ];
    if format.is_wide() {
        header.extend(["LAST CALL AT", "REGISTERED"]);
    }
    let mut table = Table::new(&header);
    for info in &resp.extensions {
        let ext = info.extension.get_or_default();
        let last = match (info.last_call_at, info.last_call_ok) {
            (0, _) => "-".to_owned(),
            (_, true) => "ok".to_owned(),
            (_, false) => format!("error: {}", info.last_error),
        };
        let mut row = vec![
            ext.name.clone(),
            ext.order.to_string(),
            ext.phases.join(","),
            if ext.required { "yes" } else { "no" }.to_owned(),
            format!("{}ms", ext.timeout_ms),
            ext.socket_path.clone(),
            last,
        ];
        if format.is_wide() {
            row.push(time(info.last_call_at));
            row.push(time(info.registered_at));
        }
        table.row(row);
    }
    table.print();
}

/// `knictl gc`: what was (or, in a dry run, would be) removed.
pub fn print_gc(resp: &pb::GarbageCollectResponse) {
    if resp.removed.is_empty() {
        println!("nothing to collect");
        return;
    }
    if resp.dry_run {
        println!("would remove:");
    }
    let mut table = Table::new(&["WHAT", "REASON", "SANDBOX", "IFNAME", "DETAIL"]);
    for f in &resp.removed {
        table.row(vec![
            f.what.clone(),
            f.reason.clone(),
            dash(&f.sandbox_id),
            dash(&f.ifname),
            f.detail.clone(),
        ]);
    }
    table.print();
}
