//! `knid`: the node-local pod network runtime daemon. Flags, configuration, wiring and signals;
//! everything else lives in the library crates.

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use knid_core::error::chain;
use knid_core::{Config, Runtime};
use knid_store::{Store, StoreConfig};
use knid_transport::server::{Leave, Server};
use signals::Signals;

mod chores;
mod logging;
mod signals;

/// Default configuration file.
const DEFAULT_CONFIG_PATH: &str = "/etc/knid/knid.toml";
/// The name of knid's claim on the network namespace it serves (an abstract unix socket,
/// `knid_netops::netns_claim`), held for as long as it runs.
const NETNS_CLAIM: &str = "knid/netns";
/// Time given to handler threads to write the last responses before connections close.
const DRAIN_GRACE: Duration = Duration::from_millis(100);

/// knid: the pod network runtime. Serves knid.v1 over ttrpc on a unix socket.
#[derive(Debug, Clone, Parser)]
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
    /// Log line format on stderr: text, or one JSON object per line.
    #[arg(long, value_enum, default_value = "text", env = "KNID_LOG_FORMAT")]
    log_format: logging::LogFormat,
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
    #[error("state dir: {}", knid_transport::socket::unsafe_dir_message(path, *mode))]
    UnsafeStateDir { path: PathBuf, mode: u32 },
    #[error("state dir {path}: owned by uid {owner}, not knid's uid {uid}: refusing to use it")]
    ForeignStateDir { path: PathBuf, owner: u32, uid: u32 },
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
    #[error(
        "another knid serves this network namespace: its nftables tables, source guards, routes \
         and reaper group have this knid's names, so two would replace and remove each other's; \
         refusing to start, touching nothing (one knid per network namespace)"
    )]
    NetnsClaimed(#[source] knid_netops::Error),
    #[error("API server")]
    Server(#[source] std::io::Error),
    #[error("metrics listener on {addr}")]
    Metrics {
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("signals")]
    Signals(#[source] std::io::Error),
    #[error("the API server stopped serving")]
    ServerStopped,
    #[error("the handling of signals and periodic jobs panicked")]
    ChoresPanicked,
    #[error("shutdown")]
    Shutdown(#[source] Box<knid_core::Error>),
    #[error(
        "store failed; exiting for the supervisor to restart knid, which recovers from the store"
    )]
    StoreFailed(#[source] knid_store::Error),
}

fn main() -> ExitCode {
    knid_netops::malloc::tune_thread_caches();
    knid_netops::malloc::limit_arenas();
    let args = Args::parse();
    if args.print_default_config {
        print!("{}", knid_core::config::DEFAULT_CONFIG);
        return ExitCode::SUCCESS;
    }
    logging::init(args.log_level, args.log_format);
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
    check_state_dir(dir)?;
    let mut store_config = StoreConfig::new(dir.join("store"));
    store_config.cache_capacity_bytes = config.store_cache_bytes;
    store_config.on_migration_step = Some(knid_core::failpoint::store_step);
    let store = Store::open(&store_config).map_err(MainError::Store)?;
    Ok(Arc::new(store))
}

/// Refuses a state dir other users could write in or that someone else owns: whoever can write
/// there can rewrite knid's records, and knid acts on them as root.
fn check_state_dir(dir: &Path) -> Result<(), MainError> {
    use std::os::unix::fs::MetadataExt;
    let stat_err = |source| MainError::StateDir {
        path: dir.to_owned(),
        source,
    };
    if let Some(mode) = knid_transport::socket::world_writable(dir).map_err(stat_err)? {
        return Err(MainError::UnsafeStateDir {
            path: dir.to_owned(),
            mode,
        });
    }
    let owner = std::fs::metadata(dir).map_err(stat_err)?.uid();
    let uid = nix::unistd::geteuid().as_raw();
    if owner != uid {
        return Err(MainError::ForeignStateDir {
            path: dir.to_owned(),
            owner,
            uid,
        });
    }
    Ok(())
}

/// Raises the soft open-files limit to the hard one: every connection is a file descriptor, and
/// the default soft limit (1024) is below `max_connections` plus knid's own files.
fn raise_fd_limit(max_connections: usize) {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    const OWN_FILES: u64 = 256;
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return;
    };
    let want = (max_connections as u64 + OWN_FILES).max(soft).min(hard);
    if want > soft {
        if let Err(e) = setrlimit(Resource::RLIMIT_NOFILE, want, hard) {
            log::warn!("cannot raise the open-files limit from {soft} to {want}: {e}");
        }
    }
    if want < max_connections as u64 + OWN_FILES {
        log::warn!(
            "the open-files limit ({want}) is below max_connections ({max_connections}) plus {OWN_FILES}: \
             connections past it wait until others close"
        );
    }
}

fn run(args: &Args) -> Result<(), MainError> {
    let config = load_config(args)?;
    let api = config.api().map_err(|source| MainError::Config {
        path: args.config.display().to_string(),
        source: Box::new(source),
    })?;
    let metrics_addr = config.metrics_addr().map_err(|source| MainError::Config {
        path: args.config.display().to_string(),
        source: Box::new(source),
    })?;
    raise_fd_limit(api.max_connections);
    // Registered before start-up work so a SIGTERM during start-up is queued, not fatal.
    let signals = Signals::new().map_err(MainError::Signals)?;
    // Before anything that could touch the node: a second knid on this socket stops here.
    let _instance =
        knid_transport::socket::lock_instance(&config.socket).map_err(MainError::Socket)?;
    // And a second knid in this network namespace, on another socket and state dir.
    let _netns = knid_netops::netns_claim::claim(NETNS_CLAIM).map_err(MainError::NetnsClaimed)?;
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
    // sled clears a failed store only when it opens it anew: once the store's filesystem takes
    // writes again, the signals' handle closes, serve_here returns and knid exits non-zero for
    // its supervisor to restart it.
    let handle = signals.handle();
    runtime.on_store_writable(move || handle.close());
    // SIGTERM and SIGINT also stop a periodic round in progress (a health poll of extensions
    // that do not answer may take each one's timeout), so the stop is not held up by it.
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(signal, runtime.jobs_stop_flag())
            .map_err(MainError::Signals)?;
    }
    let reload_args = args.clone();
    let reload_runtime = Arc::clone(&runtime);
    let chores = chores::DaemonChores::new(
        signals,
        Arc::clone(&runtime),
        Box::new(move || reload(&reload_args, &reload_runtime)),
    )
    .map_err(MainError::Signals)?;
    let server = Server::with_chores(
        listener,
        knid_transport::service::services(Arc::clone(&runtime)),
        api,
        Box::new(chores),
    )
    .map_err(MainError::Server)?;
    let metrics = match metrics_addr {
        None => None,
        Some(addr) => Some(start_metrics(addr, &runtime)?),
    };
    log::info!(
        "knid {} serving on {} (state {})",
        env!("CARGO_PKG_VERSION"),
        config.socket.display(),
        config.state_dir.display()
    );

    // The main thread is the API server's thread in epoll whenever knid is idle, and the signals
    // and the periodic jobs are the server's chores, watched in the same wait: an idle knid has
    // this one thread of its own. It returns here when a signal (or the store) asks knid to stop.
    let left = server.serve_here();
    server.stop_listening();
    if let Some(metrics) = metrics {
        metrics.stop();
    }
    // Finishes every queued and in-flight operation and flushes the store.
    let shutdown = runtime.shutdown();
    std::thread::sleep(DRAIN_GRACE);
    server.shutdown();
    if let Err(e) = std::fs::remove_file(&config.socket) {
        log::warn!("remove {}: {e}", config.socket.display());
    }
    if let Some(failure) = runtime.store_failure() {
        return Err(MainError::StoreFailed(failure));
    }
    match left {
        Leave::Asked => {}
        Leave::ChoresPanicked => return Err(MainError::ChoresPanicked),
        Leave::Stopped => return Err(MainError::ServerStopped),
    }
    shutdown.map_err(|e| MainError::Shutdown(Box::new(e)))?;
    log::info!("knid stopped");
    Ok(())
}

/// Serves `GET /metrics` on `addr`; says so, and warns when the address is not loopback (the
/// exposition is unauthenticated).
fn start_metrics(
    addr: std::net::SocketAddr,
    runtime: &Arc<Runtime>,
) -> Result<knid_transport::metrics_http::MetricsListener, MainError> {
    let runtime = Arc::clone(runtime);
    let listener =
        knid_transport::metrics_http::MetricsListener::start(addr, move || runtime.metrics_text())
            .map_err(|source| MainError::Metrics { addr, source })?;
    if addr.ip().is_loopback() {
        log::info!("metrics on http://{}/metrics", listener.local_addr());
    } else {
        log::warn!(
            "metrics on http://{}/metrics, beyond loopback: anyone who reaches it can read them",
            listener.local_addr()
        );
    }
    Ok(listener)
}

fn reload(args: &Args, runtime: &Runtime) {
    log::info!("SIGHUP: reloading networks and required extensions");
    // A file emptied by a half-done edit would read as "no networks": every network without
    // addresses would go.
    if std::fs::read_to_string(&args.config).is_ok_and(|text| text.trim().is_empty()) {
        log::error!(
            "reload refused, keeping the running configuration: {} is empty",
            args.config.display()
        );
        return;
    }
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
