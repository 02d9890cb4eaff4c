//! knid-grpc's flags, and what it takes from knid's own configuration file: knid's socket, its
//! access rule (`allowed_uids`, `allowed_gids`) and its `request_timeout`, read with knid's own
//! parser, so the gRPC socket lets in exactly whom knid's socket lets in.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use clap::Parser;
use knid_core::config::ApiSettings;
use knid_core::Config;

/// knid's default configuration file.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/knid/knid.toml";

/// knid-grpc: serves kni.KNI and knid.v1.Runtime over gRPC and forwards each call to knid's ttrpc
/// socket.
#[derive(Debug, Parser)]
#[command(version, about)]
pub struct Args {
    /// knid's configuration file: knid's socket, allowed_uids, allowed_gids and request_timeout
    /// are read from it; knid's embedded default is used when the default path does not exist.
    #[arg(long, default_value = DEFAULT_CONFIG_PATH)]
    pub config: PathBuf,
    /// knid's ttrpc socket (overrides the config's `socket`).
    #[arg(long)]
    pub knid_socket: Option<PathBuf>,
    /// The unix socket to serve gRPC on.
    #[arg(long, default_value = "/run/knid/knid-grpc.sock")]
    pub socket: PathBuf,
    /// File mode of the gRPC socket, in octal.
    #[arg(long, default_value = "660", value_parser = parse_mode)]
    pub socket_mode: u32,
    /// Group of the gRPC socket (the config's `socket_gid` when not given).
    #[arg(long)]
    pub socket_gid: Option<u32>,
    /// Also serve gRPC on this TCP address; refused unless it is a loopback address. Off by
    /// default. A TCP caller is let in when the uid owning its socket is in allowed_uids.
    #[arg(long)]
    pub tcp: Option<SocketAddr>,
    /// Log level: error, warn, info, debug, trace.
    #[arg(long, default_value = "info", env = "KNID_GRPC_LOG")]
    pub log_level: log::LevelFilter,
}

fn parse_mode(text: &str) -> Result<u32, String> {
    let digits = text.strip_prefix("0o").unwrap_or(text);
    u32::from_str_radix(digits, 8)
        .ok()
        .filter(|m| *m <= 0o777)
        .ok_or_else(|| format!("{text:?} is not an octal file mode (e.g. 660)"))
}

/// Why knid-grpc cannot start.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// knid's configuration file could not be read.
    #[error("read config {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// knid's configuration is not valid.
    #[error("config {path}")]
    Config {
        path: String,
        #[source]
        source: Box<knid_core::Error>,
    },
    /// `--tcp` names an address other hosts could reach.
    #[error("--tcp {0}: only a loopback address (127.0.0.0/8 or ::1) may serve gRPC over TCP")]
    NotLoopback(SocketAddr),
}

/// Everything knid-grpc runs with.
#[derive(Debug)]
pub struct Settings {
    /// knid's ttrpc socket.
    pub knid_socket: PathBuf,
    /// knid's access rule and request timeout.
    pub api: ApiSettings,
    /// Group of the gRPC socket.
    pub socket_gid: Option<u32>,
}

impl Settings {
    /// Reads knid's configuration as knid does and checks the flags.
    pub fn load(args: &Args) -> Result<Self, SettingsError> {
        if let Some(addr) = args.tcp.filter(|a| !a.ip().is_loopback()) {
            return Err(SettingsError::NotLoopback(addr));
        }
        let config = read_config(&args.config)?;
        let api = config.api().map_err(|source| SettingsError::Config {
            path: args.config.display().to_string(),
            source: Box::new(source),
        })?;
        Ok(Self {
            knid_socket: args.knid_socket.clone().unwrap_or(config.socket),
            api,
            socket_gid: args.socket_gid.or(config.socket_gid),
        })
    }
}

/// The file when it exists; knid's embedded default when the default path does not.
fn read_config(path: &Path) -> Result<Config, SettingsError> {
    let invalid = |name: String| {
        move |source| SettingsError::Config {
            path: name,
            source: Box::new(source),
        }
    };
    match std::fs::read_to_string(path) {
        Ok(text) => Config::from_toml(&text).map_err(invalid(path.display().to_string())),
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound
                && path == Path::new(DEFAULT_CONFIG_PATH) =>
        {
            Config::embedded_default().map_err(invalid("<embedded default>".into()))
        }
        Err(source) => Err(SettingsError::Read {
            path: path.to_owned(),
            source,
        }),
    }
}
