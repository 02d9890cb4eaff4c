//! `knid-example-extension`: a small `knid.v1.Extension` server, to try extensions out and for
//! knid's end-to-end tests. It accepts every call unless told otherwise, and can write down what
//! knid sent it.
//!
//! ```text
//! knid-example-extension --socket /run/mesh/ext.sock --record /tmp/calls.jsonl &
//! knictl extension register mesh --extension-socket /run/mesh/ext.sock --phase post-attach --phase pre-detach
//! ```
//!
//! Stops cleanly on SIGTERM or SIGINT, removing its socket.

#![forbid(unsafe_code)]

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::IntoRawFd;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Parser;
use knid_transport::pb;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use ttrpc::TtrpcContext;

/// An example knid extension: serves knid.v1.Extension on a unix socket.
#[derive(Debug, Parser)]
#[command(about)]
struct Args {
    /// Unix socket to serve on.
    #[arg(long)]
    socket: PathBuf,
    /// Name written in each --record line, to tell extensions sharing a file apart.
    #[arg(long, default_value = "example")]
    name: String,
    /// Refuse every OnAttach (ok=false) with this message.
    #[arg(long, value_name = "MESSAGE")]
    fail_attach: Option<String>,
    /// Wait this long before answering OnAttach, in milliseconds.
    #[arg(long, value_name = "N", default_value_t = 0)]
    delay_ms: u64,
    /// Answer Health with ok=false.
    #[arg(long)]
    unhealthy: bool,
    /// Append one JSON line per call to this file: method, phase, sandbox id and state, the
    /// ifnames, and the sandbox's interfaces with their addresses.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
}

/// The extension's behaviour, fixed by the flags.
struct Example {
    name: String,
    fail_attach: Option<String>,
    delay: Duration,
    unhealthy: bool,
    /// Opened for appending; one write per line, so lines of concurrent calls never mix.
    record: Option<Mutex<File>>,
}

impl Example {
    fn note(&self, method: &str, call: Option<&pb::ExtensionCallRequest>) {
        let Some(file) = &self.record else { return };
        let mut line = serde_json::json!({ "extension": self.name, "method": method });
        if let Some(req) = call {
            let sandbox = req.sandbox.get_or_default();
            line["phase"] = req.phase.clone().into();
            line["sandbox"] = sandbox.id.clone().into();
            line["netns"] = sandbox.netns_path.clone().into();
            line["state"] = sandbox.state.clone().into();
            line["ifnames"] = req.ifnames.clone().into();
            line["interfaces"] = sandbox
                .interfaces
                .iter()
                .map(|i| {
                    serde_json::json!({
                        "name": i.name,
                        "ips": i.ips.iter().map(|ip| ip.address.clone()).collect::<Vec<_>>(),
                    })
                })
                .collect::<Vec<_>>()
                .into();
        }
        let mut text = line.to_string();
        text.push('\n');
        let mut file = file.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(e) = file.write_all(text.as_bytes()) {
            eprintln!("knid-example-extension: cannot record {method}: {e}");
        }
    }
}

impl pb::Extension for Example {
    fn on_attach(
        &self,
        _ctx: &TtrpcContext,
        req: pb::ExtensionCallRequest,
    ) -> ttrpc::Result<pb::ExtensionCallResponse> {
        self.note("OnAttach", Some(&req));
        std::thread::sleep(self.delay);
        let mut resp = pb::ExtensionCallResponse::new();
        match &self.fail_attach {
            Some(message) => resp.message = message.clone(),
            None => resp.ok = true,
        }
        Ok(resp)
    }

    fn on_detach(
        &self,
        _ctx: &TtrpcContext,
        req: pb::ExtensionCallRequest,
    ) -> ttrpc::Result<pb::ExtensionCallResponse> {
        self.note("OnDetach", Some(&req));
        let mut resp = pb::ExtensionCallResponse::new();
        resp.ok = true;
        Ok(resp)
    }

    fn health(
        &self,
        _ctx: &TtrpcContext,
        _req: pb::HealthRequest,
    ) -> ttrpc::Result<pb::HealthResponse> {
        self.note("Health", None);
        let mut resp = pb::HealthResponse::new();
        resp.ok = !self.unhealthy;
        if self.unhealthy {
            resp.message = format!("{} is unhealthy (--unhealthy)", self.name);
        }
        Ok(resp)
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("knid-example-extension: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> Result<(), String> {
    // Registered first, so a SIGTERM during start-up still removes the socket.
    let mut signals =
        Signals::new([SIGTERM, SIGINT]).map_err(|e| format!("signal handlers: {e}"))?;
    let record = match &args.record {
        Some(path) => Some(Mutex::new(
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| format!("open {}: {e}", path.display()))?,
        )),
        None => None,
    };
    let example = Example {
        name: args.name,
        fail_attach: args.fail_attach,
        delay: Duration::from_millis(args.delay_ms),
        unhealthy: args.unhealthy,
        record,
    };
    let listener = knid_transport::socket::bind_listener(&args.socket, 0o660, None)
        .map_err(|e| knid_core::error::chain(&e))?;
    let mut server = ttrpc::Server::new()
        .add_listener(listener.into_raw_fd())
        .map_err(|e| format!("ttrpc listener: {e}"))?
        .register_service(pb::create_extension(Arc::new(example)));
    server.start().map_err(|e| format!("ttrpc server: {e}"))?;
    eprintln!(
        "knid-example-extension: serving knid.v1.Extension on {}",
        args.socket.display()
    );
    if let Some(signal) = signals.forever().next() {
        eprintln!("knid-example-extension: signal {signal}, stopping");
    }
    server.shutdown();
    std::fs::remove_file(&args.socket)
        .map_err(|e| format!("remove {}: {e}", args.socket.display()))?;
    Ok(())
}
