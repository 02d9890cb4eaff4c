//! `knid`: the node-local pod network runtime daemon. Flags, configuration, wiring and signals;
//! everything else lives in the library crates.

use std::os::fd::IntoRawFd;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use knid_core::error::chain;
use knid_core::{Config, Runtime};
use knid_store::{Store, StoreConfig};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// Default configuration file.
const DEFAULT_CONFIG_PATH: &str = "/etc/knid/knid.toml";
/// Time given to connection threads to write the last responses before connections close.
const DRAIN_GRACE: Duration = Duration::from_millis(100);

/// knid: the pod network runtime. Serves knid.v1 over ttrpc on a unix socket.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Configuration file; the embedded default is used when the default path does not exist.
    #[arg(long, default_value = DEFAULT_CONFIG_PATH)]
    config: PathBuf,
    /// Unix socket to serve on (overrides the config).
    #[arg(long)]
    socket: Option<PathBuf>,
    /// State directory holding the store (overrides the config).
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// Log level: error, warn, info, debug, trace.
    #[arg(long, default_value = "info", env = "KNID_LOG")]
    log_level: log::LevelFilter,
    /// Print the embedded default configuration and exit.
    #[arg(long)]
    print_default_config: bool,
    /// Where the kernel's boot id is read. A boot id different from the recorded one means a
    /// reboot: every recorded attachment is released at start-up.
    #[arg(long, default_value = "/proc/sys/kernel/random/boot_id")]
    boot_id_file: PathBuf,
}

#[derive(Debug, thiserror::Error)]
enum MainError {
    #[error("read config {path}")]
    ReadConfig {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("config {path}")]
    Config {
        path: String,
        #[source]
        source: Box<knid_core::Error>,
    },
    #[error("state dir {path}")]
    StateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("open store")]
    Store(#[source] knid_store::Error),
    #[error("start runtime")]
    Runtime(#[source] Box<knid_core::Error>),
    #[error("socket")]
    Socket(#[source] knid_transport::socket::SocketError),
    #[error("ttrpc server")]
    Server(#[source] ttrpc::Error),
    #[error("signals")]
    Signals(#[source] std::io::Error),
    #[error("shutdown")]
    Shutdown(#[source] Box<knid_core::Error>),
    #[error(
        "store failed; exiting for the supervisor to restart knid, which recovers from the store"
    )]
    StoreFailed(#[source] knid_store::Error),
}

fn main() -> ExitCode {
    knid_core::memory::limit_arenas();
    let args = Args::parse();
    if args.print_default_config {
        print!("{}", knid_core::config::DEFAULT_CONFIG);
        return ExitCode::SUCCESS;
    }
    // Dependencies (sled, ttrpc) stay at warn: their debug output drowns knid's own.
    let mut logger = env_logger::Builder::new();
    logger
        .filter_level(args.log_level.min(log::LevelFilter::Warn))
        .format_timestamp_millis();
    for module in [
        "knid",
        "knid_core",
        "knid_netops",
        "knid_store",
        "knid_transport",
    ] {
        logger.filter_module(module, args.log_level);
    }
    logger.init();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            log::error!("{}", chain(&e));
            ExitCode::FAILURE
        }
    }
}

/// Loads the configuration: the file when it exists, the embedded default when the default path
/// is absent; an explicitly named file that is missing is an error.
fn load_config(args: &Args) -> Result<Config, MainError> {
    let path = &args.config;
    let mut config = match std::fs::read_to_string(path) {
        Ok(text) => Config::from_toml(&text).map_err(|source| MainError::Config {
            path: path.display().to_string(),
            source: Box::new(source),
        })?,
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound
                && path == Path::new(DEFAULT_CONFIG_PATH) =>
        {
            log::info!(
                "{} not found, using the embedded default configuration",
                path.display()
            );
            Config::embedded_default().map_err(|source| MainError::Config {
                path: "<embedded default>".into(),
                source: Box::new(source),
            })?
        }
        Err(source) => {
            return Err(MainError::ReadConfig {
                path: path.clone(),
                source,
            })
        }
    };
    if let Some(socket) = &args.socket {
        config.socket = socket.clone();
    }
    if let Some(dir) = &args.state_dir {
        config.state_dir = dir.clone();
    }
    Ok(config)
}

/// The kernel's boot id; empty (recovery then cannot tell a reboot) if unreadable.
fn boot_id(path: &Path) -> String {
    match std::fs::read_to_string(path) {
        Ok(s) => s.trim().to_owned(),
        Err(e) => {
            log::warn!("read boot id from {}: {e}", path.display());
            String::new()
        }
    }
}

fn open_store(config: &Config) -> Result<Arc<Store>, MainError> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = &config.state_dir;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| MainError::StateDir {
            path: dir.clone(),
            source,
        })?;
    let mut store_config = StoreConfig::new(dir.join("store"));
    store_config.cache_capacity_bytes = config.store_cache_bytes;
    let store = Store::open(&store_config).map_err(MainError::Store)?;
    Ok(Arc::new(store))
}

fn run(args: &Args) -> Result<(), MainError> {
    let config = load_config(args)?;
    // Registered before start-up work so a SIGTERM during start-up is queued, not fatal.
    let mut signals = Signals::new([SIGTERM, SIGINT, SIGHUP]).map_err(MainError::Signals)?;
    let store = open_store(&config)?;
    let boot = boot_id(&args.boot_id_file);
    // Recovers the store against the kernel (and the boot id) before serving.
    let runtime = Arc::new(
        Runtime::start(
            &config,
            store,
            boot,
            Arc::new(knid_transport::OneshotExtensionCaller),
        )
        .map_err(|e| MainError::Runtime(Box::new(e)))?,
    );

    let listener = knid_transport::socket::bind_listener(
        &config.socket,
        config.socket_mode,
        config.socket_gid,
    )
    .map_err(MainError::Socket)?;
    let mut server = ttrpc::Server::new()
        .add_listener(listener.into_raw_fd())
        .map_err(MainError::Server)?
        .register_service(knid_transport::service::services(Arc::clone(&runtime)));
    server.start().map_err(MainError::Server)?;
    log::info!(
        "knid {} serving on {} (state {})",
        env!("CARGO_PKG_VERSION"),
        config.socket.display(),
        config.state_dir.display()
    );

    // sled clears a failed store only when it opens it anew: once the store's filesystem takes
    // writes again, the signal loop ends and knid exits non-zero for its supervisor to restart it.
    let handle = signals.handle();
    runtime.on_store_writable(move || handle.close());
    for signal in signals.forever() {
        match signal {
            SIGHUP => reload(args, &runtime),
            _ => {
                log::info!("signal {signal}: shutting down");
                break;
            }
        }
    }
    let server = server.stop_listen();
    // Finishes every queued and in-flight operation and flushes the store.
    let shutdown = runtime.shutdown();
    std::thread::sleep(DRAIN_GRACE);
    server.disconnect();
    if let Err(e) = std::fs::remove_file(&config.socket) {
        log::warn!("remove {}: {e}", config.socket.display());
    }
    if let Some(failure) = runtime.store_failure() {
        return Err(MainError::StoreFailed(failure));
    }
    shutdown.map_err(|e| MainError::Shutdown(Box::new(e)))?;
    log::info!("knid stopped");
    Ok(())
}

fn reload(args: &Args, runtime: &Runtime) {
    log::info!("SIGHUP: reloading networks and required extensions");
    match load_config(args).and_then(|c| {
        runtime
            .reload(&c)
            .map_err(|e| MainError::Runtime(Box::new(e)))
    }) {
        Ok(()) => log::info!("networks and required extensions reloaded"),
        Err(e) => log::error!(
            "reload failed, keeping the running configuration: {}",
            chain(&e)
        ),
    }
}
