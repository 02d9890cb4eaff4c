//! `knictl netns create|delete`: the network namespaces knid creates for sandboxes.

use std::time::Duration;

use knid_transport::{pb, ClientError, RuntimeClient};

use crate::cli::NetnsCommand;
use crate::exit::Exit;
use crate::output::{self, Format, Json};

/// Runs `knictl netns create ID [--name NAME]` (prints the netns path) or
/// `knictl netns delete ID`.
pub fn run_netns(
    client: &RuntimeClient,
    command: &NetnsCommand,
    format: Format,
    timeout: Duration,
) -> Result<Exit, ClientError> {
    match command {
        NetnsCommand::Create { id, name } => {
            let req = pb::CreateNetnsRequest {
                sandbox_id: id.clone(),
                name: name.clone(),
                ..Default::default()
            };
            let resp = client.create_netns(&req, timeout)?;
            output::print(format, Json::Message(&resp), || {
                println!("{}", resp.netns_path);
            });
        }
        NetnsCommand::Delete { id } => {
            let req = pb::DeleteNetnsRequest {
                sandbox_id: id.clone(),
                ..Default::default()
            };
            client.delete_netns(&req, timeout)?;
            output::print(format, Json::Empty, || {
                println!("deleted the netns of {id}");
            });
        }
    }
    Ok(Exit::Success)
}
