//! `knictl`: the operator's command line for knid. Tables for people, `-o wide` for more
//! columns, `-o json` for scripts; `knictl doctor` checks the node. Exit codes: see [`exit`].
//!
//! This file parses the command line, connects to knid and hands the verb to its module under
//! [`verbs`]; [`output`] decides between JSON and text, [`kernel`] is the live kernel view.

#![forbid(unsafe_code)]

mod cli;
mod exit;
mod kernel;
mod output;
mod verbs;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use knid_transport::{ClientError, RuntimeClient};

use cli::{Cli, Command, PolicyCommand};
use exit::Exit;
use output::Format;
use verbs::{
    attach, check, completion, doctor, extensions, gc, inspect, metrics, netns, node, policy,
    sandboxes,
};

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
    // The verbs that need no connection; doctor diagnoses the connection itself.
    match &cli.command {
        Command::Completion { shell } => return completion::run_completion(*shell).into(),
        Command::Doctor => return doctor::run_doctor(&cli.socket, cli.output, timeout).into(),
        _ => {}
    }
    let client = match exit::connect(&cli.socket) {
        Ok(client) => client,
        Err(exit) => return exit.into(),
    };
    match dispatch(&cli.command, &client, cli.output, timeout) {
        Ok(exit) => exit.into(),
        // A failed check's difference is its own exit (check maps it); what reaches here is a
        // failed call like any other verb's.
        Err(e) => exit::report(&e, false).into(),
    }
}

/// Runs a verb that talks to knid.
fn dispatch(
    command: &Command,
    client: &RuntimeClient,
    format: Format,
    timeout: Duration,
) -> Result<Exit, ClientError> {
    match command {
        Command::Status => node::run_status(client, format, timeout),
        Command::Networks => node::run_networks(client, format, timeout),
        Command::SetupNodeNetwork => node::run_setup_node_network(client, format, timeout),
        Command::Netns(command) => netns::run_netns(client, command, format, timeout),
        Command::Policy(PolicyCommand::Ls { pod }) => {
            policy::ls::run_ls(client, pod.as_deref(), format, timeout)
        }
        Command::Policy(PolicyCommand::Explain { from, to, port }) => {
            policy::explain::run_explain(client, from, to, port, format, timeout)
        }
        Command::Ls { network, state } => sandboxes::run_ls(
            client,
            network.as_deref(),
            state.as_deref(),
            format,
            timeout,
        ),
        Command::Inspect { id, no_kernel } => {
            inspect::run_inspect(client, id, *no_kernel, format, timeout)
        }
        Command::Check { id, ifname } => {
            check::run_check(client, id, ifname.as_deref(), format, timeout)
        }
        Command::Attach(args) => attach::run_attach(client, args, format, timeout),
        Command::Detach { id, ifname } => attach::run_detach(client, id, ifname, format, timeout),
        Command::Gc {
            dry_run,
            keep,
            keep_attachments,
            allow_detach_all,
        } => gc::run_gc(
            client,
            gc::Gc {
                dry_run: *dry_run,
                keep,
                keep_attachments,
                allow_detach_all: *allow_detach_all,
            },
            format,
            timeout,
        ),
        Command::Extensions => extensions::run_extensions(client, format, timeout),
        Command::Metrics { prefix } => {
            metrics::run_metrics(client, prefix.as_deref(), format, timeout)
        }
        Command::Extension { action } => extensions::run_extension(client, action, format, timeout),
        // Run before connecting.
        Command::Doctor | Command::Completion { .. } => Ok(Exit::Success),
    }
}
