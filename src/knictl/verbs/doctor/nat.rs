//! doctor's look at knid's own nf_tables table (`inet knid`): it must exist, with its base
//! chains, and hold every host-port element the store implies (each attached sandbox's
//! mappings towards its first interface). knid rebuilds it whole at start-up, on reload and by
//! SetupNodeNetwork, so whatever deleted it or an element, `knictl setup-node-network` puts
//! back everything.

use std::time::Duration;

use knid_core::node::nat::TABLE;
use knid_netops::nft::{
    PortMap, TableContents, CHAIN_HOSTPORTS, CHAIN_OUTPUT, CHAIN_POSTROUTING, CHAIN_PREROUTING,
};
use knid_transport::{pb, RuntimeClient};

use super::Finding;
use crate::kernel;
use crate::verbs::inspect;

const CHECK: &str = "nat";
/// How many missing elements the finding names; the rest are counted.
const NAMED: usize = 5;

fn rebuild() -> Vec<String> {
    vec!["`knictl setup-node-network` rebuilds the table with every element".to_owned()]
}

/// Compares the table with what the store implies: the host-port elements of each sandbox.
pub fn table(
    client: &RuntimeClient,
    networks: &pb::NetworksResponse,
    list: Result<&pb::ListResponse, &String>,
    timeout: Duration,
    out: &mut Vec<Finding>,
) {
    let list = match list {
        Ok(list) => list,
        Err(e) => {
            out.push(Finding::fail(
                CHECK,
                format!("List failed: {e}"),
                vec!["see knid's log".to_owned()],
            ));
            return;
        }
    };
    let kinds = inspect::kinds(networks);
    let mut expected = Vec::new();
    // Only a sandbox's Inspect carries its mappings; a corrupt one is doctor's `records` check's.
    for s in list.sandboxes.iter().filter(|s| s.error.is_empty()) {
        let req = pb::InspectRequest {
            sandbox_id: s.id.clone(),
            ..Default::default()
        };
        // Detached meanwhile: nothing of it is expected any more.
        let Ok(sandbox) = client.inspect(&req, timeout) else {
            continue;
        };
        expected.extend(
            kernel::expected_host_ports(&sandbox, &kinds)
                .into_iter()
                .map(|e| (s.id.clone(), e)),
        );
    }
    out.push(judge(kernel::read_table(), &expected));
}

/// The finding for knid's table as read (`None`: it does not exist) against the `expected`
/// elements, each with its sandbox.
pub fn judge(
    table: Result<Option<TableContents>, String>,
    expected: &[(String, PortMap)],
) -> Finding {
    let table = match table {
        Ok(Some(table)) => table,
        Ok(None) => {
            return Finding::fail(
                CHECK,
                format!(
                    "nf_tables table inet {TABLE} does not exist: pods are not masqueraded and \
                     {} host-port element(s) are not forwarded",
                    expected.len()
                ),
                rebuild(),
            )
        }
        Err(problem) => {
            return Finding::fail(CHECK, problem, vec!["run knictl doctor as root".to_owned()])
        }
    };
    let chains = [
        CHAIN_PREROUTING,
        CHAIN_OUTPUT,
        CHAIN_POSTROUTING,
        CHAIN_HOSTPORTS,
    ];
    let gone: Vec<&str> = chains
        .into_iter()
        .filter(|c| !table.chains.iter().any(|have| have == c))
        .collect();
    if !gone.is_empty() {
        return Finding::fail(
            CHECK,
            format!(
                "nf_tables table inet {TABLE} lacks chain(s) {}",
                gone.join(", ")
            ),
            rebuild(),
        );
    }
    let missing: Vec<&(String, PortMap)> = expected
        .iter()
        .filter(|(_, e)| !table.port_maps.contains(e))
        .collect();
    if missing.is_empty() {
        return Finding::ok(
            CHECK,
            format!(
                "nf_tables table inet {TABLE} holds its chains and the {} host-port element(s) \
                 of the attached sandboxes",
                expected.len()
            ),
        );
    }
    let mut named: Vec<String> = missing
        .iter()
        .take(NAMED)
        .map(|(id, e)| format!("{e} (sandbox {id})"))
        .collect();
    if missing.len() > NAMED {
        named.push(format!("and {} more", missing.len() - NAMED));
    }
    Finding::fail(
        CHECK,
        format!(
            "{} host-port element(s) missing from nf_tables table inet {TABLE}: {}",
            missing.len(),
            named.join("; ")
        ),
        rebuild(),
    )
}

#[cfg(test)]
mod tests;
