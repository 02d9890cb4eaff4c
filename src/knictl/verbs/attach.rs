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
        interfaces: vec![pb::InterfaceRequest {
            name: args.ifname.clone(),
            network: args.network.clone(),
            mac: args.mac.clone(),
            mtu: args.mtu,
            static_ips: args.ips.clone(),
            ..Default::default()
        }],
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
