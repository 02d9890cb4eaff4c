//! `knictl ls`: one line per sandbox; wide adds the interface count, networks, generation and
//! creation time. A sandbox with a record knid cannot use is listed as `corrupt`, its error
//! below the table with what removes it.

use std::time::Duration;

use knid_transport::{pb, ClientError, RuntimeClient};

use crate::exit::Exit;
use crate::output::{self, Format, Json, Table};

/// Runs `knictl ls [--network N] [--state S]`.
pub fn run_ls(
    client: &RuntimeClient,
    network: Option<&str>,
    state: Option<&str>,
    format: Format,
    timeout: Duration,
) -> Result<Exit, ClientError> {
    let req = pb::ListRequest {
        network: network.unwrap_or_default().to_owned(),
        state: state.unwrap_or_default().to_owned(),
        ..Default::default()
    };
    let resp = client.list(&req, timeout)?;
    output::print(format, Json::Message(&resp), || {
        if !format.is_wide() {
            return print_list(&resp, None);
        }
        // List's summaries carry no generation: one Inspect each (a sandbox detached
        // meanwhile shows `-`).
        let details: Vec<Option<pb::Sandbox>> = resp
            .sandboxes
            .iter()
            .map(|s| {
                let req = pb::InspectRequest {
                    sandbox_id: s.id.clone(),
                    ..Default::default()
                };
                client.inspect(&req, timeout).ok()
            })
            .collect();
        print_list(&resp, Some(&details));
    });
    Ok(Exit::Success)
}

/// The table; `details`, one per summary, makes it wide.
fn print_list(resp: &pb::ListResponse, details: Option<&[Option<pb::Sandbox>]>) {
    let mut table = match details {
        None => Table::new(&["ID", "STATE", "POD", "INTERFACES", "IPS", "NETNS"]),
        Some(_) => Table::new(&[
            "ID",
            "STATE",
            "POD",
            "IFS",
            "INTERFACES",
            "IPS",
            "NETWORKS",
            "NETNS",
            "GENERATION",
            "CREATED",
        ]),
    };
    for (at, s) in resp.sandboxes.iter().enumerate() {
        let pod = s
            .pod
            .as_ref()
            .filter(|p| !p.name.is_empty())
            .map(|p| format!("{}/{}", p.namespace, p.name))
            .unwrap_or_else(|| "-".to_owned());
        let mut row = vec![s.id.clone(), s.state.clone(), pod];
        match details {
            None => {
                row.push(s.interfaces.join(","));
                row.push(s.ips.join(","));
                row.push(s.netns_path.clone());
            }
            Some(details) => {
                row.push(s.interfaces.len().to_string());
                row.push(s.interfaces.join(","));
                row.push(s.ips.join(","));
                row.push(s.networks.join(","));
                row.push(s.netns_path.clone());
                row.push(
                    details
                        .get(at)
                        .and_then(Option::as_ref)
                        .map_or("-".to_owned(), |d| d.generation.to_string()),
                );
                row.push(output::time(s.created_at));
            }
        }
        table.row(row);
    }
    table.print();
    print_errors(resp);
}

/// Below the table: each sandbox with a record knid cannot use, why, and what removes it.
fn print_errors(resp: &pb::ListResponse) {
    let corrupt: Vec<&pb::SandboxSummary> = resp
        .sandboxes
        .iter()
        .filter(|s| !s.error.is_empty())
        .collect();
    if corrupt.is_empty() {
        return;
    }
    println!();
    for s in corrupt {
        println!("{}: {}", s.id, s.error);
    }
    println!(
        "fix: `knictl detach ID` or `knictl gc` removes such a record with the addresses it holds"
    );
}
