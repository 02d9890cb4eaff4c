//! What List shows of each sandbox: a summary built from its records or, for a sandbox with a
//! record knid cannot use, what can still be read of it with that record's error. Nothing a
//! corrupt record holds fails the list.
//!
//! The filter is applied to what can be read. A criterion whose value cannot be read counts as
//! matched, so a corrupt sandbox is hidden only by what is known of it: its state never rules it
//! out, its labels do only when its sandbox record decodes, its networks do only when every one
//! of its attachment records decodes.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;

use ipnet::IpNet;
use knid_store::{AttachmentRecord, SandboxRecord};

use crate::lifecycle;
use crate::model::{AttachmentState, ListFilter, PodRef, Sandbox, SandboxSummary};
use crate::records::corrupt::{Attachments, CorruptAttachment, Sandboxes};
use crate::records::sandbox_from_records;

/// The attachments as the API shows them: without those already detached and waiting for the
/// reaper.
pub(super) fn live(recs: Vec<AttachmentRecord>) -> Vec<AttachmentRecord> {
    recs.into_iter()
        .filter(|rec| {
            !matches!(
                lifecycle::state_of(rec),
                Ok(AttachmentState::Detaching | AttachmentState::Reaping)
            )
        })
        .collect()
}

/// The summaries of every sandbox matching `filter`, sorted by id: each sandbox with a record
/// (usable or not) and each sandbox id that only corrupt attachment records name.
pub(super) fn summaries(
    sandboxes: Sandboxes,
    attachments: Attachments,
    filter: &ListFilter,
) -> Vec<SandboxSummary> {
    let mut usable: BTreeMap<String, Vec<AttachmentRecord>> = BTreeMap::new();
    for rec in attachments.usable {
        usable.entry(rec.sandbox_id.clone()).or_default().push(rec);
    }
    let mut corrupt: BTreeMap<String, Vec<CorruptAttachment>> = BTreeMap::new();
    for bad in attachments.corrupt {
        corrupt.entry(bad.sandbox_id.clone()).or_default().push(bad);
    }
    let mut out = Vec::new();
    for rec in sandboxes.usable {
        let atts = live(usable.remove(&rec.id).unwrap_or_default());
        let bad = corrupt.remove(&rec.id).unwrap_or_default();
        let errors: Vec<String> = bad.iter().map(|b| b.error().to_string()).collect();
        if errors.is_empty() {
            match sandbox_from_records(&rec, atts.clone()) {
                Ok(sandbox) => {
                    if matches(filter, &sandbox) {
                        out.push(summary(sandbox));
                    }
                    continue;
                }
                Err(e) => {
                    let errors = vec![e.to_string()];
                    out.extend(corrupt_summary(
                        &rec.id,
                        Some(&rec),
                        &atts,
                        &[],
                        errors,
                        filter,
                    ));
                    continue;
                }
            }
        }
        out.extend(corrupt_summary(
            &rec.id,
            Some(&rec),
            &atts,
            &bad,
            errors,
            filter,
        ));
    }
    for bad_sandbox in sandboxes.corrupt {
        let atts = live(usable.remove(&bad_sandbox.id).unwrap_or_default());
        let bad = corrupt.remove(&bad_sandbox.id).unwrap_or_default();
        let mut errors = vec![bad_sandbox.error().to_string()];
        errors.extend(bad.iter().map(|b| b.error().to_string()));
        let rec = bad_sandbox.record.as_ref();
        out.extend(corrupt_summary(
            &bad_sandbox.id,
            rec,
            &atts,
            &bad,
            errors,
            filter,
        ));
    }
    // Corrupt attachments of sandboxes without a sandbox record (what a failed rollback can
    // leave): listed all the same, or nothing would show them.
    for (id, bad) in corrupt {
        let atts = live(usable.remove(&id).unwrap_or_default());
        let errors = bad.iter().map(|b| b.error().to_string()).collect();
        out.extend(corrupt_summary(&id, None, &atts, &bad, errors, filter));
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    out
}

fn matches(filter: &ListFilter, sandbox: &Sandbox) -> bool {
    filter
        .network
        .as_ref()
        .is_none_or(|n| sandbox.interfaces.iter().any(|i| &i.network == n))
        && filter.state.is_none_or(|s| s == sandbox.state())
        && filter
            .labels
            .iter()
            .all(|(k, v)| sandbox.labels.get(k) == Some(v))
}

fn summary(sandbox: Sandbox) -> SandboxSummary {
    SandboxSummary {
        state: Some(sandbox.state()),
        interfaces: sandbox
            .interfaces
            .iter()
            .map(|i| i.name.to_string())
            .collect(),
        ips: sandbox
            .interfaces
            .iter()
            .flat_map(|i| i.ips.iter().map(|ip| ip.address.addr()))
            .collect(),
        networks: sandbox
            .interfaces
            .iter()
            .map(|i| i.network.clone())
            .collect(),
        id: sandbox.id.to_string(),
        pod: sandbox.pod,
        netns_path: sandbox.netns_path,
        created_at_ms: sandbox.created_at_ms,
        error: None,
    }
}

/// What can be read of a sandbox with a corrupt record — its sandbox record `rec` if it decodes,
/// its usable attachments `atts`, its corrupt ones `bad` — with `errors`; `None` when what can
/// be read rules it out of `filter`.
fn corrupt_summary(
    id: &str,
    rec: Option<&SandboxRecord>,
    atts: &[AttachmentRecord],
    bad: &[CorruptAttachment],
    errors: Vec<String>,
    filter: &ListFilter,
) -> Option<SandboxSummary> {
    let readable: Vec<&AttachmentRecord> = atts
        .iter()
        .chain(bad.iter().filter_map(|b| b.record.as_ref()))
        .collect();
    let networks: Vec<String> = readable.iter().map(|a| a.network.clone()).collect();
    let network_unknown = bad.iter().any(|b| b.record.is_none());
    let network_ok = filter
        .network
        .as_ref()
        .is_none_or(|n| network_unknown || networks.contains(n));
    let labels_ok = rec.is_none_or(|rec| {
        filter
            .labels
            .iter()
            .all(|(k, v)| rec.labels.get(k) == Some(v))
    });
    if !(network_ok && labels_ok) {
        return None;
    }
    let pod = rec.and_then(|r| r.pod.as_ref()).map(|p| PodRef {
        name: p.name.clone(),
        namespace: p.namespace.clone(),
        uid: p.uid.clone(),
    });
    Some(SandboxSummary {
        id: id.to_owned(),
        pod: pod.unwrap_or_default(),
        netns_path: rec
            .map(|r| PathBuf::from(&r.netns_path))
            .unwrap_or_default(),
        state: None,
        interfaces: atts
            .iter()
            .map(|a| a.ifname.clone())
            .chain(bad.iter().map(|b| b.ifname.clone()))
            .collect(),
        ips: readable
            .iter()
            .flat_map(|a| a.ips.iter())
            .filter_map(|ip| ip.address.parse::<IpNet>().ok().map(|n| n.addr()))
            .collect::<Vec<IpAddr>>(),
        networks,
        created_at_ms: rec.map_or(0, |r| r.created_at_ms),
        error: Some(errors.join("; ")),
    })
}

#[cfg(test)]
mod tests;
