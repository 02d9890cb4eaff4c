//! Kata DAN files (Directly Attachable Network, runtime-rs): `<dan_dir>/<sandbox_id>.json`
//! describes a sandbox's host-netns taps, with the guest's MAC, addresses, routes and
//! neighbours, so Kata skips its netns scan (Kata runtime-rs's `dan_conf`).
//!
//! The file is a view of the store: [`sync`] rewrites it from the sandbox's DAN attachments that
//! are being provisioned or attached, and removes it when there are none. Attach, detach,
//! rollback, GC and recovery call it, so it never outlives its taps. Written atomically (temp
//! file + rename); not fsynced, since a power loss is a reboot and a reboot releases everything.

use std::fs;
use std::io::Write;
use std::path::Path;

use knid_store::AttachmentRecord;
use serde_json::{json, Value};

use crate::drivers::plan::dan_path;
use crate::error::{Error, Result};
use crate::lifecycle;
use crate::model::{AttachmentState, InterfaceResult, RouteScope};
use crate::records::{attachment_from_record, corrupt};
use crate::shared::Context;

/// NUD_PERMANENT.
const NUD_PERMANENT: u32 = 0x80;

/// Whether `rec` is a DAN tap.
pub(crate) fn is_dan(rec: &AttachmentRecord) -> bool {
    rec.tap.as_ref().is_some_and(|t| t.dan)
}

/// Rewrites (or removes) the DAN file of `sandbox_id` from its records.
pub(crate) fn sync(ctx: &Context, sandbox_id: &str) -> Result<()> {
    // A record knid cannot use is no device Kata can be told about.
    let mut recs = corrupt::attachments(&ctx.store, sandbox_id)?.usable;
    recs.sort_by_key(|r| r.position);
    let mut devices = Vec::new();
    let mut defaults = DefaultRoutes::default();
    for rec in recs.iter().filter(|r| is_dan(r)) {
        let state = lifecycle::state_of(rec)?;
        if matches!(
            state,
            AttachmentState::Provisioning | AttachmentState::Attached
        ) {
            devices.push(device(&attachment_from_record(rec)?, &mut defaults));
        }
    }
    let path = dan_path(&ctx.dan_dir, sandbox_id);
    if devices.is_empty() {
        return match fs::remove_file(&path) {
            Ok(()) => {
                log::debug!("{sandbox_id}: removed {}", path.display());
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_error("remove", &path, e)),
        };
    }
    let text = serde_json::to_string_pretty(&json!({ "netns": null, "devices": devices }))
        .map_err(|e| Error::FailedPrecondition(format!("encode DAN file: {e}")))?;
    write_atomically(&path, text.as_bytes())?;
    log::debug!("{sandbox_id}: wrote {}", path.display());
    Ok(())
}

/// A file in the DAN directory that knid may have written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DanFile {
    /// The sandbox it describes.
    pub sandbox_id: String,
    /// Its path.
    pub path: String,
    /// A temp file left by an interrupted write (`.<id>.json.tmp`), never valid.
    pub temp: bool,
}

/// The DAN files (`<id>.json`) and temp files of interrupted writes in the DAN directory; other
/// files are not knid's and are left out.
pub(crate) fn files(dan_dir: &Path) -> Result<Vec<DanFile>> {
    let entries = match fs::read_dir(dan_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_error("read", dan_dir, e)),
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let temp_id = name
            .strip_prefix('.')
            .and_then(|n| n.strip_suffix(".json.tmp"));
        let id = temp_id
            .or_else(|| name.strip_suffix(".json"))
            .filter(|id| crate::model::validate::sandbox_id(id).is_ok());
        let Some(id) = id else { continue };
        out.push(DanFile {
            sandbox_id: id.to_owned(),
            path: entry.path().to_string_lossy().into_owned(),
            temp: temp_id.is_some(),
        });
    }
    Ok(out)
}

/// The families whose default route a DAN file already holds. Its route format has no metric,
/// so a second default route of a family would tie with the first in the guest: only the first
/// interface's (by position) is written.
#[derive(Debug, Default)]
struct DefaultRoutes {
    v4: bool,
    v6: bool,
}

impl DefaultRoutes {
    /// Whether `route` goes in the file: not a default route of a family that has one already.
    fn admit(&mut self, route: &crate::model::RouteInfo) -> bool {
        if route.dst.prefix_len() != 0 {
            return true;
        }
        let seen = match route.dst {
            ipnet::IpNet::V4(_) => &mut self.v4,
            ipnet::IpNet::V6(_) => &mut self.v6,
        };
        !std::mem::replace(seen, true)
    }
}

/// Refuses a sandbox that would mix a DAN tap with any netns interface, counting what is
/// attached and what is asked for: Kata runtime-rs reads only the DAN file when there is one, so
/// the netns interface would never reach the guest.
pub(crate) fn check_alone(
    sandbox_id: &str,
    attached: &[AttachmentRecord],
    wanted: &[&crate::model::InterfaceSpec],
) -> Result<()> {
    let names = attached
        .iter()
        .map(|r| (r.ifname.as_str(), is_dan(r)))
        .chain(wanted.iter().map(|s| (s.name.as_str(), s.is_dan())));
    let (mut dan, mut netns) = (None, None);
    for (name, is_dan) in names {
        let slot = if is_dan { &mut dan } else { &mut netns };
        slot.get_or_insert(name);
    }
    match (dan, netns) {
        (Some(dan), Some(netns)) => Err(Error::FailedPrecondition(format!(
            "sandbox {sandbox_id}: {dan} is a DAN tap and {netns} a netns interface; Kata \
             runtime-rs reads only the DAN file when one exists, so {netns} would never reach \
             the guest: give a VM sandbox DAN taps only, or none"
        ))),
        _ => Ok(()),
    }
}

fn device(iface: &InterfaceResult, defaults: &mut DefaultRoutes) -> Value {
    let tap = iface.tap.as_ref();
    json!({
        "name": iface.name.as_str(),
        "guest_mac": iface.mac.to_string(),
        "device": {
            "type": "host-tap",
            "tap_name": tap.map(|t| t.name.as_str()).unwrap_or_default(),
            "queue_num": tap.map_or(1, |t| t.queue_pairs),
            "queue_size": 0,
        },
        "network_info": {
            "interface": {
                "ip_addresses": iface.ips.iter().map(|ip| ip.address.to_string()).collect::<Vec<_>>(),
                "mtu": iface.mtu,
                "ntype": "tuntap",
                "flags": 0,
            },
            "routes": iface.routes.iter().filter(|r| defaults.admit(r)).map(|r| json!({
                "dest": r.dst.to_string(),
                "gateway": r.gateway.map(|g| g.to_string()).unwrap_or_default(),
                "source": "",
                "scope": match r.scope {
                    RouteScope::Universe => 0,
                    RouteScope::Link => 253,
                    RouteScope::Host => 254,
                },
                "flags": 0,
                "mtu": r.mtu.unwrap_or(0),
            })).collect::<Vec<_>>(),
            "neighbors": iface.neighbors.iter().map(|n| json!({
                "ip_address": ipnet::IpNet::from(n.ip).to_string(),
                "hardware_addr": n.mac.to_string(),
                "state": NUD_PERMANENT,
                "flags": 0,
            })).collect::<Vec<_>>(),
        },
    })
}

fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| Error::Config(format!("{} has no directory", path.display())))?;
    fs::create_dir_all(dir).map_err(|e| io_error("create", dir, e))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = dir.join(format!(".{name}.tmp"));
    let mut file = fs::File::create(&temp).map_err(|e| io_error("create", &temp, e))?;
    file.write_all(bytes)
        .map_err(|e| io_error("write", &temp, e))?;
    drop(file);
    fs::rename(&temp, path).map_err(|e| io_error("rename", &temp, e))
}

fn io_error(op: &str, path: &Path, e: std::io::Error) -> Error {
    Error::FailedPrecondition(format!("DAN file: {op} {}: {e}", path.display()))
}

#[cfg(test)]
mod tests;
