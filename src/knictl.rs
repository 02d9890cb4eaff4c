//! `knictl`: the operator's command line for knid. Tables for people, `-o json` for scripts.
//!
//! Exit codes: 0 success; 1 the request failed (the error and its code are printed), or `gc`
//! could not remove something (each error is printed); 2 bad usage; 3 knid could not be reached.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use knid_core::error::chain;
use knid_transport::{pb, ClientError, RuntimeClient};
use protobuf::MessageDyn;

/// knictl: inspect and drive knid, the pod network runtime.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    /// knid's socket.
    #[arg(
        long,
        global = true,
        env = "KNID_SOCKET",
        default_value = "/run/knid/knid.sock"
    )]
    socket: PathBuf,
    /// Output format.
    #[arg(short, long, global = true, value_enum, default_value_t = Format::Table)]
    output: Format,
    /// Request timeout in seconds.
    #[arg(long, global = true, default_value_t = 30)]
    timeout: u64,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    Table,
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Node readiness and its conditions.
    Status,
    /// Configured networks and their address capacity.
    Networks,
    /// Set up the node side of every network again: re-create a bridge deleted behind knid's
    /// back (gateways, MTU) and put the attached pods' host ends back on it.
    SetupNodeNetwork,
    /// List sandboxes.
    #[command(alias = "list")]
    Ls {
        /// Only sandboxes on this network.
        #[arg(long)]
        network: Option<String>,
        /// Only sandboxes in this state (attached, pending, ...).
        #[arg(long)]
        state: Option<String>,
    },
    /// Show one sandbox in full.
    Inspect {
        /// Sandbox id.
        id: String,
    },
    /// Verify a sandbox's attached interfaces against the kernel (and a cni interface's CHECK
    /// chain); exits non-zero naming the first difference.
    Check {
        /// Sandbox id.
        id: String,
        /// Only this interface.
        #[arg(long)]
        ifname: Option<String>,
    },
    /// Attach a sandbox's network namespace to a network.
    Attach {
        /// Sandbox id.
        id: String,
        /// Path of the sandbox's network namespace (e.g. /run/netns/pod1).
        #[arg(long)]
        netns: String,
        /// Network name (default: "default").
        #[arg(long, default_value = "")]
        network: String,
        /// Interface name inside the sandbox.
        #[arg(long, default_value = "eth0")]
        ifname: String,
        /// Static address (repeat for IPv4 and IPv6).
        #[arg(long = "ip")]
        ips: Vec<String>,
        /// MAC address of the pod interface.
        #[arg(long, default_value = "")]
        mac: String,
        /// MTU of the pod interface (0 = network default).
        #[arg(long, default_value_t = 0)]
        mtu: u32,
    },
    /// Detach a sandbox (all interfaces, or one with --ifname).
    Detach {
        /// Sandbox id.
        id: String,
        /// Only this interface.
        #[arg(long, default_value = "")]
        ifname: String,
    },
    /// Garbage-collect: remove what should not be there (the orphan sweep, or CNI GC with --keep).
    ///
    /// Without --keep or --keep-attachment only the sweep runs: attachments whose netns is gone,
    /// operations left half-done, host links and address reservations without a record. No
    /// healthy pod is ever detached by a bare `knictl gc`.
    ///
    /// With --keep or --keep-attachment (CNI 1.1 GC), every attachment not listed is detached
    /// as well: list every pod that must stay.
    ///
    /// Exits 1 when something could not be removed (each error is printed on stderr).
    #[command(
        override_usage = "knictl gc [--dry-run] [--keep <ID>]... [--keep-attachment <ID/IFNAME>]..."
    )]
    Gc {
        /// Only report what would be removed; remove nothing.
        #[arg(long)]
        dry_run: bool,
        /// Keep every attachment of this sandbox (repeatable); detaches every unlisted one.
        #[arg(long = "keep", value_name = "ID")]
        keep: Vec<String>,
        /// Keep this one attachment (repeatable); detaches every unlisted one.
        #[arg(long = "keep-attachment", value_name = "ID/IFNAME", value_parser = attachment_ref)]
        keep_attachments: Vec<pb::AttachmentRef>,
    },
    /// Registered extensions, in call order, and how their last calls went.
    Extensions,
    /// Register or unregister an extension.
    Extension {
        #[command(subcommand)]
        action: ExtensionAction,
    },
    /// Network namespaces knid creates for sandboxes.
    #[command(subcommand)]
    Netns(NetnsCommand),
}

/// `knictl netns ...`.
#[derive(Debug, Subcommand)]
enum NetnsCommand {
    /// Create the sandbox's netns (a repeat prints the existing one) and print its path.
    Create {
        /// Sandbox id.
        id: String,
        /// File name under knid's netns_dir (default knid-<ID>).
        #[arg(long, default_value = "")]
        name: String,
    },
    /// Detach the sandbox, then delete the netns knid created for it.
    Delete {
        /// Sandbox id.
        id: String,
    },
}

#[derive(Debug, Subcommand)]
enum ExtensionAction {
    /// Register an extension, or replace the one of the same name. Persisted: only
    /// `knictl extension unregister` removes it.
    #[command(
        override_usage = "knictl extension register <NAME> --extension-socket <PATH> --phase <PHASE>... [--required] [--timeout-ms <N>] [--order <N>]"
    )]
    Register {
        /// Unique name (1-64 characters of [A-Za-z0-9_.-]).
        name: String,
        /// Absolute path of the unix socket the extension serves knid.v1.Extension on. (Not
        /// `--socket`: that is knid's own socket, for every knictl command.)
        #[arg(long, value_name = "PATH")]
        extension_socket: String,
        /// When to call it: post-attach (after an attach, before its reply) or pre-detach
        /// (before a detach removes anything); repeat for both.
        #[arg(long = "phase", value_name = "PHASE", required = true)]
        phases: Vec<String>,
        /// Fail (and roll back) attaches the extension refuses or does not answer in time.
        #[arg(long)]
        required: bool,
        /// Per-call timeout in milliseconds, 1-60000; 0 means 2000.
        #[arg(long, value_name = "N", default_value_t = 0)]
        timeout_ms: u32,
        /// Call order: ascending, then by name.
        #[arg(
            long,
            value_name = "N",
            default_value_t = 0,
            allow_negative_numbers = true
        )]
        order: i32,
    },
    /// Remove an extension's registration; an unknown name is success.
    Unregister {
        /// The extension's name.
        name: String,
    },
}

/// `--keep-attachment` syntax: `ID/IFNAME`, both parts non-empty. Neither a sandbox id nor an
/// interface name may contain `/`; knid validates the rest.
fn attachment_ref(value: &str) -> Result<pb::AttachmentRef, String> {
    match value.split_once('/') {
        Some((id, ifname)) if !id.is_empty() && !ifname.is_empty() && !ifname.contains('/') => {
            Ok(pb::AttachmentRef {
                sandbox_id: id.to_owned(),
                ifname: ifname.to_owned(),
                ..Default::default()
            })
        }
        _ => Err("must be SANDBOX_ID/IFNAME, e.g. pod-1/eth0".to_owned()),
    }
}

const EXIT_FAILED: u8 = 1;
const EXIT_UNREACHABLE: u8 = 3;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let client = match RuntimeClient::connect(&cli.socket) {
        Ok(c) => c,
        Err(e) => {
            eprintln!(
                "knictl: cannot reach knid at {}: {}",
                cli.socket.display(),
                chain(&e)
            );
            return ExitCode::from(EXIT_UNREACHABLE);
        }
    };
    match run(&cli, &client) {
        Ok(code) => code,
        Err(e) => {
            match e.code() {
                Some(code) => eprintln!(
                    "knictl: {}: {}",
                    knid_transport::errors::code_name(code),
                    rpc_message(&e)
                ),
                None => eprintln!("knictl: {}", chain(&e)),
            }
            if matches!(e, ClientError::Transport(_)) && !nix::unistd::geteuid().is_root() {
                eprintln!(
                    "knictl: knid closed the connection; it serves only the uids and gids in its \
                     allowed_uids and allowed_gids (root by default)"
                );
            }
            if matches!(e, ClientError::Connect { .. } | ClientError::Transport(_)) {
                ExitCode::from(EXIT_UNREACHABLE)
            } else {
                ExitCode::from(EXIT_FAILED)
            }
        }
    }
}

fn rpc_message(e: &ClientError) -> String {
    match e {
        ClientError::Rpc { message, .. } => message.clone(),
        other => chain(other),
    }
}

fn run(cli: &Cli, client: &RuntimeClient) -> Result<ExitCode, ClientError> {
    let timeout = Duration::from_secs(cli.timeout);
    let json = cli.output == Format::Json;
    match &cli.command {
        Command::Status => {
            let resp = client.status(timeout)?;
            if json {
                print_json(&resp);
            } else {
                print_status(&resp);
            }
        }
        Command::Networks => {
            let resp = client.networks(timeout)?;
            if json {
                print_json(&resp);
            } else {
                print_networks(&resp);
            }
        }
        Command::SetupNodeNetwork => {
            client.setup_node_network(timeout)?;
            if json {
                println!("{{}}");
            } else {
                println!("node network set up");
            }
        }
        Command::Netns(NetnsCommand::Create { id, name }) => {
            let req = pb::CreateNetnsRequest {
                sandbox_id: id.clone(),
                name: name.clone(),
                ..Default::default()
            };
            let resp = client.create_netns(&req, timeout)?;
            if json {
                print_json(&resp);
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
        }
        Command::Ls { network, state } => {
            let req = pb::ListRequest {
                network: network.clone().unwrap_or_default(),
                state: state.clone().unwrap_or_default(),
                ..Default::default()
            };
            let resp = client.list(&req, timeout)?;
            if json {
                print_json(&resp);
            } else {
                print_list(&resp);
            }
        }
        Command::Inspect { id } => {
            let req = pb::InspectRequest {
                sandbox_id: id.clone(),
                ..Default::default()
            };
            let sandbox = client.inspect(&req, timeout)?;
            if json {
                print_json(&sandbox);
            } else {
                print_sandbox(&sandbox);
            }
        }
        Command::Check { id, ifname } => {
            let req = pb::CheckRequest {
                sandbox_id: id.clone(),
                ifname: ifname.clone().unwrap_or_default(),
                ..Default::default()
            };
            client.check(&req, timeout)?;
            if !json {
                println!("{id}: ok");
            }
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
            if json {
                print_json(&sandbox);
            } else {
                print_sandbox(&sandbox);
            }
        }
        Command::Detach { id, ifname } => {
            let req = pb::DetachRequest {
                sandbox_id: id.clone(),
                ifname: ifname.clone(),
                ..Default::default()
            };
            client.detach(&req, timeout)?;
            if json {
                println!("{{}}");
            } else {
                println!("detached {id}");
            }
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
            if json {
                print_json(&resp);
            } else {
                print_gc(&resp);
            }
            for error in &resp.errors {
                eprintln!("knictl: gc: {error}");
            }
            if !resp.errors.is_empty() {
                return Ok(ExitCode::from(EXIT_FAILED));
            }
        }
        Command::Extensions => {
            let resp = client.list_extensions(timeout)?;
            if json {
                print_json(&resp);
            } else {
                print_extensions(&resp);
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
            if json {
                println!("{{}}");
            } else {
                println!("registered extension {name}");
            }
        }
        Command::Extension {
            action: ExtensionAction::Unregister { name },
        } => {
            let req = pb::UnregisterExtensionRequest {
                name: name.clone(),
                ..Default::default()
            };
            client.unregister_extension(&req, timeout)?;
            if json {
                println!("{{}}");
            } else {
                println!("unregistered extension {name}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn print_json(msg: &dyn MessageDyn) {
    let options = protobuf_json_mapping::PrintOptions {
        proto_field_name: true,
        always_output_default_values: true,
        ..Default::default()
    };
    match protobuf_json_mapping::print_to_string_with_options(msg, &options) {
        Ok(text) => println!("{text}"),
        Err(e) => eprintln!("knictl: cannot print JSON: {e}"),
    }
}

/// Prints rows as left-aligned columns separated by two spaces.
fn print_table(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let line = |cells: Vec<String>| {
        let text: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        println!("{}", text.join("  ").trim_end());
    };
    line(header.iter().map(|h| (*h).to_owned()).collect());
    for row in rows {
        line(row.clone());
    }
}

fn print_status(resp: &pb::StatusResponse) {
    println!(
        "ready: {}   version: {}   boot id: {}",
        resp.ready, resp.version, resp.boot_id
    );
    let rows: Vec<Vec<String>> = resp
        .conditions
        .iter()
        .map(|c| {
            vec![
                c.type_.clone(),
                c.status.to_string(),
                c.reason.clone(),
                c.message.clone(),
            ]
        })
        .collect();
    print_table(&["CONDITION", "STATUS", "REASON", "MESSAGE"], &rows);
}

fn print_networks(resp: &pb::NetworksResponse) {
    let rows: Vec<Vec<String>> = resp
        .networks
        .iter()
        .map(|n| {
            let capacity: Vec<String> = n
                .capacity
                .iter()
                .map(|c| format!("{} {}/{} used", c.family, c.used, c.total))
                .collect();
            let ready = if n.ready {
                "yes".to_owned()
            } else {
                format!("no: {}", n.reason)
            };
            vec![
                n.name.clone(),
                n.kind.clone(),
                ready,
                [n.bridge.as_str(), n.parent.as_str(), n.mode.as_str()]
                    .into_iter()
                    .filter(|d| !d.is_empty())
                    .collect::<Vec<_>>()
                    .join(" "),
                n.subnets.join(","),
                n.mtu.to_string(),
                capacity.join(", "),
            ]
        })
        .collect();
    print_table(
        &[
            "NAME", "KIND", "READY", "DEVICE", "SUBNETS", "MTU", "CAPACITY",
        ],
        &rows,
    );
}

fn print_list(resp: &pb::ListResponse) {
    let rows: Vec<Vec<String>> = resp
        .sandboxes
        .iter()
        .map(|s| {
            let pod = s
                .pod
                .as_ref()
                .filter(|p| !p.name.is_empty())
                .map(|p| format!("{}/{}", p.namespace, p.name))
                .unwrap_or_else(|| "-".to_owned());
            vec![
                s.id.clone(),
                s.state.clone(),
                pod,
                s.interfaces.join(","),
                s.ips.join(","),
                s.netns_path.clone(),
            ]
        })
        .collect();
    print_table(&["ID", "STATE", "POD", "INTERFACES", "IPS", "NETNS"], &rows);
}

fn print_sandbox(s: &pb::Sandbox) {
    println!("sandbox:    {}", s.id);
    println!("state:      {}", s.state);
    println!("netns:      {} (inode {})", s.netns_path, s.netns_inode);
    if let Some(pod) = s.pod.as_ref().filter(|p| !p.name.is_empty()) {
        println!("pod:        {}/{} ({})", pod.namespace, pod.name, pod.uid);
    }
    println!("generation: {}", s.generation);
    for i in &s.interfaces {
        println!(
            "interface {} ({} on {}, {}):",
            i.name, i.kind, i.network, i.state
        );
        let host = if i.host_ifname.is_empty() {
            "-"
        } else {
            &i.host_ifname
        };
        println!("  mac {}  mtu {}  host {host}", i.mac, i.mtu);
        if !i.mode.is_empty() {
            println!("  mode {}", i.mode);
        }
        if let Some(t) = i.tap.as_ref() {
            let netns = if t.netns_path.is_empty() {
                "host netns"
            } else {
                &t.netns_path
            };
            println!(
                "  tap {} in {netns}: queue pairs {}{}, vnet_hdr {}, no_pi {}, vhost-net {}",
                t.name,
                t.queue_pairs,
                if t.multi_queue { " (multi-queue)" } else { "" },
                t.vnet_hdr,
                t.no_pi,
                if t.vhost_net_ok {
                    "usable"
                } else {
                    "unavailable"
                }
            );
            let owner = |id: Option<u32>| id.map_or("-".to_owned(), |v| v.to_string());
            println!(
                "    owner uid {} gid {}{}",
                owner(t.owner_uid),
                owner(t.owner_gid),
                if t.redirect_peer.is_empty() {
                    String::new()
                } else {
                    format!(", tc redirect <-> {}", t.redirect_peer)
                }
            );
        }
        if let Some(d) = i.device.as_ref() {
            let pci = if d.pci_address.is_empty() {
                String::new()
            } else {
                format!(" (PCI {})", d.pci_address)
            };
            println!(
                "  device {}{pci}, host mtu {}: moved back on detach",
                d.original_name, d.original_mtu
            );
        }
        if !i.dan_path.is_empty() {
            println!("  dan file {}", i.dan_path);
        }
        for ip in &i.ips {
            println!("  ip {} gw {}", ip.address, ip.gateway);
        }
        for r in &i.routes {
            let via = if r.gateway.is_empty() {
                format!("dev {} scope {}", i.name, r.scope)
            } else {
                format!("via {}", r.gateway)
            };
            println!("  route {} {via}", r.dst);
        }
        for n in &i.neighbors {
            println!("  neighbour {} lladdr {}", n.ip, n.mac);
        }
    }
}

fn print_extensions(resp: &pb::ListExtensionsResponse) {
    if resp.extensions.is_empty() {
        println!("no extensions registered");
        return;
    }
    let rows: Vec<Vec<String>> = resp
        .extensions
        .iter()
        .map(|info| {
            let ext = info.extension.get_or_default();
            let last = match (info.last_call_at, info.last_call_ok) {
                (0, _) => "-".to_owned(),
                (_, true) => "ok".to_owned(),
                (_, false) => format!("error: {}", info.last_error),
            };
            vec![
                ext.name.clone(),
                ext.order.to_string(),
                ext.phases.join(","),
                if ext.required { "yes" } else { "no" }.to_owned(),
                format!("{}ms", ext.timeout_ms),
                ext.socket_path.clone(),
                last,
            ]
        })
        .collect();
    print_table(
        &[
            "NAME",
            "ORDER",
            "PHASES",
            "REQUIRED",
            "TIMEOUT",
            "SOCKET",
            "LAST CALL",
        ],
        &rows,
    );
}

fn print_gc(resp: &pb::GarbageCollectResponse) {
    if resp.removed.is_empty() {
        println!("nothing to collect");
        return;
    }
    if resp.dry_run {
        println!("would remove:");
    }
    let dash = |text: &str| {
        if text.is_empty() {
            "-".to_owned()
        } else {
            text.to_owned()
        }
    };
    let rows: Vec<Vec<String>> = resp
        .removed
        .iter()
        .map(|f| {
            vec![
                f.what.clone(),
                f.reason.clone(),
                dash(&f.sandbox_id),
                dash(&f.ifname),
                f.detail.clone(),
            ]
        })
        .collect();
    print_table(&["WHAT", "REASON", "SANDBOX", "IFNAME", "DETAIL"], &rows);
}
