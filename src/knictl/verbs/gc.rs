//! `knictl gc`: the orphan sweep, or CNI GC with keep lists.

use std::time::Duration;

use knid_transport::{pb, ClientError, RuntimeClient};

use crate::exit::Exit;
use crate::output::{self, dash, Format, Json, Table};

/// What `knictl gc` was asked for.
pub struct Gc<'a> {
    /// Report only.
    pub dry_run: bool,
    /// Sandboxes to keep whole.
    pub keep: &'a [String],
    /// Attachments to keep.
    pub keep_attachments: &'a [pb::AttachmentRef],
    /// Let the lists keep nothing.
    pub allow_detach_all: bool,
}

/// Runs `knictl gc [--dry-run] [--keep ID]... [--keep-attachment ID/IFNAME]...
/// [--allow-detach-all]`; each error on stderr, and [`Exit::Failed`] when something could not
/// be removed.
pub fn run_gc(
    client: &RuntimeClient,
    gc: Gc<'_>,
    format: Format,
    timeout: Duration,
) -> Result<Exit, ClientError> {
    let Gc {
        dry_run,
        keep,
        keep_attachments,
        allow_detach_all,
    } = gc;
    // No list means "keep everything the sweep does not find", never "keep nothing".
    let req = pb::GarbageCollectRequest {
        valid_sandbox_ids: keep.to_vec(),
        valid_attachments: keep_attachments.to_vec(),
        dry_run,
        sweep_only: keep.is_empty() && keep_attachments.is_empty(),
        allow_detach_all,
        ..Default::default()
    };
    let resp = client.garbage_collect(&req, timeout)?;
    output::print(format, Json::Message(&resp), || print_gc(&resp));
    for error in &resp.errors {
        eprintln!("knictl: gc: {error}");
    }
    if !resp.errors.is_empty() {
        return Ok(Exit::Failed);
    }
    Ok(Exit::Success)
}

/// What was (or, in a dry run, would be) removed, then what was found and left alone.
fn print_gc(resp: &pb::GarbageCollectResponse) {
    if resp.removed.is_empty() {
        println!("nothing to collect");
    } else {
        if resp.dry_run {
            println!("would remove:");
        }
        print_findings(&resp.removed);
    }
    if !resp.left.is_empty() {
        println!("left alone (named like knid's links, without this knid's mark):");
        print_findings(&resp.left);
    }
}

fn print_findings(findings: &[pb::GcFinding]) {
    let mut table = Table::new(&["WHAT", "REASON", "SANDBOX", "IFNAME", "DETAIL"]);
    for f in findings {
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
