//! `knictl policy ls [--pod NAMESPACE/NAME]`: the NetworkPolicies knid knows, with the pods of
//! this node each selects, and a line on the table as a whole.

use std::time::Duration;

use knid_transport::{pb, ClientError, RuntimeClient};

use super::qualified;
use crate::exit::Exit;
use crate::output::{self, dash, time, Format, Json, Table};

/// Runs `knictl policy ls`.
pub fn run_ls(
    client: &RuntimeClient,
    pod: Option<&str>,
    format: Format,
    timeout: Duration,
) -> Result<Exit, ClientError> {
    let req = pb::ListPoliciesRequest {
        pod: pod.unwrap_or_default().to_owned(),
        ..Default::default()
    };
    let resp = client.list_policies(&req, timeout)?;
    output::print(format, Json::Message(&resp), || {
        print!("{}", listing(&resp, pod));
    });
    Ok(Exit::Success)
}

/// The table, what knid refused, and the summary line.
fn listing(resp: &pb::ListPoliciesResponse, pod: Option<&str>) -> String {
    let mut out = String::new();
    if resp.policies.is_empty() {
        out.push_str(&match pod {
            Some(pod) => format!("no NetworkPolicy selects {pod}\n"),
            None => "no NetworkPolicy known\n".to_owned(),
        });
    } else {
        let mut table = Table::new(&["POLICY", "SELECTOR", "INGRESS", "EGRESS", "PODS HERE"]);
        for p in &resp.policies {
            let selects: Vec<String> = p.selects.iter().map(qualified).collect();
            table.row(vec![
                qualified(&p.policy),
                p.selector.clone(),
                rules(p.isolates_ingress, p.ingress_rules),
                rules(p.isolates_egress, p.egress_rules),
                dash(&selects.join(" ")),
            ]);
        }
        out.push_str(&table.render());
    }
    for p in &resp.policies {
        for rule in &p.refused_rules {
            out.push_str(&format!(
                "{}: rule not enforced (allows nothing): {rule}\n",
                qualified(&p.policy)
            ));
        }
    }
    for r in &resp.refused {
        out.push_str(&format!(
            "{}: not enforced at all: {}\n",
            qualified(&r.policy),
            r.reason
        ));
    }
    if !resp.error.is_empty() {
        out.push_str(&format!("table not applied: {}\n", resp.error));
    }
    let applied = match resp.applied_at {
        0 => "table not changed since knid started".to_owned(),
        at => format!("table applied {}", time(at)),
    };
    let sync = if resp.synced {
        "in sync"
    } else {
        "NOT in sync yet: policies may be missing"
    };
    out.push_str(&format!(
        "(policies {}, namespaces {}, pods {}; {applied}; {sync})\n",
        resp.policies_known, resp.namespaces_known, resp.pods_known
    ));
    out
}

/// A direction's cell: `-` when the policy does not isolate for it, else its rule count.
fn rules(isolates: bool, count: u32) -> String {
    match (isolates, count) {
        (false, _) => "-".to_owned(),
        (true, 1) => "1 rule".to_owned(),
        (true, n) => format!("{n} rules"),
    }
}

#[cfg(test)]
mod tests;
