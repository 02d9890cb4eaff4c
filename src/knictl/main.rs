//! `knictl`: the operator's command line for knid. Tables for people, `-o wide` for more
//! columns, `-o json` for scripts; `knictl doctor` checks the node. Exit codes: see [`exit`].

mod cli;
mod exit;
mod kernel;
mod output;
mod verbs;

use std::collections::HashMap;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use knid_transport::{pb, ClientError, RuntimeClient};
use serde_json::json;

use cli::{Cli, Command, ExtensionAction, NetnsCommand};
use exit::Exit;
use output::Format;
use verbs::{completion, doctor, inspect, node, sandboxes};

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                Exit::Usage.into()
            } else {
                // --help, --version.
                Exit::Success.into()
            };
        }
    };
    let timeout = Duration::from_secs(cli.timeout);
    match &cli.command {
        Command::Completion { shell } => {
            completion::print(*shell);
            Exit::Success.into()
        }
        Command::Doctor => doctor::run(&cli.socket, cli.output, timeout).into(),
        _ => {
            let client = match exit::connect(&cli.socket) {
                Ok(client) => client,
                Err(exit) => return exit.into(),
            };
            let check = matches!(cli.command, Command::Check { .. });
            match run(&cli, &client, timeout) {
                Ok(exit) => exit.into(),
                Err(e) => exit::report(&e, check).into(),
            }
        }
    }
}

/// Prints `{}` for JSON, else `text`: what a verb that returns nothing says.
fn done(format: Format, text: &str) {
    if format.is_json() {
        println!("{{}}");
    } else {
        println!("{text}");
    }
}

fn run(cli: &Cli, client: &RuntimeClient, timeout: Duration) -> Result<Exit, ClientError> {
    let format = cli.output;
    match &cli.command {
        Command::Status => {
            let resp = client.status(timeout)?;
            if format.is_json() {
                output::print_json(&resp);
            } else {
                node::print_status(&resp, format);
            }
        }
        Command::Networks => {
            let resp = client.networks(timeout)?;
            if format.is_json() {
                output::print_json(&resp);
            } else {
                node::print_networks(&resp, format);
            }
        }
        Command::SetupNodeNetwork => {
            client.setup_node_network(timeout)?;
            done(format, "node network set up");
        }
        Command::Netns(NetnsCommand::Create { id, name }) => {
            let req = pb::CreateNetnsRequest {
                sandbox_id: id.clone(),
                name: name.clone(),
                ..Default::default()
            };
            let resp = client.create_netns(&req, timeout)?;
            if format.is_json() {
                output::print_json(&resp);
            } else {
                println!("{}", resp.netns_path);
            }
        }
        Command::Netns(NetnsCommand::Delete { id }) => {
            let req = pb::DeleteNetnsRequest {
                sandbox_id: id.clone(),
                ..Default::default()
            };
            client.delete_netns(&req, timeout)?;
            done(format, &format!("deleted the netns of {id}"));
        }
        Command::Ls { network, state } => {
            sandboxes::run(
                client,
                network.as_deref(),
                state.as_deref(),
                format,
                timeout,
            )?;
        }
        Command::Inspect { id, no_kernel } => {
            inspect::run(client, id, *no_kernel, format, timeout)?;
        }
        Command::Check { id, ifname } => {
            return check(client, id, ifname.as_deref(), format, timeout)
        }
        Command::Attach {
            id,
            netns,
            network,
            ifname,
            ips,
            mac,
            mtu,
        } => {
            let req = pb::AttachRequest {
                sandbox_id: id.clone(),
                netns_path: netns.clone(),
                interfaces: vec![pb::InterfaceRequest {
                    name: ifname.clone(),
                    network: network.clone(),
                    mac: mac.clone(),
                    mtu: *mtu,
                    static_ips: ips.clone(),
                    ..Default::default()
                }],
                ..Default::default()
            };
            let sandbox = client.attach(&req, timeout)?;
            if format.is_json() {
                output::print_json(&sandbox);
            } else {
                let bridges = if format.is_wide() {
                    inspect::bridges(&client.networks(timeout)?)
                } else {
                    HashMap::new()
                };
                inspect::print_sandbox(&sandbox, &bridges, None);
            }
        }
        Command::Detach { id, ifname } => {
            let req = pb::DetachRequest {
                sandbox_id: id.clone(),
                ifname: ifname.clone(),
                ..Default::default()
            };
            client.detach(&req, timeout)?;
            done(format, &format!("detached {id}"));
        }
        Command::Gc {
            dry_run,
            keep,
            keep_attachments,
        } => {
            // No list means "keep everything the sweep does not find", never "keep nothing".
            let req = pb::GarbageCollectRequest {
                valid_sandbox_ids: keep.clone(),
                valid_attachments: keep_attachments.clone(),
                dry_run: *dry_run,
                sweep_only: keep.is_empty() && keep_attachments.is_empty(),
                ..Default::default()
            };
            let resp = client.garbage_collect(&req, timeout)?;
            if format.is_json() {
                output::print_json(&resp);
            } else {
                node::print_gc(&resp);
            }
            for error in &resp.errors {
                eprintln!("knictl: gc: {error}");
            }
            if !resp.errors.is_empty() {
                return Ok(Exit::Failed);
            }
        }
        Command::Extensions => {
            let resp = client.list_extensions(timeout)?;
            if format.is_json() {
                output::print_json(&resp);
            } else {
                node::print_extensions(&resp, format);
            }
        }
        Command::Metrics { prefix } => {
            let mut resp = pb::MetricsResponse::new();
            resp.text = output::metric_families(&client.metrics(timeout)?, prefix.as_deref());
            if format.is_json() {
                output::print_json(&resp);
            } else {
                print!("{}", resp.text);
            }
        }
        Command::Extension {
            action:
                ExtensionAction::Register {
                    name,
                    extension_socket,
                    phases,
                    required,
                    timeout_ms,
                    order,
                },
        } => {
            let req = pb::RegisterExtensionRequest {
                extension: protobuf::MessageField::some(pb::ExtensionSpec {
                    name: name.clone(),
                    socket_path: extension_socket.clone(),
                    phases: phases.clone(),
                    required: *required,
                    timeout_ms: *timeout_ms,
                    order: *order,
                    ..Default::default()
                }),
                ..Default::default()
            };
            client.register_extension(&req, timeout)?;
            done(format, &format!("registered extension {name}"));
        }
        Command::Extension {
            action: ExtensionAction::Unregister { name },
        } => {
            let req = pb::UnregisterExtensionRequest {
                name: name.clone(),
                ..Default::default()
            };
            client.unregister_extension(&req, timeout)?;
            done(format, &format!("unregistered extension {name}"));
        }
        // Handled before connecting.
        Command::Doctor | Command::Completion { .. } => {}
    }
    Ok(Exit::Success)
}

/// `knictl check`: `ID: ok`, or the first difference and [`Exit::Problems`]; JSON says which.
fn check(
    client: &RuntimeClient,
    id: &str,
    ifname: Option<&str>,
    format: Format,
    timeout: Duration,
) -> Result<Exit, ClientError> {
    let req = pb::CheckRequest {
        sandbox_id: id.to_owned(),
        ifname: ifname.unwrap_or_default().to_owned(),
        ..Default::default()
    };
    let outcome = client.check(&req, timeout);
    let difference = match &outcome {
        Ok(()) => None,
        Err(e) if Exit::of_check_error(e) == Exit::Problems => Some(exit::message(e)),
        Err(_) => return outcome.map(|()| Exit::Success),
    };
    if format.is_json() {
        output::print_value(&json!({
            "sandbox_id": id,
            "ifname": ifname.unwrap_or_default(),
            "ok": difference.is_none(),
            "difference": difference,
        }));
    } else {
        match &difference {
            None => println!("{id}: ok"),
            Some(d) => println!("{id}: differs: {d}"),
        }
    }
    Ok(match outcome {
        Ok(()) => Exit::Success,
        Err(e) => exit::report(&e, true),
    })
}
