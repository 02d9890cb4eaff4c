//! `knictl policy explain --from --to --port`: whether a new connection may start under the
//! NetworkPolicies knid knows, side by side. A denied connection exits 0: it is the answer.

use std::time::Duration;

use knid_transport::pb::{self, PolicyDecision};
use knid_transport::{ClientError, RuntimeClient};

use super::qualified;
use crate::exit::Exit;
use crate::output::{self, Format, Json};

/// Runs `knictl policy explain`.
pub fn run_explain(
    client: &RuntimeClient,
    from: &str,
    to: &str,
    port: &str,
    format: Format,
    timeout: Duration,
) -> Result<Exit, ClientError> {
    let req = pb::ExplainPolicyRequest {
        from: from.to_owned(),
        to: to.to_owned(),
        port: port.to_owned(),
        ..Default::default()
    };
    let resp = client.explain_policy(&req, timeout)?;
    output::print(format, Json::Message(&resp), || {
        print!("{}", verdict(&resp))
    });
    Ok(Exit::Success)
}

/// The flow and its result on one line, then each side's decision.
fn verdict(resp: &pb::ExplainPolicyResponse) -> String {
    let (from, to) = (resp.from.get_or_default(), resp.to.get_or_default());
    let result = if resp.allowed { "ALLOWED" } else { "DENIED" };
    let egress = format!("egress of {}:", name(from));
    let ingress = format!("ingress of {}:", name(to));
    let width = egress.len().max(ingress.len());
    format!(
        "{} -> {} {}/{}: {result}\n  {egress:<width$} {}\n  {ingress:<width$} {}\n",
        end(from),
        end(to),
        resp.port,
        resp.protocol.to_ascii_uppercase(),
        side(resp.egress.get_or_default()),
        side(resp.ingress.get_or_default()),
    )
}

/// The pod, or the address when the end is no pod.
fn name(end: &pb::FlowEnd) -> String {
    end.pod.as_ref().map_or_else(|| end.ip.clone(), qualified)
}

/// `x/b (10.244.2.3, on this node)`, `x/a (10.244.1.2, on node b)`, `192.0.2.7 (not a pod)`.
fn end(end: &pb::FlowEnd) -> String {
    if end.pod.is_none() {
        return format!("{} (not a pod)", end.ip);
    }
    let place = match (end.local, end.node.as_str()) {
        (true, _) => "on this node".to_owned(),
        (false, "") => "on another node".to_owned(),
        (false, node) => format!("on node {node}"),
    };
    format!("{} ({}, {place})", name(end), end.ip)
}

/// One side's decision in words.
fn side(side: &pb::PolicySide) -> String {
    match side.decision.enum_value() {
        Ok(PolicyDecision::NOT_A_POD) => "not a pod: no policy applies".to_owned(),
        Ok(PolicyDecision::NOT_ISOLATED) => "no policy selects the pod: open".to_owned(),
        Ok(PolicyDecision::ALLOWED) => format!(
            "allowed by {} rule {}",
            qualified(side.policy.get_or_default()),
            side.rule
        ),
        Ok(PolicyDecision::DENIED) => {
            let by: Vec<String> = side.isolated_by.iter().map(qualified).collect();
            format!(
                "denied: isolated by {} and no rule allows it",
                by.join(", ")
            )
        }
        Ok(PolicyDecision::POLICY_DECISION_UNSPECIFIED) | Err(_) => {
            format!("unknown decision {}", side.decision.value())
        }
    }
}

#[cfg(test)]
mod tests;
