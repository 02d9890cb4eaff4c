//! `knid-grpc`: the optional gRPC front of knid. It serves `kni.KNI` and `knid.v1.Runtime` over
//! gRPC (HTTP/2) on a unix socket, and on a loopback TCP address when asked, and forwards every
//! call, its payload undecoded, to knid's ttrpc socket. The async runtime lives here only: knid
//! itself stays synchronous (tests/grpc.rs checks it links no tokio or tonic).

#![forbid(unsafe_code)]

use std::io;
use std::process::ExitCode;

use clap::Parser;
use knid_core::error::chain;
use tokio::net::{TcpListener, UnixListener};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc;
use tonic::codegen::tokio_stream::wrappers::ReceiverStream;

use forward::Forwarder;
use listeners::Admission;
use settings::{Args, Settings, SettingsError};

mod caller;
mod codec;
mod connection;
mod deadline;
mod forward;
mod listeners;
mod settings;
mod upstream;

/// Accepted connections waiting for the HTTP/2 server to take them.
const ACCEPT_QUEUE: usize = 64;

#[derive(Debug, thiserror::Error)]
enum MainError {
    #[error(transparent)]
    Settings(#[from] SettingsError),
    #[error("gRPC socket")]
    Socket(#[source] knid_transport::socket::SocketError),
    #[error("serve the gRPC socket")]
    Listen(#[source] io::Error),
    #[error("listen on {0}")]
    Tcp(std::net::SocketAddr, #[source] io::Error),
    #[error("async runtime")]
    Runtime(#[source] io::Error),
    #[error("signals")]
    Signals(#[source] io::Error),
    #[error("gRPC server")]
    Serve(#[source] tonic::transport::Error),
}

fn main() -> ExitCode {
    let args = Args::parse();
    env_logger::Builder::new()
        .filter_level(args.log_level.min(log::LevelFilter::Warn))
        .filter_module("knid_grpc", args.log_level)
        .format_timestamp_millis()
        .init();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            log::error!("{}", chain(&e));
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<(), MainError> {
    let settings = Settings::load(args)?;
    // One thread: every call only waits on knid, and one thread keeps the footprint small.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(MainError::Runtime)?;
    runtime.block_on(serve(args, settings))
}

async fn serve(args: &Args, settings: Settings) -> Result<(), MainError> {
    // A second knid-grpc on the same socket is refused before it replaces the first's socket.
    let _lock = knid_transport::socket::lock_instance(&args.socket).map_err(MainError::Socket)?;
    let listener =
        knid_transport::socket::bind_listener(&args.socket, args.socket_mode, settings.socket_gid)
            .map_err(MainError::Socket)?;
    let listener = UnixListener::from_std(listener).map_err(MainError::Listen)?;
    let (tx, rx) = mpsc::channel(ACCEPT_QUEUE);
    let admission = Admission::new(settings.api.clone(), settings.knid_socket.clone(), tx);
    tokio::spawn(admission.clone().serve_unix(listener));
    if let Some(addr) = args.tcp {
        let tcp = TcpListener::bind(addr)
            .await
            .map_err(|e| MainError::Tcp(addr, e))?;
        let local = tcp.local_addr().map_err(|e| MainError::Tcp(addr, e))?;
        log::info!("grpc: serving on tcp {local}");
        tokio::spawn(admission.serve_tcp(tcp, local));
    } else {
        drop(admission);
    }
    log::info!(
        "grpc: serving kni.KNI and knid.v1.Runtime on {} for knid at {} (allowed_uids {:?}, allowed_gids {:?})",
        args.socket.display(),
        settings.knid_socket.display(),
        settings.api.allowed_uids,
        settings.api.allowed_gids
    );
    let mut term = signal(SignalKind::terminate()).map_err(MainError::Signals)?;
    let mut int = signal(SignalKind::interrupt()).map_err(MainError::Signals)?;
    let stop = async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        log::info!("grpc: stopping");
    };
    let served = tonic::transport::Server::builder()
        .serve_with_incoming_shutdown(
            Forwarder::new(settings.api.request_timeout),
            ReceiverStream::new(rx),
            stop,
        )
        .await;
    let _ = std::fs::remove_file(&args.socket);
    served.map_err(MainError::Serve)
}
