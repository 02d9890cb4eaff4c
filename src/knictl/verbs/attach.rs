//! `knictl attach` and `knictl detach`: one interface of a sandbox on a network, and off again.

use std::collections::HashMap;
use std::time::Duration;

use knid_transport::{pb, ClientError, RuntimeClient};

use super::inspect;
use crate::cli::AttachArgs;
use crate::exit::Exit;
use crate::output::{self, Format, Json};

/// Runs `knictl attach ID --netns PATH [...]`: the sandbox as knid answers it, as `inspect`
/// prints it (wide names the bridges).
pub fn run_attach(
    client: &RuntimeClient,
    args: &AttachArgs,
    format: Format,
    timeout: Duration,
) -> Result<Exit, ClientError> {
    let req = pb::AttachRequest {
        sandbox_id: args.id.clone(),
        netns_path: args.netns.clone(),
        interfaces: vec![interface(args)],
        ..Default::default()
    };
    let sandbox = client.attach(&req, timeout)?;
    let bridges = if format.is_wide() {
        inspect::bridges(&client.networks(timeout)?)
    } else {
        HashMap::new()
    };
    output::print(format, Json::Message(&sandbox), || {
        inspect::print_sandbox(&sandbox, &bridges, None);
    });
    Ok(Exit::Success)
}

/// The one interface `knictl attach` asks for. knid checks the combination (a tap setting on
/// another kind, a device without host-device) and names the field it refuses.
fn interface(args: &AttachArgs) -> pb::InterfaceRequest {
    let kind = match (args.kind.as_str(), args.wants_tap(), &args.device) {
        ("", true, _) => "tap",
        ("", false, Some(_)) => "host-device",
        (kind, _, _) => kind,
    };
    let tap = (kind == "tap" || args.wants_tap()).then(|| pb::TapRequest {
        queue_pairs: args.queue_pairs.unwrap_or(0),
        owner_uid: args.tap_owner,
        owner_gid: args.tap_group,
        dan: args.dan,
        ..Default::default()
    });
    let device = args.device.as_ref().map(|device| {
        if is_pci_address(device) {
            pb::DeviceRequest {
                pci_address: device.clone(),
                ..Default::default()
            }
        } else {
            pb::DeviceRequest {
                name: device.clone(),
                ..Default::default()
            }
        }
    });
    pb::InterfaceRequest {
        name: args.ifname.clone(),
        network: args.network.clone(),
        kind: kind.to_owned(),
        mac: args.mac.clone(),
        mtu: args.mtu,
        static_ips: args.ips.clone(),
        tap: tap.into(),
        device: device.into(),
        bandwidth: bandwidth(args).into(),
        ..Default::default()
    }
}

/// The limits `--ingress-rate` and `--egress-rate` ask for (knid picks the bursts).
fn bandwidth(args: &AttachArgs) -> Option<pb::Bandwidth> {
    if args.ingress_rate.is_none() && args.egress_rate.is_none() {
        return None;
    }
    Some(pb::Bandwidth {
        ingress_rate: args.ingress_rate.unwrap_or(0),
        egress_rate: args.egress_rate.unwrap_or(0),
        ..Default::default()
    })
}

/// `dddd:bb:dd.f`, the form of a PCI address; anything else names a device.
fn is_pci_address(text: &str) -> bool {
    let parts: Vec<&str> = text.split([':', '.']).collect();
    matches!(parts.as_slice(), [domain, bus, dev, func]
        if domain.len() == 4 && bus.len() == 2 && dev.len() == 2 && func.len() == 1
            && parts.iter().all(|p| p.chars().all(|c| c.is_ascii_hexdigit())))
}

/// Runs `knictl detach ID [--ifname NAME]`.
pub fn run_detach(
    client: &RuntimeClient,
    id: &str,
    ifname: &str,
    format: Format,
    timeout: Duration,
) -> Result<Exit, ClientError> {
    let req = pb::DetachRequest {
        sandbox_id: id.to_owned(),
        ifname: ifname.to_owned(),
        ..Default::default()
    };
    client.detach(&req, timeout)?;
    output::print(format, Json::Empty, || println!("detached {id}"));
    Ok(Exit::Success)
}
