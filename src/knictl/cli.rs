//! knictl's command line: verbs, flags and the help text (exit codes in `--help`).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use knid_transport::pb;

use crate::exit;
use crate::output::Format;

/// knictl: inspect and drive knid, the pod network runtime.
#[derive(Debug, Parser)]
#[command(version, about, after_help = exit::HELP)]
pub struct Cli {
    /// knid's socket.
    #[arg(
        long,
        global = true,
        env = "KNID_SOCKET",
        default_value = "/run/knid/knid.sock"
    )]
    pub socket: PathBuf,
    /// Output format of every verb: table (for people), wide (a table with more columns) or
    /// json (for scripts).
    #[arg(short, long, global = true, value_enum, default_value_t = Format::Table)]
    pub output: Format,
    /// Request timeout in seconds.
    #[arg(long, global = true, default_value_t = 30)]
    pub timeout: u64,
    #[command(subcommand)]
    pub command: Command,
}

/// knictl's verbs.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Node readiness and its conditions.
    Status,
    /// Configured networks and their address capacity.
    Networks,
    /// Set up the node side of every network again: re-create a bridge deleted behind knid's
    /// back (gateways, MTU), put the attached pods' host ends back on it, enable forwarding.
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
    /// Show one sandbox in full: its states, its kernel objects as recorded and, unless
    /// --no-kernel, as the kernel has them now (MISSING, DOWN... flag a difference).
    ///
    /// Exits 4 when knid does not know the sandbox.
    Inspect {
        /// Sandbox id.
        id: String,
        /// Show only what knid recorded; do not look at the kernel.
        #[arg(long)]
        no_kernel: bool,
    },
    /// Verify a sandbox's attached interfaces against the kernel (and a cni interface's CHECK
    /// chain).
    ///
    /// Exits 5 naming the first difference, 4 for an unknown sandbox or interface.
    Check {
        /// Sandbox id.
        id: String,
        /// Only this interface.
        #[arg(long)]
        ifname: Option<String>,
    },
    /// Attach a sandbox's network namespace to a network.
    Attach(AttachArgs),
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
        override_usage = "knictl gc [--dry-run] [--keep <ID>]... [--keep-attachment <ID/IFNAME>]... [--allow-detach-all]"
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
        /// With --keep or --keep-attachment: detach even if the lists keep no attached
        /// interface (without it knid refuses such a GC as a likely mistake).
        #[arg(long)]
        allow_detach_all: bool,
    },
    /// Registered extensions, in call order, and how their last calls went.
    Extensions,
    /// knid's metrics in the Prometheus text format (the Metrics RPC; the same text as
    /// `GET /metrics` on `metrics_addr`). `-o json` wraps it as `{"text": ...}`.
    Metrics {
        /// Only the metric families whose names start with this (e.g. `knid_ipam`).
        prefix: Option<String>,
    },
    /// Register or unregister an extension.
    Extension {
        #[command(subcommand)]
        action: ExtensionAction,
    },
    /// Network namespaces knid creates for sandboxes.
    #[command(subcommand)]
    Netns(NetnsCommand),
    /// Kubernetes NetworkPolicy as knid enforces it on this node (cluster mode with
    /// [cluster] network_policy on): the policies and the pods they select, and why a
    /// connection is allowed or denied.
    ///
    /// Exits 1 when NetworkPolicy is not enforced on this node or an argument is refused (knid
    /// names it). A denied connection is an answer, not a failure: explain exits 0.
    #[command(subcommand)]
    Policy(PolicyCommand),
    /// Check the node: knid's socket and readiness, bridges, forwarding sysctls, orphaned
    /// objects, address pools, extensions. One line per check (ok, warn, FAIL), and for each
    /// problem what to do.
    ///
    /// Exits 0 when no check failed (warnings are allowed: they mark what to watch), 5 when one
    /// did, 3 when knid cannot be reached (the checks that need it are not run).
    Doctor,
    /// Print a shell completion script on stdout.
    ///
    /// bash: `knictl completion bash > /etc/bash_completion.d/knictl`; zsh: into a directory of
    /// $fpath as `_knictl`; fish: `knictl completion fish > ~/.config/fish/completions/knictl.fish`.
    Completion {
        /// The shell.
        shell: Shell,
    },
}

/// `knictl attach ...`.
#[derive(Debug, Args)]
pub struct AttachArgs {
    /// Sandbox id.
    pub id: String,
    /// Path of the sandbox's network namespace (e.g. /run/netns/pod1).
    #[arg(long)]
    pub netns: String,
    /// Network name (default: "default").
    #[arg(long, default_value = "")]
    pub network: String,
    /// Interface name inside the sandbox.
    #[arg(long, default_value = "eth0")]
    pub ifname: String,
    /// Static address (repeat for IPv4 and IPv6).
    #[arg(long = "ip")]
    pub ips: Vec<String>,
    /// MAC address of the pod interface.
    #[arg(long, default_value = "")]
    pub mac: String,
    /// MTU of the pod interface (0 = network default).
    #[arg(long, default_value_t = 0)]
    pub mtu: u32,
    /// Interface kind: veth, tap, macvlan, ipvlan or host-device (default: the network's; tap
    /// when a tap flag is given, host-device with --device).
    #[arg(long, default_value = "")]
    pub kind: String,
    /// Tap: queue pairs, 1-256 (more than one makes a multi-queue tap).
    #[arg(long)]
    pub queue_pairs: Option<u32>,
    /// Tap: the uid that may open it (default: root, when no --tap-group is given either).
    #[arg(long, value_name = "UID")]
    pub tap_owner: Option<u32>,
    /// Tap: the gid whose members may open it.
    #[arg(long, value_name = "GID")]
    pub tap_group: Option<u32>,
    /// Tap: a Kata DAN tap on the host bridge, described by a DAN file, instead of a tap in the
    /// sandbox netns.
    #[arg(long)]
    pub dan: bool,
    /// Host device to move into the sandbox: its name, or its PCI address (0000:3b:00.1).
    #[arg(long, value_name = "NAME|PCI")]
    pub device: Option<String>,
    /// Limit traffic into the pod, bits/s as a Kubernetes quantity (10M = 10 Mbit/s; k, M, G,
    /// Ki, Mi, …); the burst is 100 ms at the rate, at least 64 KiB.
    #[arg(long, value_name = "RATE", value_parser = rate)]
    pub ingress_rate: Option<u64>,
    /// Limit traffic out of the pod, as --ingress-rate.
    #[arg(long, value_name = "RATE", value_parser = rate)]
    pub egress_rate: Option<u64>,
}

/// A rate flag: a Kubernetes quantity of bits per second.
fn rate(text: &str) -> Result<u64, String> {
    knid_core::parse_quantity(text).map_err(|e| e.rule)
}

impl AttachArgs {
    /// Whether a tap setting is given.
    pub fn wants_tap(&self) -> bool {
        self.queue_pairs.is_some()
            || self.tap_owner.is_some()
            || self.tap_group.is_some()
            || self.dan
    }
}

/// Shells `knictl completion` writes scripts for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Shell {
    /// GNU bash.
    Bash,
    /// Z shell.
    Zsh,
    /// fish.
    Fish,
}

/// `knictl netns ...`.
#[derive(Debug, Subcommand)]
pub enum NetnsCommand {
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

/// `knictl policy ...`.
#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// The NetworkPolicies knid knows: selector, rules per direction and the pods of this node
    /// each selects; then what knid knows of the cluster and when its table last changed.
    #[command(alias = "list")]
    Ls {
        /// Only the policies that select this pod.
        #[arg(long, value_name = "NAMESPACE/NAME")]
        pod: Option<String>,
    },
    /// Whether a new connection may start, and why: the source's egress and the destination's
    /// ingress, each with the policy and rule that allow it or the policies that isolate the
    /// pod.
    #[command(
        override_usage = "knictl policy explain --from <NAMESPACE/POD|IP> --to <NAMESPACE/POD|IP> --port <PORT[/PROTOCOL]>"
    )]
    Explain {
        /// The source: a pod (namespace/name) or an IP address.
        #[arg(long, value_name = "NAMESPACE/POD|IP")]
        from: String,
        /// The destination: a pod (namespace/name) or an IP address.
        #[arg(long, value_name = "NAMESPACE/POD|IP")]
        to: String,
        /// The destination port and protocol: 80/tcp, 53/udp, 9000/sctp (80 means TCP).
        #[arg(long, value_name = "PORT[/PROTOCOL]")]
        port: String,
    },
}

/// `knictl extension ...`.
#[derive(Debug, Subcommand)]
pub enum ExtensionAction {
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

#[cfg(test)]
mod tests;
